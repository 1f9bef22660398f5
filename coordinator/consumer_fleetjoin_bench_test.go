package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/benchcpu"
)

// fleetJoin drives one KIP-848 group through a fleet's start as
// BenchmarkJoin's load generator (internal/e2e) makes it: members of a
// raw client that joins, reports a new assignment at once (it revokes and
// takes partitions instantly) and otherwise heartbeats on the interval the
// coordinator gives. The members' joins arrive gap apart; every answer
// comes rtt after its request (the group's write in flight before it), so
// that the members' heartbeats interleave as they do over a network. It
// runs on a virtual clock in a fixed order, so the records it counts are
// the same on every run.
type fleetJoin struct {
	members    int
	partitions int32
	gap, rtt   time.Duration
	coalesce   time.Duration
	// restart checks the store after every step (restoreChecker) and
	// then goes on with the group restored from it, as if its
	// coordinator had crashed and another had taken over.
	restart bool
	// targetsOff runs the group, and every group restored from it, with
	// SetGroupTargets(false).
	targetsOff bool
}

// fleetJoinMember is one member of a fleetJoin.
type fleetJoinMember struct {
	id       string
	epoch    int32
	owned    []int32
	reported bool
}

type fleetJoinEvent struct {
	at  time.Time
	seq int
	m   *fleetJoinMember
}

// run returns the records the group persisted from the first join until
// every member holds its target and has said so.
func (s fleetJoin) run(tb testing.TB) []Record {
	cfg := DefaultConfig()
	topics := NewStaticTopics()
	id := TopicID{15: 1}
	topics.Add("t", id, s.partitions)
	cfg.Topics = topics
	cfg.ConsumerHeartbeatInterval = 5 * time.Second
	cfg.ConsumerSessionTimeout = 45 * time.Second
	cfg.ConsumerJoinCoalesce = s.coalesce
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	g := NewGroup("g", &cfg, rand.New(rand.NewPCG(1, 2)))
	g.SetGroupTargets(!s.targetsOff)
	now := testEpoch
	var records []Record
	var queue []fleetJoinEvent
	seq := 0
	push := func(at time.Time, m *fleetJoinMember) {
		seq++
		queue = append(queue, fleetJoinEvent{at, seq, m})
	}
	ms := make([]*fleetJoinMember, s.members)
	for i := range ms {
		ms[i] = &fleetJoinMember{id: fmt.Sprintf("fleet-%05d-0000000000000", i)}
		push(now.Add(time.Duration(i)*s.gap), ms[i])
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	settled := func() bool {
		if g.State() != "Stable" {
			return false
		}
		for _, m := range ms {
			if !m.reported {
				return false
			}
		}
		return true
	}
	var tick time.Time
	store := newRestoreChecker()
	take := func() {
		rd := g.Ready()
		records = append(records, rd.Persist...)
		tick = rd.NextTick
		if s.restart {
			store.apply(tb, rd)
		}
		g.Advance(rd)
	}
	step := func(in Input) {
		g.Step(now, in)
		take()
		if !s.restart {
			return
		}
		store.check(tb, g, now)
		r, err := Restore("g", &cfg, rand.New(rand.NewPCG(uint64(len(records)), 2)), now, store.set.Group("g"))
		if err != nil {
			tb.Fatal(err)
		}
		g = r
		g.SetGroupTargets(!s.targetsOff)
		take()
	}
	for steps := 0; !settled(); steps++ {
		if steps > 100*s.members*s.members {
			tb.Fatalf("the group did not settle: %s", g)
		}
		i := 0
		for j := range queue {
			if c := queue[j].at.Compare(queue[i].at); c < 0 || c == 0 && queue[j].seq < queue[i].seq {
				i = j
			}
		}
		ev := queue[i]
		queue = slices.Delete(queue, i, i+1)
		if ev.at.After(now) {
			if !tick.IsZero() && !tick.After(ev.at) {
				now = maxTime(now, tick)
				step(Tick{})
				queue = append(queue, ev)
				continue
			}
			now = ev.at
		}
		m := ev.m
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "g"
		req.MemberID = m.id
		req.MemberEpoch = m.epoch
		req.RebalanceTimeoutMillis = -1
		full := !m.reported
		if full {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{"t"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			if len(m.owned) > 0 {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: slices.Clone(m.owned)})
			}
		}
		step(Request{Ref: m.id, Msg: req, Resp: resp})
		if resp.ErrorCode != 0 {
			tb.Fatalf("heartbeat of %s at epoch %d: error %d", m.id, m.epoch, resp.ErrorCode)
		}
		m.epoch = resp.MemberEpoch
		if full {
			m.reported = true
		}
		due := now.Add(s.rtt).Add(time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond)
		if resp.Assignment != nil {
			var owned []int32
			for _, t := range resp.Assignment.Topics {
				owned = append(owned, t.Partitions...)
			}
			slices.Sort(owned)
			if !slices.Equal(owned, m.owned) {
				m.owned, m.reported, due = owned, false, now.Add(s.rtt)
			}
		}
		push(due, m)
	}
	return records
}

// TestConsumerJoinRestart is a fleet's join with a fail-over after every
// step: each step's records must let the next coordinator go on exactly
// where the last one stopped (the targets that only the GroupRecord
// carries included, and those a restored group must carry on carrying).
// A group of 48 has more targets to carry than a GroupRecord takes
// (maxGroupTargets): its members write their own.
func TestConsumerJoinRestart(t *testing.T) {
	for _, c := range []struct {
		members  int
		coalesce time.Duration
	}{{16, 0}, {16, 20 * time.Millisecond}, {48, 0}} {
		t.Run(fmt.Sprintf("members=%d/coalesce=%v", c.members, c.coalesce), func(t *testing.T) {
			s := fleetJoin16
			s.members, s.partitions = c.members, int32(4*c.members)
			s.coalesce, s.restart = c.coalesce, true
			recs := s.run(t)
			if n := countRecords(recs)["AssignmentRecord"]; n == 0 {
				t.Fatal("no AssignmentRecord")
			}
		})
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fleetJoin16 is BenchmarkJoin's group: 16 members over a topic of 64
// partitions, joining within a few milliseconds of each other, each
// answer 50 ms after its request (a loaded set's store round trip).
var fleetJoin16 = fleetJoin{members: 16, partitions: 64, gap: 3 * time.Millisecond, rtt: 50 * time.Millisecond}

// countRecords counts records by kind.
func countRecords(recs []Record) map[string]int {
	out := map[string]int{}
	for _, r := range recs {
		out[fmt.Sprintf("%T", r)[len("*coordinator."):]]++
	}
	return out
}

// BenchmarkConsumerFleetJoin is the core's part of BenchmarkJoin: a group
// of 16 joining as the e2e fleet joins it (fleetJoin16). It reports the
// records the group persisted per member joined (each one a write the
// store makes and every node of a set decodes from its watch) and the
// CPU per member.
func BenchmarkConsumerFleetJoin(b *testing.B) {
	for _, w := range []time.Duration{0, 20 * time.Millisecond} {
		b.Run(fmt.Sprintf("coalesce=%v", w), func(b *testing.B) {
			s := fleetJoin16
			s.coalesce = w
			var n map[string]int
			b.ReportAllocs()
			cpu0 := benchcpu.Process()
			for b.Loop() {
				n = countRecords(s.run(b))
			}
			b.ReportMetric(float64(benchcpu.Process()-cpu0)/float64(b.N*s.members), "cpu-ns/member")
			total := 0
			for _, c := range n {
				total += c
			}
			b.ReportMetric(float64(total)/float64(s.members), "records/member")
			b.ReportMetric(float64(n["AssignmentRecord"])/float64(s.members), "assignments/member")
		})
	}
}
