package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHeapOrdersByTimeThenSequence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h eventHeap
	var want []event
	seq := uint64(0)
	push := func(at vtime) {
		seq++
		e := event{at: at, seq: seq, arg: int64(seq)}
		h.push(e)
		want = append(want, e)
	}
	// Many ties: only ten distinct times.
	for range 500 {
		push(vtime(r.IntN(10)))
	}
	var got []event
	// Interleave pops and pushes, as the engine does; pushes never go
	// into the past of what was popped.
	for h.len() > 0 {
		e := h.pop()
		got = append(got, e)
		if len(got)%7 == 0 && seq < 700 {
			push(e.at + vtime(r.IntN(3)))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("popped %d events, pushed %d", len(got), len(want))
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.at > b.at || (a.at == b.at && a.seq > b.seq) {
			t.Fatalf("pop %d: (%d, seq %d) came before (%d, seq %d)", i, a.at, a.seq, b.at, b.seq)
		}
		if b.arg != int64(b.seq) {
			t.Fatalf("pop %d: event payload %d does not match its sequence %d", i, b.arg, b.seq)
		}
	}
}

func TestHeapTiesFireInSchedulingOrder(t *testing.T) {
	var h eventHeap
	for i := range 100 {
		h.push(event{at: 5, seq: uint64(100 - i)})
	}
	for i := range 100 {
		if e := h.pop(); e.seq != uint64(i+1) {
			t.Fatalf("pop %d: seq %d, want %d", i, e.seq, i+1)
		}
	}
}

// TestFIFOAndHeapMergeInOrder schedules a mix of periodic writes (which
// the engine keeps in its FIFO when they fit) and other events, with many
// ties, and checks that the engine pops them exactly in (time, sequence)
// order, as a single heap would.
func TestFIFOAndHeapMergeInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	w := &world{}
	var pushed int
	sent := map[uint64]event{} // by sequence number
	sched := func(at vtime) {
		kind := evTimer
		if r.IntN(3) > 0 {
			kind = evWork
		}
		e := event{at: at, kind: kind, node: int32(r.IntN(5)), inc: uint32(r.IntN(3))}
		w.schedule(e)
		pushed++
		sent[w.seq] = e
	}
	for range 200 {
		sched(vtime(r.IntN(20)))
	}
	var last event
	popped := 0
	for w.pending() {
		e := w.next()
		w.clock.advance(e.at)
		popped++
		if popped > 1 && (e.at < last.at || (e.at == last.at && e.seq < last.seq)) {
			t.Fatalf("pop %d: (%d, seq %d) after (%d, seq %d)", popped, e.at, e.seq, last.at, last.seq)
		}
		last = e
		if want := sent[e.seq]; want.at != e.at || want.kind != e.kind || want.node != e.node || want.inc != e.inc {
			t.Fatalf("pop %d: seq %d came back as %+v, scheduled as %+v", popped, e.seq, e, want)
		}
		if pushed < 5000 {
			for range r.IntN(3) {
				sched(e.at + vtime(r.IntN(15)))
			}
		}
	}
	if popped != pushed {
		t.Fatalf("popped %d events, scheduled %d", popped, pushed)
	}
	if w.fifo.ring == nil {
		t.Fatal("no write went through the FIFO: the test does not test it")
	}
}

func TestClockPanicsWhenGoingBack(t *testing.T) {
	var c clock
	c.advance(10)
	c.advance(10) // equal is fine
	defer func() {
		if recover() == nil {
			t.Fatal("moving the clock back did not panic")
		}
	}()
	c.advance(9)
}

func TestVirtualTimeHasNoMonotonicReading(t *testing.T) {
	got := vtime(1500 * time.Millisecond).Time()
	// Round(0) strips a monotonic reading; without one it changes nothing.
	if got.Round(0) != got {
		t.Fatal("virtual time carries a monotonic reading")
	}
	if d := got.Sub(Origin()); d != 1500*time.Millisecond {
		t.Fatalf("Time() - Origin = %v, want 1.5s", d)
	}
	if vtimeOf(got) != vtime(1500*time.Millisecond) {
		t.Fatal("vtimeOf does not invert Time")
	}
}

func TestSkewedClockRoundTrip(t *testing.T) {
	for _, skew := range []float64{-0.3, -0.01, 0, 0.001, 0.2} {
		c := skewedClock{skew: skew}
		prev := vtime(-1)
		for _, l := range []vtime{0, 1, 999, 1e9, 123456789012, 86400e9} {
			s := c.toSim(l)
			if c.toLocal(s) < l {
				t.Fatalf("skew %g: local clock reads %d at toSim(%d) = %d, before %d", skew, c.toLocal(s), l, s, l)
			}
			if s > 0 && c.toLocal(s-1) >= l {
				t.Fatalf("skew %g: toSim(%d) = %d is not the earliest instant", skew, l, s)
			}
			if s < prev {
				t.Fatalf("skew %g: toSim is not monotonic", skew)
			}
			prev = s
		}
	}
}

// testWorld returns a world with just a network and n member slots, for
// testing the network alone.
func testWorld(n int) *world {
	w := &world{tr: newTracer(nil)}
	w.net = network{def: Link{Delay: Fixed(10 * time.Millisecond)}, over: map[string]*Link{}, rng: rand.New(rand.NewPCG(1, 1))}
	w.net.addNode(0, "coord")
	for i := 1; i <= n; i++ {
		w.net.addNode(int32(i), "m"+itoa(i))
	}
	return w
}

func heartbeat(memberID string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group = "g"
	r.MemberID = memberID
	r.MemberEpoch = 3
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{1, 2}}}
	return r
}

// deliveries pops every event and returns the ids of the messages that
// arrive, in order.
func deliveries(w *world) []uint64 {
	var ids []uint64
	for w.pending() {
		e := w.next()
		w.clock.advance(e.at)
		if e.kind == evDeliver && w.net.arrives(w, e.msg) {
			ids = append(ids, e.msg.id)
		}
	}
	return ids
}

func TestNetworkCutDropsAtSendAndInFlight(t *testing.T) {
	w := testWorld(3)
	send := func(from int32, id uint64) {
		w.net.send(w, &message{from: from, to: 0, id: id, req: heartbeat("x")})
	}
	send(1, 1) // in flight when the cut begins: dropped on arrival
	w.net.addCut(1, map[int32]bool{1: true, 2: true})
	send(1, 2) // across the cut: dropped at once
	send(3, 3) // m3 is on the coordinator's side: arrives
	if got := deliveries(w); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("during the cut, delivered %v, want [3]", got)
	}
	if w.net.cutDrops != 2 {
		t.Fatalf("cut drops = %d, want 2", w.net.cutDrops)
	}
	w.net.heal(1)
	send(1, 4)
	send(2, 5)
	if got := deliveries(w); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("after healing, delivered %v, want [4 5]", got)
	}
}

func TestNetworkCutOfTheCoordinator(t *testing.T) {
	w := testWorld(2)
	w.net.addCut(7, map[int32]bool{0: true})
	w.net.send(w, &message{from: 1, to: 0, id: 1, req: heartbeat("x")})
	w.net.send(w, &message{from: 0, to: 2, id: 2, resp: kmsg.NewPtrConsumerGroupHeartbeatResponse()})
	if got := deliveries(w); len(got) != 0 {
		t.Fatalf("with the coordinator cut off, delivered %v", got)
	}
}

func TestNetworkKeepsLinkOrderUnlessReordered(t *testing.T) {
	w := testWorld(1)
	w.net.def.Delay = Uniform{Min: 0, Max: 100 * time.Millisecond}
	for i := range 200 {
		w.net.send(w, &message{from: 1, to: 0, id: uint64(i), req: heartbeat("x")})
	}
	got := deliveries(w)
	if !slices.IsSorted(got) || len(got) != 200 {
		t.Fatalf("a FIFO link delivered %d messages out of order: %v", len(got), got)
	}

	w = testWorld(1)
	w.net.def.Delay = Uniform{Min: 0, Max: 100 * time.Millisecond}
	w.net.def.Reorder = 0.5
	for i := range 200 {
		w.net.send(w, &message{from: 1, to: 0, id: uint64(i), req: heartbeat("x")})
	}
	if got := deliveries(w); slices.IsSorted(got) {
		t.Fatal("a link with reorder=0.5 delivered 200 messages in order")
	}
}

func TestNetworkLossAndDuplicates(t *testing.T) {
	w := testWorld(1)
	w.net.def.Loss = 0.1
	w.net.def.Dup = 0.1
	const n = 20000
	for i := range n {
		w.net.send(w, &message{from: 1, to: 0, id: uint64(i), req: heartbeat("x")})
	}
	got := deliveries(w)
	lossRate := float64(w.net.lost) / n
	dupRate := float64(w.net.dups) / float64(n-w.net.lost)
	if lossRate < 0.09 || lossRate > 0.11 || dupRate < 0.09 || dupRate > 0.11 {
		t.Fatalf("loss %.3f, duplication %.3f; want about 0.1 each", lossRate, dupRate)
	}
	if len(got) != n-int(w.net.lost)+int(w.net.dups) {
		t.Fatalf("delivered %d, want sent - lost + duplicated = %d", len(got), n-int(w.net.lost)+int(w.net.dups))
	}
}

func TestDuplicateIsADeepCopy(t *testing.T) {
	orig := &message{from: 1, to: 0, id: 9, req: heartbeat("m1")}
	dup := orig.clone()
	if dup.req == orig.req {
		t.Fatal("the duplicate shares the request")
	}
	dup.req.Topics[0].Partitions[0] = 99
	dup.req.MemberID = "changed"
	if orig.req.Topics[0].Partitions[0] != 1 || orig.req.MemberID != "m1" {
		t.Fatal("changing the duplicate changed the original")
	}

	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = 1
	resp.MemberEpoch = 4
	resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{
		Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{{Partitions: []int32{3}}},
	}
	om := &message{from: 0, to: 1, resp: resp}
	dm := om.clone()
	dm.resp.Assignment.Topics[0].Partitions[0] = 7
	if resp.Assignment.Topics[0].Partitions[0] != 3 || dm.resp.MemberEpoch != 4 {
		t.Fatal("the response duplicate is not an independent copy")
	}
}

func TestAliasingCheckCatchesAChangedMessage(t *testing.T) {
	w := testWorld(1)
	w.net.check = true
	req := heartbeat("m1")
	w.net.send(w, &message{from: 1, to: 0, id: 1, req: req})
	req.MemberEpoch = 42 // the sender changes what it sent
	defer func() {
		if recover() == nil {
			t.Fatal("a message changed in flight went unnoticed")
		}
	}()
	deliveries(w)
}

// TestElectionTakeover: with an election TTL, a fail-over's takeover
// delay lies between TTL less one renewal interval (TTL/6) and TTL plus
// one etcd expiry sweep, and spreads over that range; without one it is
// Takeover.
func TestElectionTakeover(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	a := Action{Kind: ActFailover, ElectionTTL: 6 * time.Second}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 1000 {
		d := a.takeover(r)
		if d < 5*time.Second || d >= 6*time.Second+etcdExpirySweep {
			t.Fatalf("takeover %v for a TTL of 6 s, want [5s, 6.5s)", d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > 5200*time.Millisecond || hi < 6300*time.Millisecond {
		t.Errorf("takeovers span %v to %v: want most of [5s, 6.5s)", lo, hi)
	}
	if d := (&Action{Kind: ActFailover, Takeover: 3 * time.Second}).takeover(r); d != 3*time.Second {
		t.Errorf("takeover %v, want the 3s given", d)
	}
}
