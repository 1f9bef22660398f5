package etcdstore_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableGroup returns the snapshot of a real KIP-848 group: 16 members,
// with IDs as clients make them (22 characters of base64url), on one topic
// of 64 partitions, reconciled to a stable assignment, each partition with
// a committed offset.
func stableGroup(t testing.TB, name string) []coordinator.Record {
	t.Helper()
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topicID := coordinator.TopicID{0: 0x5e, 15: 7}
	topics.Add("orders", topicID, 64)
	cfg.Topics = topics
	rng := rand.New(rand.NewPCG(1, 2))
	g := coordinator.NewGroup(name, &cfg, rng)
	now := coreEpoch
	type member struct {
		id    string
		epoch int32
		held  []int32
	}
	var members []*member
	for range 16 {
		var id [16]byte
		for i := range id {
			id[i] = byte(rng.Uint32())
		}
		members = append(members, &member{id: base64.RawURLEncoding.EncodeToString(id[:])})
	}
	heartbeat := func(m *member) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = name
		req.MemberID = m.id
		req.MemberEpoch = m.epoch
		if m.epoch == 0 {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{"orders"}
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(m.held) > 0 {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicID, Partitions: m.held})
		}
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		g.Step(now, coordinator.Request{Msg: req, Resp: resp, ClientID: "orders-worker", ClientHost: "/10.1.2.3"})
		for g.HasReady() {
			g.Advance(g.Ready())
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v", resp.ErrorCode)
		}
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.held = nil
			for _, at := range resp.Assignment.Topics {
				m.held = append(m.held, at.Partitions...)
			}
		}
	}
	for range 10 {
		for _, m := range members {
			heartbeat(m)
			now = now.Add(10 * time.Millisecond)
		}
	}
	for _, m := range members {
		if len(m.held) != 4 {
			t.Fatalf("member holds %d partitions after reconciling, want 4", len(m.held))
		}
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group = name
		req.Generation = m.epoch
		req.MemberID = m.id
		rt := kmsg.OffsetCommitRequestTopic{Topic: "orders"}
		for _, p := range m.held {
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Partition = p
			op.Offset = 1_234_567 + int64(p)
			op.LeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, op)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		resp := kmsg.NewPtrOffsetCommitResponse()
		g.Step(now, coordinator.Request{Msg: req, Resp: resp})
		for g.HasReady() {
			g.Advance(g.Ready())
		}
	}
	return g.Snapshot()
}

// TestBytesPerGroup measures what a real group costs in etcd: the sum of
// the key and value sizes of its records under the default prefix
// (docs/STORE.md quotes it).
func TestBytesPerGroup(t *testing.T) {
	s, cli := openWithPrefix(t, "/tenure/")
	recs := stableGroup(t, "orders-processor")
	persist(t, s, recs...)
	resp, err := cli.Get(testenv.Context(t), "/tenure/groups/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string][2]int{}
	total := 0
	for _, kv := range resp.Kvs {
		kind := "group"
		for _, k := range []string{"members", "assignments", "offsets"} {
			if containsDir(string(kv.Key), k) {
				kind = k
			}
		}
		n := by[kind]
		n[0]++
		n[1] += len(kv.Key) + len(kv.Value)
		by[kind] = n
		total += len(kv.Key) + len(kv.Value)
	}
	for _, kind := range []string{"group", "members", "assignments", "offsets"} {
		t.Logf("%-12s %3d keys %6d bytes (%d per key)", kind, by[kind][0], by[kind][1], by[kind][1]/max(by[kind][0], 1))
	}
	t.Logf("a KIP-848 group of 16 members and 64 partitions with offsets: %d records, %d keys, %d bytes of keys and values", len(recs), len(resp.Kvs), total)
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		kind := "group"
		for _, k := range []string{"members", "assignments", "offsets"} {
			if containsDir(string(kv.Key), k) {
				kind = k
			}
		}
		if !seen[kind] {
			seen[kind] = true
			t.Logf("e.g. %s = %s", kv.Key, kv.Value)
		}
	}
}

func containsDir(key, dir string) bool {
	for i := 0; i+len(dir)+2 <= len(key); i++ {
		if key[i] == '/' && key[i+1:i+1+len(dir)] == dir && key[i+1+len(dir)] == '/' {
			return true
		}
	}
	return false
}

// openWithPrefix opens a store under prefix on a server of its own.
func openWithPrefix(t *testing.T, prefix string) (*etcdstore.Store, *clientv3.Client) {
	t.Helper()
	cli := testenv.EtcdForTest(t).Client(t)
	return openOn(t, cli, etcdstore.Prefix(prefix)), cli
}

// benchEmbedded starts an embedded etcd (fsync on) for a benchmark.
func benchEmbedded(b *testing.B) *etcdstore.Embedded {
	b.Helper()
	e, err := etcdstore.StartEmbedded(context.Background(), b.TempDir(), zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// BenchmarkPersist measures Persist of batches of OffsetRecords against an
// embedded etcd with fsync on: records/s, and the latency of a Persist,
// which is one transaction with the embedded server's limits.
func BenchmarkPersist(b *testing.B) {
	e := benchEmbedded(b)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("offsets=%d", n), func(b *testing.B) {
			s, err := etcdstore.New(context.Background(), e.Client(), append(e.StoreOpts(), etcdstore.Prefix(fmt.Sprintf("/bench/%d/", n)))...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			recs := offsets("g", n)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for _, r := range recs {
					r.(*coordinator.OffsetRecord).Offset++
				}
				if err := s.Persist(context.Background(), recs); err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/1000, "ms/txn")
		})
	}
}

// BenchmarkLoad measures Load of 1,000 real groups (16 members, 64
// offsets each: 97,000 keys) from an embedded etcd.
func BenchmarkLoad(b *testing.B) {
	e := benchEmbedded(b)
	s, err := etcdstore.New(context.Background(), e.Client(), e.StoreOpts()...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	group := stableGroup(b, "template")
	var recs []coordinator.Record
	for i := range 1000 {
		recs = append(recs, renamed(group, fmt.Sprintf("group-%04d", i))...)
		if len(recs) > 20000 || i == 999 {
			if err := s.Persist(context.Background(), recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := s.Load(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != 1000*len(group) {
			b.Fatalf("loaded %d records, want %d", len(got), 1000*len(group))
		}
	}
	b.ReportMetric(float64(1000*len(group)*b.N)/b.Elapsed().Seconds(), "records/s")
}

// renamed returns copies of a group's records under another name.
func renamed(recs []coordinator.Record, name string) []coordinator.Record {
	out := make([]coordinator.Record, len(recs))
	for i, r := range recs {
		switch r := r.(type) {
		case *coordinator.GroupRecord:
			c := *r
			c.Group = name
			out[i] = &c
		case *coordinator.MemberRecord:
			c := *r
			c.Group = name
			out[i] = &c
		case *coordinator.AssignmentRecord:
			c := *r
			c.Group = name
			out[i] = &c
		case *coordinator.OffsetRecord:
			c := *r
			c.Group = name
			out[i] = &c
		}
	}
	return out
}
