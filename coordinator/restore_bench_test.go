package coordinator_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// BenchmarkRestore measures coordinator.Restore of one real KIP-848
// group (testgroups.Stable: 16 members, 64 partitions, an offset each),
// as a new leader runs it for every group it takes over.
func BenchmarkRestore(b *testing.B) {
	recs, _ := testgroups.Stable(b, "bench")
	cfg := stableConfig()
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
	cfg := stableConfig()
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

// BenchmarkTakeoverHeartbeats measures what a new coordinator spends on a
// group it took over from a warm standby until every member was heard:
// the install's Resume, then each of the 16 members' first heartbeat, a
// full one (subscription, owned partitions and rebalance timeout), as a
// client sends after its coordinator changed; each is answered with the
// member's whole assignment. The groups are rebuilt ahead in batches of
// 1,000 (not timed), from records holding their own topic names as the
// store's do (testgroups.Decoded), so that each one is as cold in the
// caches as at a takeover of 10,000 groups.
func BenchmarkTakeoverHeartbeats(b *testing.B) {
	recs, members := testgroups.Stable(b, "template")
	cfg := stableConfig()
	cfg.TakeoverGrace = 30 * time.Second
	const batch = 1000
	names := make([]string, batch)
	named := make([][]coordinator.Record, batch)
	for i := range named {
		names[i] = fmt.Sprintf("g-%04d", i)
		named[i] = testgroups.Decoded(recs, names[i])
	}
	reqs := make([][]*kmsg.ConsumerGroupHeartbeatRequest, batch)
	for i := range reqs {
		for _, m := range members {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version = 1
			req.Group = names[i]
			req.MemberID = m.ID
			req.MemberEpoch = m.Epoch
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{testgroups.Topic.Name}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: testgroups.Topic.ID, Partitions: m.Partitions}}
			reqs[i] = append(reqs[i], req)
		}
	}
	built := make([]*coordinator.Group, batch)
	rebuild := func() {
		for i := range built {
			g, err := coordinator.Rebuild(names[i], &cfg, rand.New(rand.NewPCG(1, 2)), named[i])
			if err != nil {
				b.Fatal(err)
			}
			built[i] = g
		}
		runtime.GC()
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	var ref any = "ref"
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	i := batch
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			rebuild()
			i = 0
			b.StartTimer()
		}
		g := built[i]
		g.Step(now, coordinator.Resume{})
		for _, req := range reqs[i] {
			g.Step(now, coordinator.Request{Ref: ref, Msg: req, Resp: resp, ClientID: "orders-worker", ClientHost: "/10.1.2.3"})
			if resp.ErrorCode != 0 || resp.Assignment == nil {
				b.Fatalf("heartbeat of %s: error %d, assignment %v", req.MemberID, resp.ErrorCode, resp.Assignment)
			}
		}
		g.Advance(g.Ready())
		built[i] = nil
		i++
	}
}
