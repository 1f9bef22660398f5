package etcdstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// stableGroup returns the snapshot of a real KIP-848 group: 16 members,
// 64 partitions, every partition with a committed offset.
func stableGroup(tb testing.TB, name string) []coordinator.Record {
	recs, _ := testgroups.Stable(tb, name)
	return recs
}

// TestBytesPerGroup measures what a real group costs in etcd: the sum of
// the key and value sizes of its records under the default prefix, with
// its offsets in the batch Persist wrote and after a fold put them in
// their partition keys (docs/STORE.md quotes it).
func TestBytesPerGroup(t *testing.T) {
	s, cli := openWithPrefix(t, "/tenure/")
	recs := stableGroup(t, "orders-processor")
	persist(t, s, recs...)
	kinds := []string{"group", "members", "assignments", "offsets", "obatch"}
	measure := func(when string) {
		resp, err := cli.Get(testenv.Context(t), "/tenure/groups/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		by := map[string][2]int{}
		total := 0
		seen := map[string]bool{}
		for _, kv := range resp.Kvs {
			kind := "group"
			for _, k := range kinds[1:] {
				if containsDir(string(kv.Key), k) {
					kind = k
				}
			}
			n := by[kind]
			n[0]++
			n[1] += len(kv.Key) + len(kv.Value)
			by[kind] = n
			total += len(kv.Key) + len(kv.Value)
			if !seen[kind] {
				seen[kind] = true
				t.Logf("%s: e.g. %s = %s", when, kv.Key, kv.Value)
			}
		}
		for _, kind := range kinds {
			t.Logf("%s: %-12s %3d keys %6d bytes (%d per key)", when, kind, by[kind][0], by[kind][1], by[kind][1]/max(by[kind][0], 1))
		}
		t.Logf("%s: a KIP-848 group of 16 members and 64 partitions with offsets: %d records, %d keys, %d bytes of keys and values", when, len(recs), len(resp.Kvs), total)
	}
	measure("persisted")
	if _, err := s.Fold(testenv.Context(t), "orders-processor"); err != nil {
		t.Fatal(err)
	}
	measure("folded")
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
func benchEmbedded(b *testing.B) *embedetcd.Etcd {
	b.Helper()
	e, err := embedetcd.Start(context.Background(), b.TempDir(), zap.NewNop())
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
		recs = append(recs, testgroups.Renamed(group, fmt.Sprintf("group-%04d", i))...)
		if len(recs) > 20000 || i == 999 {
			if err := s.Persist(context.Background(), recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add(testgroups.Topic.Name, testgroups.Topic.ID, testgroups.Topic.Partitions)
	cfg.Topics = topics
	for _, restore := range []bool{false, true} {
		// With restore, every group is also rebuilt into a core, as a
		// restarted server does before it serves: the restart's cost.
		b.Run(fmt.Sprintf("restore=%t", restore), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				got, err := s.Load(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != 1000*len(group) {
					b.Fatalf("loaded %d records, want %d", len(got), 1000*len(group))
				}
				if !restore {
					continue
				}
				for j := 0; j < len(got); j += len(group) {
					name := got[j].(*coordinator.GroupRecord).Group
					g, err := coordinator.Restore(name, &cfg, rand.New(rand.NewPCG(1, 2)), coreEpoch, got[j:j+len(group)])
					if err != nil || g.MemberCount() != 16 {
						b.Fatalf("restore %s: %v", name, err)
					}
				}
			}
			b.ReportMetric(float64(1000*len(group)*b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/load")
		})
	}
}
