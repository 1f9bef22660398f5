package coordinator_test

import (
	"math/rand/v2"
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
