package coordinator

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicBench is a classic group driven directly, as the server drives
// it, with every reply checked.
type classicBench struct {
	tb   testing.TB
	cfg  Config
	g    *Group
	now  time.Time
	ids  []string
	meta []byte
}

func newClassicBench(tb testing.TB) *classicBench {
	topics := NewStaticTopics()
	topics.Add("t", TopicID{15: 1}, 64)
	b := &classicBench{tb: tb, cfg: DefaultConfig(), now: testEpoch}
	b.cfg.Topics = topics
	b.cfg.MaxGroupSize = 1 << 20
	b.g = NewGroup("g", &b.cfg, rand.New(rand.NewPCG(1, 2)))
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	b.meta = meta.AppendTo(nil)
	return b
}

// joinReq is a JoinGroup v9 of member id ("" for a new one).
func (b *classicBench) joinReq(id string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group = "g"
	req.SessionTimeoutMillis = 10000
	req.RebalanceTimeoutMillis = 60000
	req.MemberID = id
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: b.meta}}
	return req
}

// build makes a Stable group of n members with partitions spread by plan.
func (b *classicBench) build(n int) {
	for i := range n {
		b.g.Step(b.now, Request{Ref: i, Msg: b.joinReq(""), ClientID: "c"})
		resp := b.g.Ready().Replies[0].Msg.(*kmsg.JoinGroupResponse)
		b.ids = append(b.ids, resp.MemberID)
		b.g.Advance(b.g.Ready())
		b.g.Step(b.now, Request{Ref: i, Msg: b.joinReq(resp.MemberID), ClientID: "c"})
		b.g.Advance(b.g.Ready())
	}
	for b.g.classic.phase == classicPreparing {
		b.now = b.g.Ready().NextTick
		b.g.Step(b.now, Tick{})
		b.g.Advance(b.g.Ready())
	}
	b.sync(b.plan(0))
}

// plan spreads the 64 partitions over the members in contiguous ranges,
// rotated by shift members.
func (b *classicBench) plan(shift int) []kmsg.SyncGroupRequestGroupAssignment {
	n := len(b.ids)
	per := make([][]int32, n)
	for p := range int32(64) {
		i := (int(p)*n/64 + shift) % n
		per[i] = append(per[i], p)
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, n)
	for i, id := range b.ids {
		var a kmsg.ConsumerMemberAssignment
		if len(per[i]) > 0 {
			a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: per[i]}}
		}
		out[i] = kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)}
	}
	return out
}

// sync sends every member's SyncGroup, the leader's with the plan.
func (b *classicBench) sync(plan []kmsg.SyncGroupRequestGroupAssignment) {
	leader := b.g.classic.leader
	for _, id := range b.ids {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = 5
		req.Group = "g"
		req.Generation = b.g.Epoch()
		req.MemberID = id
		if id == leader {
			req.GroupAssignment = plan
		}
		b.g.Step(b.now, Request{Ref: id, Msg: req})
	}
	if b.g.classic.phase != classicStable {
		b.tb.Fatalf("group %s after the syncs", b.g.State())
	}
	b.g.Advance(b.g.Ready())
}

// rebalance runs one full rebalance: the leader rejoins, then every other
// member, then everyone syncs.
func (b *classicBench) rebalance(reqs []*kmsg.JoinGroupRequest, plan []kmsg.SyncGroupRequestGroupAssignment) {
	for i, req := range reqs {
		b.g.Step(b.now, Request{Ref: i, Msg: req})
	}
	if b.g.classic.phase != classicCompleting {
		b.tb.Fatalf("group %s after the joins", b.g.State())
	}
	b.g.Advance(b.g.Ready())
	b.sync(plan)
}

// rejoinReqs are the JoinGroups of a rebalance, the leader's first.
func (b *classicBench) rejoinReqs() []*kmsg.JoinGroupRequest {
	leader := b.g.classic.leader
	reqs := []*kmsg.JoinGroupRequest{b.joinReq(leader)}
	for _, id := range b.ids {
		if id != leader {
			reqs = append(reqs, b.joinReq(id))
		}
	}
	return reqs
}

// BenchmarkClassicHeartbeat is the steady state of a Stable 16-member
// group: one Heartbeat per op with a preallocated response, and the Ready
// drained as the server does.
func BenchmarkClassicHeartbeat(tb *testing.B) {
	b := newClassicBench(tb)
	b.build(16)
	b.heartbeats(tb, true)
}

// heartbeats times one Heartbeat per op, from each member in turn at the
// current generation, with a preallocated response; then the group
// advances, after draining its Ready as the server does if ready is set.
func (b *classicBench) heartbeats(tb *testing.B, ready bool) {
	reqs := make([]*kmsg.HeartbeatRequest, len(b.ids))
	for i, id := range b.ids {
		reqs[i] = kmsg.NewPtrHeartbeatRequest()
		reqs[i].Version = 4
		reqs[i].Group = "g"
		reqs[i].Generation = b.g.Epoch()
		reqs[i].MemberID = id
	}
	resp := kmsg.NewPtrHeartbeatResponse()
	ref := any(&resp)
	tb.ReportAllocs()
	tb.ResetTimer()
	for i := range tb.N {
		b.g.Step(b.now, Request{Ref: ref, Msg: reqs[i%len(reqs)], Resp: resp})
		if resp.ErrorCode != 0 {
			tb.Fatalf("heartbeat: %d", resp.ErrorCode)
		}
		if ready {
			b.g.Ready()
		}
		b.g.Advance(b.g.Ready())
	}
}

// BenchmarkClassicRebalance is one full rebalance of 64 partitions over 16
// members per op: 16 JoinGroups, the join phase completing, 16 SyncGroups.
// With moves=64 the plans alternate so that every partition changes owner
// (and token) every time; with moves=0 the plan stays the same.
func BenchmarkClassicRebalance(tb *testing.B) {
	for _, moves := range []int{64, 0} {
		tb.Run(fmt.Sprintf("moves=%d", moves), func(tb *testing.B) {
			b := newClassicBench(tb)
			b.build(16)
			reqs := b.rejoinReqs()
			plans := [][]kmsg.SyncGroupRequestGroupAssignment{b.plan(1), b.plan(0)}
			if moves == 0 {
				plans[0] = plans[1]
			}
			tb.ReportAllocs()
			tb.ResetTimer()
			for i := range tb.N {
				b.rebalance(reqs, plans[i%2])
			}
		})
	}
}

// BenchmarkClassicLargeGroup measures a group of 10,000 members: the
// memory each member costs, a heartbeat at that size, and a full
// rebalance (per op: every member rejoins and syncs; ns/member reported).
func BenchmarkClassicLargeGroup(tb *testing.B) {
	const n = 10000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := newClassicBench(tb)
	b.build(n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	bytesPerMember := float64(after.HeapAlloc-before.HeapAlloc) / n

	tb.Run("heartbeat", func(tb *testing.B) {
		b.heartbeats(tb, false)
		tb.ReportMetric(bytesPerMember, "B/member")
	})
	tb.Run("rebalance", func(tb *testing.B) {
		reqs := b.rejoinReqs()
		plan := b.plan(0)
		tb.ReportAllocs()
		tb.ResetTimer()
		for range tb.N {
			b.rebalance(reqs, plan)
		}
		tb.ReportMetric(float64(tb.Elapsed().Nanoseconds())/float64(tb.N)/n, "ns/member")
	})
}
