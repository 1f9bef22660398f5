package server

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestDeclaredTopics: declared topics exist before the first client
// arrives, for clients that never create topics (librdkafka); one that
// exists keeps its ID and partition count, with a warning.
func TestDeclaredTopics(t *testing.T) {
	st := store.NewMemory()
	old, err := st.CreateTopic(context.Background(), &coordinator.TopicRecord{Name: "old", ID: coordinator.TopicID{1, 2, 3}, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	obs, logs := observer.New(zapcore.WarnLevel)
	ts := startServerLogger(t, zap.New(obs), func(c *Config) {
		c.Store = st
		c.AutoCreateTopics = false
		c.Topics = []TopicSpec{{Name: "work", Partitions: 8}, {Name: "old", Partitions: 16}}
	})
	c := dial(t, ts.addr)
	md := metadataRequest(12, "work", "old")
	md.AllowAutoTopicCreation = false
	r := c.roundTrip(md).(*kmsg.MetadataResponse)
	if len(r.Topics) != 2 || r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 8 {
		t.Fatalf("declared topic work: %+v", r.Topics)
	}
	if r.Topics[1].ErrorCode != 0 || len(r.Topics[1].Partitions) != 4 || r.Topics[1].TopicID != old.ID {
		t.Fatalf("topic old must keep its 4 partitions and its ID: %+v", r.Topics[1])
	}
	if n := logs.FilterMessageSnippet("declared topic exists with another partition count").Len(); n != 1 {
		t.Errorf("%d warnings about old's partition count, want 1", n)
	}
	if recs, err := st.LoadTopics(context.Background()); err != nil || len(recs) != 2 {
		t.Errorf("stored topics %v, %v: want old and work", recs, err)
	}
}

func TestDeclaredTopicsInvalid(t *testing.T) {
	for _, topics := range [][]TopicSpec{
		{{Name: "no spaces", Partitions: 1}},
		{{Name: "a", Partitions: 0}},
		{{Name: "a", Partitions: 1 << 20}},
		{{Name: "a", Partitions: 1}, {Name: "a", Partitions: 2}},
	} {
		cfg := DefaultConfig()
		cfg.Store = store.NewMemory()
		cfg.Topics = topics
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: error %v, want ErrInvalidConfig", topics, err)
		}
	}
}

// TestUnknownTopicLoggedOnce: a client that asks for a topic that does not
// exist, without creating it, is told UNKNOWN_TOPIC_OR_PARTITION, and the
// operator is told once per client and topic, however often it asks.
func TestUnknownTopicLoggedOnce(t *testing.T) {
	obs, logs := observer.New(zapcore.WarnLevel)
	ts := startServerLogger(t, zap.New(obs), nil)
	c := dial(t, ts.addr)
	md := metadataRequest(12, "missing")
	md.AllowAutoTopicCreation = false
	for range 5 {
		if r := c.roundTrip(md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("error %d, want UNKNOWN_TOPIC_OR_PARTITION", r.Topics[0].ErrorCode)
		}
	}
	hb := cgHeartbeat("g", "member-a-000000000000000", 0)
	hb.SubscribedTopicNames = []string{"also-missing"}
	c.roundTrip(hb)
	c.roundTrip(hb)
	entries := logs.FilterMessageSnippet("a client asked for a topic that does not exist").All()
	if len(entries) != 2 {
		t.Fatalf("%d warnings, want one per topic: %v", len(entries), entries)
	}
	for i, want := range []string{"missing", "also-missing"} {
		if got := entries[i].ContextMap()["topic"]; got != want {
			t.Errorf("warning %d names topic %v, want %s", i, got, want)
		}
	}
}
