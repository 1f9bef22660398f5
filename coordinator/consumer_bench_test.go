package coordinator

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/benchcpu"
)

// benchGroup is a KIP-848 group driven through Step, as the server would.
type benchGroup struct {
	cfg    Config
	g      *Group
	now    time.Time
	ids    []string
	epochs map[string]int32
	held   map[string][]kmsg.ConsumerGroupHeartbeatRequestTopic
}

func newBenchGroup(tb testing.TB, partitions int32, maxSize int) *benchGroup {
	cfg := DefaultConfig()
	topics := NewStaticTopics()
	topics.Add("t", TopicID{15: 1}, partitions)
	cfg.Topics = topics
	cfg.MaxGroupSize = maxSize
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	b := &benchGroup{cfg: cfg, now: testEpoch, epochs: map[string]int32{}, held: map[string][]kmsg.ConsumerGroupHeartbeatRequestTopic{}}
	b.g = NewGroup("g", &b.cfg, rand.New(rand.NewPCG(1, 2)))
	return b
}

// beat sends id's heartbeat (join if it has no epoch) reporting what it
// holds, and applies the answer.
func (b *benchGroup) beat(id string, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = id
	req.MemberEpoch = b.epochs[id]
	req.Topics = b.held[id]
	if req.Topics == nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if req.MemberEpoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"t"}
	}
	b.g.Step(b.now, Request{Ref: id, Msg: req, Resp: resp})
	b.g.Advance(b.g.Ready())
	if resp.ErrorCode != 0 {
		panic(fmt.Sprintf("heartbeat of %s: error %d", id, resp.ErrorCode))
	}
	b.epochs[id] = resp.MemberEpoch
	if resp.Assignment != nil {
		var topics []kmsg.ConsumerGroupHeartbeatRequestTopic
		for _, t := range resp.Assignment.Topics {
			topics = append(topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
		b.held[id] = topics
	}
}

// converge heartbeats every member until the group is Stable.
func (b *benchGroup) converge(tb testing.TB) {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	for range 10 {
		if b.g.State() == "Stable" {
			return
		}
		for _, id := range b.ids {
			b.beat(id, resp)
		}
	}
	tb.Fatalf("group did not converge: %s", b.g)
}

// addMembers joins n members one by one, each with its own epoch bump.
func (b *benchGroup) addMembers(n int) {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	for range n {
		id := fmt.Sprintf("member-%05d", len(b.ids))
		b.ids = append(b.ids, id)
		b.beat(id, resp)
	}
}

// BenchmarkConsumerHeartbeat is the steady-state heartbeat of a stable
// 16-member group over 64 partitions (a keepalive: Topics null), with a
// preallocated response. Target: < 1 µs, 0 allocs/op.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	bg := newBenchGroup(b, 64, 100)
	bg.addMembers(16)
	bg.converge(b)
	reqs := make([]*kmsg.ConsumerGroupHeartbeatRequest, len(bg.ids))
	for i, id := range bg.ids {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "g"
		req.MemberID = id
		req.MemberEpoch = bg.epochs[id]
		reqs[i] = req
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	var ref any = "ref"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		bg.g.Step(bg.now, Request{Ref: ref, Msg: reqs[i%len(reqs)], Resp: resp})
		bg.g.Advance(bg.g.Ready())
	}
	if resp.ErrorCode != 0 || bg.g.State() != "Stable" {
		b.Fatalf("error %d, state %s", resp.ErrorCode, bg.g.State())
	}
}

// BenchmarkConsumerReconcileCold is a full reconciliation from cold: 16
// members join an empty group one by one (16 epoch bumps) and heartbeat
// until the 64 partitions are spread and the group is Stable.
func BenchmarkConsumerReconcileCold(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		bg := newBenchGroup(b, 64, 100)
		bg.addMembers(16)
		bg.converge(b)
	}
}

// BenchmarkConsumerLargeGroup measures a 10,000-member group over 64
// partitions: the cost of one more join (an epoch bump and a target
// computation over every member), of a steady-state heartbeat, and the
// memory each member costs (bytes/member, from runtime.MemStats).
func BenchmarkConsumerLargeGroup(b *testing.B) {
	const n = 10000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	bg := newBenchGroup(b, 64, 2*n)
	bg.addBulk(b, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMember := float64(after.HeapAlloc-before.HeapAlloc) / n

	b.Run("join", func(b *testing.B) {
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		b.ReportAllocs()
		for b.Loop() {
			id := fmt.Sprintf("extra-%06d", len(bg.ids))
			bg.ids = append(bg.ids, id)
			bg.beat(id, resp)
		}
		b.ReportMetric(perMember, "bytes/member")
	})
	b.Run("heartbeat", func(b *testing.B) {
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		bg.beat(bg.ids[n/2], resp) // catch up with the joins above
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "g"
		req.MemberID = bg.ids[n/2]
		req.MemberEpoch = bg.epochs[req.MemberID]
		var ref any = req.MemberID
		b.ReportAllocs()
		for b.Loop() {
			bg.g.Step(bg.now, Request{Ref: ref, Msg: req, Resp: resp})
			bg.g.Advance(bg.g.Ready())
		}
		if resp.ErrorCode != 0 {
			b.Fatalf("error %d", resp.ErrorCode)
		}
	})
}

// addBulk builds an n-member group faster than n joins would (each join
// recomputes the target over every member: O(n²) in all): the members are
// inserted directly, one epoch bump computes the target, and every member
// then reconciles through Step.
func (b *benchGroup) addBulk(tb testing.TB, n int) {
	g := b.g
	g.typ = Consumer
	for i := range n {
		id := fmt.Sprintf("member-%05d", i)
		b.ids = append(b.ids, id)
		mem := &consumerMember{
			id: id, clientID: "bench", rebalanceTimeout: 30 * time.Second, state: memberStable,
			topics: []string{"t"}, deadline: b.now.Add(b.cfg.ConsumerSessionTimeout),
		}
		mem.resolved = mem.topics
		g.insertMember(mem)
	}
	g.bumpEpoch("bench", true)
	g.Advance(g.Ready())
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	for _, id := range b.ids {
		b.epochs[id] = g.consumer.members[id].epoch
		b.held[id] = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		b.beat(id, resp)
	}
	if g.State() != "Stable" {
		tb.Fatalf("bulk group is %s", g.State())
	}
}

// BenchmarkOffsetCommit is one partition committed by its owner in a
// stable 16-member group.
func BenchmarkOffsetCommit(b *testing.B) {
	bg := newBenchGroup(b, 64, 100)
	bg.addMembers(16)
	bg.converge(b)
	id := bg.ids[3]
	owned := bg.g.consumer.members[id].assigned[0]
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = "g"
	req.MemberID = id
	req.Generation = bg.epochs[id]
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition = owned.Partition
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: owned.Topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
	resp := kmsg.NewPtrOffsetCommitResponse()
	b.ReportAllocs()
	for b.Loop() {
		req.Topics[0].Partitions[0].Offset++
		bg.g.Step(bg.now, Request{Ref: id, Msg: req, Resp: resp})
		bg.g.Advance(bg.g.Ready())
	}
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		b.Fatalf("error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
}

// benchSizes are the group sizes of the scaling benchmarks. Each group
// consumes one topic with benchPartitionsPerMember partitions per member,
// so that a join or a leave moves the same few partitions at every size
// and the cost per join can be compared across sizes.
var benchSizes = []int{100, 1000, 10000}

const benchPartitionsPerMember = 2

// BenchmarkConsumerColdJoin is a whole group joining from cold: n members
// join an empty group one after another, then every member heartbeats
// until the group is Stable. It is the core CPU a fleet's start costs;
// cpu-ns/op is the process's CPU time per run, which other processes on a
// shared machine do not inflate as they do ns/op.
func BenchmarkConsumerColdJoin(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := benchcpu.Process()
			for b.Loop() {
				bg := newBenchGroup(b, int32(benchPartitionsPerMember*n), n+1)
				bg.addMembers(n)
				bg.converge(b)
			}
			b.ReportMetric(float64(benchcpu.Process()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkConsumerColdJoinCoalesced is BenchmarkConsumerColdJoin with
// Config.ConsumerJoinCoalesce: the joins arrive within one window, so the
// first bumps the epoch and the others share one bump at the window's end.
func BenchmarkConsumerColdJoinCoalesced(b *testing.B) {
	const window = 100 * time.Millisecond
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := benchcpu.Process()
			for b.Loop() {
				bg := newBenchGroup(b, int32(benchPartitionsPerMember*n), n+1)
				bg.cfg.ConsumerJoinCoalesce = window
				bg.addMembers(n)
				bg.now = bg.now.Add(window)
				bg.g.Step(bg.now, Tick{})
				bg.g.Advance(bg.g.Ready())
				bg.converge(b)
				if e := bg.g.Epoch(); e != 2 {
					b.Fatalf("%d joins bumped the epoch to %d", n, e)
				}
			}
			b.ReportMetric(float64(benchcpu.Process()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkConsumerJoinOne is one member joining a Stable group of n: the
// join request, with its epoch bump and target update. Between iterations
// (untimed) the new member leaves again, so the group stays at n.
func BenchmarkConsumerJoinOne(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bg := newBenchGroup(b, int32(benchPartitionsPerMember*n), n+1)
			bg.addBulk(b, n)
			resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("joiner-%08d", i)
				bg.beat(id, resp)
				b.StopTimer()
				bg.leave(id, resp)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkConsumerLeaveOne is one member leaving a Stable group of n: the
// leave request, with its epoch bump and target update. Between iterations
// (untimed) a new member joins, so the group stays at n.
func BenchmarkConsumerLeaveOne(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bg := newBenchGroup(b, int32(benchPartitionsPerMember*n), n+1)
			bg.addBulk(b, n)
			resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				// Members leave in join order: the oldest hold
				// partitions, as the leaver of a real group does.
				bg.leave(bg.ids[i], resp)
				b.StopTimer()
				id := fmt.Sprintf("joiner-%08d", i)
				bg.ids = append(bg.ids, id)
				bg.beat(id, resp)
				b.StartTimer()
			}
		})
	}
}

// leave sends id's leave (epoch -1).
func (b *benchGroup) leave(id string, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = id
	req.MemberEpoch = -1
	b.g.Step(b.now, Request{Ref: id, Msg: req, Resp: resp})
	b.g.Advance(b.g.Ready())
	if resp.ErrorCode != 0 {
		panic(fmt.Sprintf("leave of %s: error %d", id, resp.ErrorCode))
	}
	delete(b.epochs, id)
	delete(b.held, id)
}
