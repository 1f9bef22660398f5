package server

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// gatedTakeover starts a node that takes over, from its standby, the
// groups a-ready, z-slow and zz-asked (each stored at epoch
// gatedEpoch) with Config.TakeoverWait wait, and returns once the
// takeover's loop has installed a-ready and holds z-slow's claim, reading
// its records until open is called.
func gatedTakeover(t *testing.T, wait time.Duration) (a *testServer, ca *rawClient, open func()) {
	t.Helper()
	src := &gatedSource{
		recordsSource: recordsSource{recs: map[string][]coordinator.Record{}},
		slow:          "z-slow", gate: make(chan struct{}), reached: make(chan struct{}),
	}
	for _, name := range []string{"a-ready", "z-slow", "zz-asked"} {
		src.recs[name] = []coordinator.Record{&coordinator.GroupRecord{Group: name, Type: coordinator.Consumer, Epoch: gatedEpoch}}
	}
	opened := false
	open = func() {
		if !opened {
			opened = true
			close(src.gate)
		}
	}
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
	na := set.node(0)
	a = startServer(t, func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.Cluster = na
		c.TopicRefresh = 50 * time.Millisecond
		c.Standby = src
		c.TakeoverWait = wait
	})
	t.Cleanup(open) // before the server stops: a takeover waiting at the gate ends
	set.advertise(a)
	ca = dial(t, a.addr)
	ca.roundTrip(metadataRequest(12, "jobs"))
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	select {
	case <-src.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the takeover never read the slow group's records")
	}
	return a, ca, open
}

const gatedEpoch = 7

// TestTakeoverRequestWaitsForInstall: a request for a group whose install
// another holds (the takeover's loop, slow to read its records) waits for
// the install and is then served, above the group's stored epoch, rather
// than answered COORDINATOR_LOAD_IN_PROGRESS; meanwhile the connection's
// reader goes on: a request after it on the same connection, for another
// group, takes effect (another connection sees its member) before the
// install ends, and its response follows the first's, in order.
func TestTakeoverRequestWaitsForInstall(t *testing.T) {
	a, ca, open := gatedTakeover(t, time.Minute)
	slow := ca.send(cgHeartbeat("z-slow", "member-z-slow-000000000000000", 0))
	fresh := ca.send(cgHeartbeat("fresh", "member-fresh-0000000000000000", 0))

	cb := dial(t, a.addr)
	eventually(t, 10*time.Second, "the request after the waiting one to join its member", func() bool {
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{"fresh"}
		g := cb.roundTrip(d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		return g.ErrorCode == 0 && len(g.Members) == 1
	})
	if _, _, err := ca.tryRecv(50 * time.Millisecond); err == nil {
		t.Fatal("a response came before the slow group's install ended")
	}
	if n := a.metric(t, "tenure_takeover_waits_total", "outcome", "served"); n != 0 {
		t.Fatalf("%v waits ended with an install before it ended", n)
	}

	open()
	corr, resp := ca.recv()
	if corr != slow {
		t.Fatalf("first response for correlation ID %d, want the slow group's %d", corr, slow)
	}
	if r := resp.(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch <= gatedEpoch {
		t.Fatalf("heartbeat to the group being installed: error %v epoch %d, want served above its stored epoch %d",
			kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, gatedEpoch)
	}
	corr, resp = ca.recv()
	if corr != fresh {
		t.Fatalf("second response for correlation ID %d, want %d", corr, fresh)
	}
	if r := resp.(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("heartbeat to a new group behind the waiting one: error %v epoch %d, want served at epoch 1",
			kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	// The wait counts itself served once its request's step returns,
	// just after the response went out.
	eventually(t, 5*time.Second, "the wait to count as served", func() bool {
		return a.metric(t, "tenure_takeover_waits_total", "outcome", "served") == 1
	})
}

// TestTakeoverWaitersQueuePerConnection: the requests of one connection
// that wait for a takeover queue for one goroutine of the connection,
// not one each (a takeover's surge is thousands of them), and are
// stepped in the order they arrived: each join of a new member to the
// group being installed bumps its epoch, so the members' epochs rise
// in the order of their requests.
func TestTakeoverWaitersQueuePerConnection(t *testing.T) {
	const n = 64
	a, ca, open := gatedTakeover(t, time.Minute)
	before := runtime.NumGoroutine()
	var corrs []int32
	for i := range n {
		corrs = append(corrs, ca.send(cgHeartbeat("z-slow", fmt.Sprintf("member-z-slow-%015d", i), 0)))
	}
	fresh := ca.send(cgHeartbeat("fresh", "member-fresh-0000000000000000", 0))
	cb := dial(t, a.addr)
	eventually(t, 10*time.Second, "the request after the waiting ones to join its member", func() bool {
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{"fresh"}
		g := cb.roundTrip(d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		return g.ErrorCode == 0 && len(g.Members) == 1
	})
	// cb's connection adds its reader and writer.
	if grew := runtime.NumGoroutine() - before; grew > 8 {
		t.Fatalf("%d requests waiting on one connection added %d goroutines", n, grew)
	}
	open()
	last := int32(gatedEpoch)
	for i, want := range corrs {
		corr, resp := ca.recv()
		if corr != want {
			t.Fatalf("response %d for correlation ID %d, want %d", i, corr, want)
		}
		r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 || r.MemberEpoch <= last {
			t.Fatalf("join %d to the group being installed: error %v epoch %d, want served above %d (the join before it)",
				i, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, last)
		}
		last = r.MemberEpoch
	}
	if corr, _ := ca.recv(); corr != fresh {
		t.Fatalf("last response for correlation ID %d, want %d", corr, fresh)
	}
	// Each wait counts itself served once its request's step returns,
	// just after the response went out.
	eventually(t, 5*time.Second, "every wait to count as served", func() bool {
		return a.metric(t, "tenure_takeover_waits_total", "outcome", "served") == n
	})
}

// TestTakeoverReadInstallsGroup: a read of a group that the takeover has
// still to install (a describe) installs it, ahead of its turn, and is
// answered with its stored state rather than COORDINATOR_LOAD_IN_PROGRESS;
// a read of a group that another is installing (an offset fetch of the
// group whose records the takeover's loop is slow to read) waits for
// the install and is then answered.
func TestTakeoverReadInstallsGroup(t *testing.T) {
	a, ca, open := gatedTakeover(t, time.Minute)
	dg := kmsg.NewPtrConsumerGroupDescribeRequest()
	dg.Groups = []string{"zz-asked"}
	if g := ca.roundTrip(dg).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; g.ErrorCode != 0 || g.Epoch != gatedEpoch {
		t.Fatalf("describe of a group whose turn has not come: error %v epoch %d, want its stored epoch %d",
			kerr.ErrorForCode(g.ErrorCode), g.Epoch, gatedEpoch)
	}
	if n := a.lead.Load().groups.pendingCount(); n != 1 {
		t.Fatalf("%d groups pending after the describe, want 1 (the slow one)", n)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = "z-slow"
	of.Groups = append(of.Groups, og)
	ca.send(of)
	if _, _, err := ca.tryRecv(100 * time.Millisecond); err == nil {
		t.Fatal("the offset fetch was answered before the slow group's install ended")
	}
	open()
	_, resp := ca.recv()
	if g := resp.(*kmsg.OffsetFetchResponse).Groups[0]; g.ErrorCode != 0 {
		t.Fatalf("offset fetch of the group being installed: error %v, want answered once installed", kerr.ErrorForCode(g.ErrorCode))
	}
	if n := a.metric(t, "tenure_takeover_waits_total", "outcome", "served"); n != 1 {
		t.Fatalf("%v waits served, want 1", n)
	}
}

// TestTakeoverWaitIsBounded: a request that waits for its group's install
// longer than Config.TakeoverWait is answered COORDINATOR_LOAD_IN_PROGRESS,
// as without the wait, and the connection goes on serving; with a wait
// of 0 it is answered so at once, never counted as waiting.
func TestTakeoverWaitIsBounded(t *testing.T) {
	for _, wait := range []time.Duration{50 * time.Millisecond, 0} {
		t.Run(wait.String(), func(t *testing.T) {
			a, ca, open := gatedTakeover(t, wait)
			r := ca.roundTrip(cgHeartbeat("z-slow", "member-z-slow-000000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
			if r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
				t.Fatalf("heartbeat to a group installed for longer than the wait: error %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(r.ErrorCode))
			}
			want := 1.0
			if wait == 0 {
				want = 0
			}
			if n := a.metric(t, "tenure_takeover_waits_total", "outcome", "timeout"); n != want {
				t.Fatalf("%v waits timed out, want %v", n, want)
			}
			if r := ca.roundTrip(cgHeartbeat("a-ready", "member-a-ready-00000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
				t.Fatalf("heartbeat to an installed group after the refusal: error %v", kerr.ErrorForCode(r.ErrorCode))
			}
			open()
			// Asked before the install ends, the heartbeat would wait
			// for it, rightly, and count a wait served.
			eventually(t, 5*time.Second, "the slow group's install to end", func() bool {
				return a.lead.Load().groups.pendingCount() == 0
			})
			eventually(t, 5*time.Second, "the slow group to be served", func() bool {
				r := ca.roundTrip(cgHeartbeat("z-slow", "member-z-slow-000000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
				return r.ErrorCode == 0
			})
			if n := a.metric(t, "tenure_takeover_waits_total", "outcome", "served"); n != 0 {
				t.Fatalf("%v waits ended with an install, want none: the group was installed when asked again", n)
			}
		})
	}
}

// syncGatedSource is a recordsSource whose revision check (Sync) waits
// until gate opens: a term that is slow to load. reached is closed when
// the check first waits.
type syncGatedSource struct {
	recordsSource
	gate, reached chan struct{}
	once          sync.Once
}

func (g *syncGatedSource) SyncTo(ctx context.Context, shard int, rev int64) (int64, error) {
	g.once.Do(func() { close(g.reached) })
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.recordsSource.SyncTo(ctx, shard, rev)
}

// TestLoadingRequestWaitsForTerm: a request that arrives while the node
// loads the term that will serve its group (the standby's revision
// check) waits for the load and is then served, above the group's stored
// epoch, rather than answered COORDINATOR_LOAD_IN_PROGRESS; so does a
// read of the group (a describe).
func TestLoadingRequestWaitsForTerm(t *testing.T) {
	src := &syncGatedSource{
		recordsSource: recordsSource{recs: map[string][]coordinator.Record{
			"g": {&coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: gatedEpoch}},
		}},
		gate: make(chan struct{}), reached: make(chan struct{}),
	}
	var once sync.Once
	open := func() { once.Do(func() { close(src.gate) }) }
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
	na := set.node(0)
	a := startServer(t, func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.Cluster = na
		c.TopicRefresh = 50 * time.Millisecond
		c.Standby = src
		c.TakeoverWait = time.Minute
	})
	t.Cleanup(open)
	set.advertise(a)
	ca := dial(t, a.addr)
	ca.roundTrip(metadataRequest(12, "jobs"))
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	select {
	case <-src.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the term never checked the standby's revision")
	}
	ca.send(cgHeartbeat("g", "member-g-00000000000000000000", 0))
	// A read waits likewise, on its connection's reader.
	cb := dial(t, a.addr)
	dg := kmsg.NewPtrConsumerGroupDescribeRequest()
	dg.Groups = []string{"g"}
	cb.send(dg)
	if _, _, err := ca.tryRecv(100 * time.Millisecond); err == nil {
		t.Fatal("a response came while the term loaded")
	}
	if _, _, err := cb.tryRecv(10 * time.Millisecond); err == nil {
		t.Fatal("the describe was answered while the term loaded")
	}
	open()
	_, resp := ca.recv()
	if r := resp.(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch <= gatedEpoch {
		t.Fatalf("heartbeat sent while the term loaded: error %v epoch %d, want served above the stored epoch %d",
			kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, gatedEpoch)
	}
	_, resp = cb.recv()
	if g := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; g.ErrorCode != 0 || g.Epoch < gatedEpoch {
		t.Fatalf("describe sent while the term loaded: error %v epoch %d, want the group at its stored epoch %d or above",
			kerr.ErrorForCode(g.ErrorCode), g.Epoch, gatedEpoch)
	}
	// The heartbeat's wait counts itself served once its step returns,
	// just after the response went out.
	eventually(t, 5*time.Second, "the heartbeat's and the describe's waits to count as served", func() bool {
		return a.metric(t, "tenure_takeover_waits_total", "outcome", "served") == 2
	})
}
