package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestDeleteTopicsKadm deletes a topic with kadm while a stock kgo KIP-848
// consumer is assigned all of it and two groups hold offsets of it: the
// topic is gone from Metadata, its offsets from every group (another
// topic's stay), the consumer loses its partitions at a higher group
// epoch and does not bring the topic back; created again, the topic has a
// new ID and the consumer gets it back at a still higher epoch.
func TestDeleteTopicsKadm(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Core.InitialRebalanceDelay = 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, ts))
	created, err := adm.CreateTopics(ctx, 4, 1, nil, "jobs", "other")
	if err != nil || created["jobs"].Err != nil || created["other"].Err != nil {
		t.Fatalf("CreateTopics: %v %+v", err, created)
	}
	oldID := created["jobs"].ID

	var mu sync.Mutex
	owned := make(map[int32]bool)
	drop := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range m["jobs"] {
			delete(owned, p)
		}
	}
	cl := newKgo(t, ts,
		kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("jobs"),
		kgo.ServerSideBalancer(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m["jobs"] {
				owned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(drop),
		kgo.OnPartitionsLost(drop),
	)
	pollCtx, stopPolling := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for pollCtx.Err() == nil {
			cl.PollFetches(pollCtx)
		}
	}()
	defer func() { stopPolling(); <-pollDone }()
	ownedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(owned)
	}
	eventually(t, 20*time.Second, "the consumer to own jobs", func() bool { return ownedCount() == 4 })
	if err := cl.CommitRecords(ctx, &kgo.Record{Topic: "jobs", Partition: 2, Offset: 41}); err != nil {
		t.Fatalf("consumer commit: %v", err)
	}
	var idle kadm.Offsets
	idle.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 7, LeaderEpoch: -1})
	idle.Add(kadm.Offset{Topic: "other", Partition: 1, At: 9, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "idle", idle); err != nil || r.Error() != nil {
		t.Fatalf("admin commit: %v %v", err, r.Error())
	}
	epochBefore := groupEpoch(ctx, t, adm, "g")

	deleted, err := adm.DeleteTopics(ctx, "jobs")
	if err != nil || deleted["jobs"].Err != nil {
		t.Fatalf("DeleteTopics: %v %+v", err, deleted)
	}
	// kgo answers kadm's Metadata from its cache for a while, so the
	// server is asked directly.
	raw := dial(t, ts.addr)
	md := metadataRequest(12, "jobs")
	md.AllowAutoTopicCreation = false
	if r := raw.roundTrip(md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("Metadata after the deletion: error %d", r.Topics[0].ErrorCode)
	}
	for group, want := range map[string]int{"g": 0, "idle": 1} {
		fetched, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		fetched.Each(func(o kadm.OffsetResponse) {
			if o.Topic == "jobs" {
				t.Errorf("group %s still has an offset of jobs[%d]: %d", group, o.Partition, o.At)
			}
			n++
		})
		if n != want {
			t.Errorf("group %s: %d offsets, want %d", group, n, want)
		}
	}
	eventually(t, 20*time.Second, "the consumer to give up jobs", func() bool { return ownedCount() == 0 })
	epochDeleted := groupEpoch(ctx, t, adm, "g")
	if epochDeleted <= epochBefore {
		t.Fatalf("group epoch %d after the deletion, %d before", epochDeleted, epochBefore)
	}
	// The consumer's metadata refreshes must not have created it again.
	if r := raw.roundTrip(md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("jobs came back: error %d", r.Topics[0].ErrorCode)
	}

	again, err := adm.CreateTopics(ctx, 4, 1, nil, "jobs")
	if err != nil || again["jobs"].Err != nil || again["jobs"].ID == oldID {
		t.Fatalf("CreateTopics again: %v %+v; old ID %v", err, again["jobs"], oldID)
	}
	eventually(t, 20*time.Second, "the consumer to own jobs again", func() bool { return ownedCount() == 4 })
	if e := groupEpoch(ctx, t, adm, "g"); e <= epochDeleted {
		t.Fatalf("group epoch %d with the new jobs, %d after the deletion", e, epochDeleted)
	}
	if fetched, err := adm.FetchOffsets(ctx, "g"); err != nil || len(fetched) != 0 {
		t.Fatalf("offsets of g after the re-creation: %v %+v", err, fetched)
	}
	if n := ts.metric(t, "tenure_topics"); n != 2 {
		t.Fatalf("topics gauge %v, want 2", n)
	}
}

func groupEpoch(ctx context.Context, t *testing.T, adm *kadm.Client, group string) int32 {
	t.Helper()
	d, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil || d[group].Err != nil {
		t.Fatalf("DescribeConsumerGroups: %v %+v", err, d[group])
	}
	return d[group].Epoch
}

// deleteTopicsRequest is a DeleteTopics of names at version, by name.
func deleteTopicsRequest(version int16, names ...string) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = version
	for _, n := range names {
		req.TopicNames = append(req.TopicNames, n)
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestDeleteTopicsBadInput: each refusal's code, per topic, at v0 (names)
// and v6 (names or IDs); a refused topic stays, and the others of the
// request are deleted.
func TestDeleteTopicsBadInput(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.AutoCreateTopics = false })
	c := dial(t, ts.addr)
	create := func(names ...string) map[string][16]byte {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 2, 1
			req.Topics = append(req.Topics, rt)
		}
		ids := make(map[string][16]byte)
		for _, rt := range c.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("create %s: error %d", rt.Topic, rt.ErrorCode)
			}
			ids[rt.Topic] = rt.TopicID
		}
		return ids
	}
	type answer struct {
		topic string
		id    [16]byte
		code  int16
	}
	check := func(what string, resp *kmsg.DeleteTopicsResponse, want []answer) {
		t.Helper()
		if len(resp.Topics) != len(want) {
			t.Fatalf("%s: %d answers, want %d: %+v", what, len(resp.Topics), len(want), resp.Topics)
		}
		for i, w := range want {
			got := resp.Topics[i]
			name := ""
			if got.Topic != nil {
				name = *got.Topic
			}
			if name != w.topic || got.TopicID != w.id || got.ErrorCode != w.code {
				t.Errorf("%s: answer %d is %q %x %v, want %q %x %v", what, i, name, got.TopicID,
					kerr.ErrorForCode(got.ErrorCode), w.topic, w.id, kerr.ErrorForCode(w.code))
			}
			if (got.ErrorMessage != nil) != (w.code == kerr.InvalidRequest.Code && resp.Version >= 5) {
				t.Errorf("%s: answer %d message %v", what, i, got.ErrorMessage)
			}
		}
	}
	exists := func(name string) bool {
		md := metadataRequest(12, name)
		md.AllowAutoTopicCreation = false
		return c.roundTrip(md).(*kmsg.MetadataResponse).Topics[0].ErrorCode == 0
	}

	ids := create("a", "b", "c", "d")
	check("v0: unknown, empty, twice, and one deleted",
		c.roundTrip(deleteTopicsRequest(0, "nope", "", "a", "b", "a")).(*kmsg.DeleteTopicsResponse),
		[]answer{
			{"nope", [16]byte{}, kerr.UnknownTopicOrPartition.Code},
			{"", [16]byte{}, kerr.UnknownTopicOrPartition.Code},
			{"a", [16]byte{}, kerr.InvalidRequest.Code},
			{"b", [16]byte{}, 0},
		})
	if !exists("a") || exists("b") {
		t.Fatalf("after v0: a exists %v (want true), b exists %v (want false)", exists("a"), exists("b"))
	}

	v6 := deleteTopicsRequest(6, "c")
	v6.Topics = append(v6.Topics, []kmsg.DeleteTopicsRequestTopic{
		{TopicID: ids["c"]},                             // c again, by ID
		{Topic: kmsg.StringPtr("d"), TopicID: ids["d"]}, // both
		{},                     // neither
		{TopicID: [16]byte{9}}, // unknown ID
		{TopicID: ids["a"]},    // a, by ID: deleted
		{TopicID: ids["b"]},    // b was deleted
	}...)
	check("v6", c.roundTrip(v6).(*kmsg.DeleteTopicsResponse), []answer{
		{"c", ids["c"], kerr.InvalidRequest.Code},
		{"c", ids["c"], kerr.InvalidRequest.Code},
		{"d", ids["d"], kerr.InvalidRequest.Code},
		{"", [16]byte{}, kerr.InvalidRequest.Code},
		{"", [16]byte{9}, kerr.UnknownTopicID.Code},
		{"a", ids["a"], 0},
		{"", ids["b"], kerr.UnknownTopicID.Code},
	})
	if exists("a") || !exists("c") || !exists("d") {
		t.Fatalf("after v6: a %v (want false), c %v, d %v (want true)", exists("a"), exists("c"), exists("d"))
	}
	if n := ts.metric(t, "tenure_requests_total", "api", "DeleteTopics", "error", "INVALID_REQUEST"); n != 1 {
		t.Fatalf("DeleteTopics requests counted with INVALID_REQUEST: %v, want 1", n)
	}
}

// TestDeleteTopicsGroupOffline: a group whose core is lost at the moment
// of the deletion (a panic) has the deletions of the topic's offsets
// written for it, and comes back without them; a group that restores
// records naming a topic the registry does not hold (deleted while the
// coordinator was down) forgets it, durably, and a topic created again
// under the name does not get the old offsets.
func TestDeleteTopicsGroupOffline(t *testing.T) {
	mem := store.NewMemory()
	ts := startServer(t, func(c *Config) { c.Store = mem })
	var broken atomic.Bool
	ts.coreHook = func(group string) {
		if group == "g" && broken.CompareAndSwap(true, false) {
			panic("injected core failure")
		}
	}
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs", "kept", "late"))
	commit := func(group string, topic string, offset int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group = group
		req.Generation = -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: offset, LeaderEpoch: -1}}
		req.Topics = append(req.Topics, rt)
		if r := c.roundTrip(req).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %s %s: error %d", group, topic, r.Topics[0].Partitions[0].ErrorCode)
		}
	}
	offsets := func(group string) map[string]int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		req.Groups = append(req.Groups, rg)
		resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
		out := make(map[string]int64)
		for _, rt := range resp.Groups[0].Topics {
			for _, rp := range rt.Partitions {
				out[rt.Topic] = rp.Offset
			}
		}
		return out
	}
	commit("g", "jobs", 5)
	commit("g", "kept", 6)
	commit("g", "late", 7)

	broken.Store(true)
	if r := c.roundTrip(deleteTopicsRequest(4, "jobs")).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics: error %d", r.Topics[0].ErrorCode)
	}
	if n := ts.metric(t, "tenure_groups_offline_total", "reason", "panic"); n != 1 {
		t.Fatalf("groups offline %v, want 1: the deletion did not meet the panic", n)
	}
	eventually(t, 5*time.Second, "the group to be reloaded", func() bool {
		got := offsets("g")
		return len(got) == 2 && got["kept"] == 6 && got["late"] == 7
	})

	// "late" is deleted behind the server's back (as by another node of
	// an HA set while this one was down), then the server restarts.
	ts.stop()
	lateID, _, _ := ts.topics.Lookup("late")
	if ok, err := mem.DeleteTopic(context.Background(), &coordinator.TopicRecord{Name: "late", ID: lateID}); err != nil || !ok {
		t.Fatalf("DeleteTopic: %v %v", ok, err)
	}
	ts = startServer(t, func(c *Config) { c.Store = mem })
	c = dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs", "late"))
	if got := offsets("g"); len(got) != 1 || got["kept"] != 6 {
		t.Fatalf("offsets after the restart and the re-creations: %v, want only kept", got)
	}
	recs, _ := mem.Load(context.Background())
	for _, r := range recs {
		if o, ok := r.(*coordinator.OffsetRecord); ok && o.Topic != "kept" {
			t.Errorf("the store still holds an offset of %s", o.Topic)
		}
	}
}

// TestDeleteTopicsStoreFailure: when the groups' deletions cannot be
// written, the topic is kept and the deletion answered with a retriable
// KAFKA_STORAGE_ERROR; once the store works, the retry deletes it.
func TestDeleteTopicsStoreFailure(t *testing.T) {
	fs := &flakyStore{Store: store.NewMemory()}
	ts := startServer(t, func(c *Config) { c.Store, c.TopicStore = fs, fs.Store.(store.TopicStore) })
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	const m = "member-a-000000000000000"
	if r := c.roundTrip(cgHeartbeat("g", m, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("join: error %d", r.ErrorCode)
	}
	fs.fail.Store(true)
	r := c.roundTrip(deleteTopicsRequest(5, "jobs")).(*kmsg.DeleteTopicsResponse)
	if r.Topics[0].ErrorCode != kerr.KafkaStorageError.Code || r.Topics[0].ErrorMessage == nil {
		t.Fatalf("DeleteTopics with a failing store: %+v", r.Topics[0])
	}
	md := metadataRequest(12, "jobs")
	md.AllowAutoTopicCreation = false
	if r := c.roundTrip(md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("the topic is gone after a failed deletion: error %d", r.Topics[0].ErrorCode)
	}
	fs.fail.Store(false)
	eventually(t, 5*time.Second, "the retried deletion", func() bool {
		return c.roundTrip(deleteTopicsRequest(5, "jobs")).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode == 0
	})
	if r := c.roundTrip(md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("Metadata after the deletion: error %d", r.Topics[0].ErrorCode)
	}
}
