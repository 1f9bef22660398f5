package coordinator_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// BenchmarkRestore measures coordinator.Restore of one real KIP-848
// group (testgroups.Stable: 16 members, 64 partitions, an offset each),
// as a new leader runs it for every group it takes over.
func BenchmarkRestore(b *testing.B) {
	recs, _ := testgroups.Stable(b, "bench")
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add(testgroups.Topic.Name, testgroups.Topic.ID, testgroups.Topic.Partitions)
	cfg.Topics = topics
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := coordinator.Restore("bench", &cfg, rand.New(rand.NewPCG(1, 2)), now, recs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRebuiltMemory measures what a warm standby holds per group it
// keeps rebuilt (coordinator.Rebuild): the heap retained by 1,000 real
// groups (testgroups.Stable: 16 members, 64 partitions, an offset each),
// per group and per member.
func BenchmarkRebuiltMemory(b *testing.B) {
	recs, _ := testgroups.Stable(b, "template")
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add(testgroups.Topic.Name, testgroups.Topic.ID, testgroups.Topic.Partitions)
	cfg.Topics = topics
	const groups = 1000
	named := make([][]coordinator.Record, groups)
	for i := range named {
		named[i] = testgroups.Renamed(recs, fmt.Sprintf("g-%04d", i))
	}
	var perGroup float64
	for b.Loop() {
		before := heapInUse()
		built := make([]*coordinator.Group, groups)
		for i := range built {
			g, err := coordinator.Rebuild(fmt.Sprintf("g-%04d", i), &cfg, rand.New(rand.NewPCG(1, 2)), named[i])
			if err != nil {
				b.Fatal(err)
			}
			built[i] = g
		}
		perGroup = float64(heapInUse()-before) / groups
		runtime.KeepAlive(built)
	}
	b.ReportMetric(perGroup, "bytes/group")
	b.ReportMetric(perGroup/16, "bytes/member")
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
