package coordinator

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRestoredDeadlineSpread: the spread of a restored member's deadline
// is the hash of the group, a NUL and the member ID, whichever way it is
// computed: the deadlines a takeover gives do not move with the code.
func TestRestoredDeadlineSpread(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TakeoverGrace = 30 * time.Second
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, m := range []struct{ group, member string }{{"g", "m"}, {"orders", "Zm9vYmFyYmF6cXV4MTIzNA"}, {"", ""}} {
		ms := uint64(cfg.TakeoverGrace / 8 / time.Millisecond)
		want := now.Add(cfg.TakeoverGrace + time.Duration(xxhash.Sum64String(m.group+"\x00"+m.member)%ms)*time.Millisecond)
		if got := cfg.restoredDeadline(now, m.group, m.member, 10*time.Second); !got.Equal(want) {
			t.Errorf("restoredDeadline(%q, %q) = %v, want %v", m.group, m.member, got, want)
		}
	}
}

// TestResumeLeavesSessionsToTick: Resume starts the sessions of a rebuilt
// group's members without touching the members (a takeover resumes
// thousands of groups while their members' first heartbeats arrive,
// each then touching its member anyway): each session ends at its
// restoredDeadline from the Resume, as the group's next tick and its
// view say, until the member is heard from.
func TestResumeLeavesSessionsToTick(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TakeoverGrace = 30 * time.Second
	topics := NewStaticTopics()
	topics.Add("t", TopicID{15: 1}, 8)
	cfg.Topics = topics
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	g := NewGroup("g", &cfg, rand.New(rand.NewPCG(1, 2)))
	var recs []Record
	ids := []string{"m-0000000000000000000001", "m-0000000000000000000002", "m-0000000000000000000003"}
	for _, id := range ids {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", id, 60000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		g.Step(start, Request{Ref: id, Msg: req})
		rd := g.Ready()
		recs = append(recs, rd.Persist...)
		g.Advance(rd)
	}
	rebuilt, err := Rebuild("g", &cfg, rand.New(rand.NewPCG(1, 2)), recs)
	if err != nil {
		t.Fatal(err)
	}
	at := start.Add(time.Minute)
	rebuilt.Step(at, Resume{})
	var first time.Time
	for _, id := range ids {
		mem := rebuilt.consumer.members[id]
		if !mem.deadline.IsZero() {
			t.Errorf("member %s: Resume set its deadline", id)
		}
		want := cfg.restoredDeadline(at, "g", id, cfg.ConsumerSessionTimeout)
		if got := rebuilt.deadlineOf(mem); !got.Equal(want) {
			t.Errorf("member %s: session ends at %v, want %v", id, got, want)
		}
		if first.IsZero() || want.Before(first) {
			first = want
		}
	}
	if next := rebuilt.Ready().NextTick; !next.Equal(first) {
		t.Errorf("next tick %v, want the first session's end %v", next, first)
	}
	rebuilt.Step(first.Add(-time.Nanosecond), Tick{})
	if n := rebuilt.MemberCount(); n != len(ids) {
		t.Fatalf("%d members left before the first session ended", n)
	}
	rebuilt.Step(first, Tick{})
	if n := rebuilt.MemberCount(); n != len(ids)-1 {
		t.Fatalf("%d members left once the first session ended, want %d", n, len(ids)-1)
	}
}
