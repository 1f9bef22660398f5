package server

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// connLossServer starts a server with a connection-loss grace and a session
// timeout far above it, with topic jobs created.
func connLossServer(t *testing.T, grace time.Duration) *testServer {
	ts := startServer(t, func(c *Config) {
		c.Core.ConnLossGrace = grace
		c.Core.ConsumerSessionTimeout = time.Minute
	})
	dial(t, ts.addr).roundTrip(metadataRequest(12, "jobs"))
	return ts
}

func cgJoin(t *testing.T, c *rawClient, id string) {
	t.Helper()
	if r := c.roundTrip(cgHeartbeat("g", id, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("join %s: error %d", id, r.ErrorCode)
	}
}

// TestConnLossExpelsDeadMember: a member whose only connection closes is
// expelled a grace later, with the reason connection-closed, though its
// session has most of a minute to run; the other member stays.
func TestConnLossExpelsDeadMember(t *testing.T) {
	ts := connLossServer(t, 200*time.Millisecond)
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	cgJoin(t, a, "member-a-000000000000000")
	cgJoin(t, b, "member-b-000000000000000")
	a.nc.Close()
	eventually(t, 10*time.Second, "the member of the closed connection to be expelled", func() bool {
		return ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed") == 1
	})
	if n := ts.metric(t, "tenure_group_members", "group", "g"); n != 1 {
		t.Fatalf("%v members after one was expelled, want 1", n)
	}
	r := b.roundTrip(cgHeartbeat("g", "member-b-000000000000000", 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 && r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("the other member's heartbeat: error %d", r.ErrorCode)
	}
}

// TestConnLossKeepsReconnectedMember: a member whose connection closes and
// that goes on heartbeating on a new one keeps its place past the grace.
func TestConnLossKeepsReconnectedMember(t *testing.T) {
	grace := 300 * time.Millisecond
	ts := connLossServer(t, grace)
	a := dial(t, ts.addr)
	const id = "member-a-000000000000000"
	cgJoin(t, a, id)
	a.nc.Close()
	a2 := dial(t, ts.addr)
	epoch := int32(1)
	for end := time.Now().Add(5 * grace); time.Now().Before(end); time.Sleep(grace / 6) {
		r := a2.roundTrip(cgHeartbeat("g", id, epoch)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat on the new connection: error %d", r.ErrorCode)
		}
		epoch = r.MemberEpoch
	}
	if n := ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed"); n != 0 {
		t.Fatalf("%v members expelled for a closed connection, want 0", n)
	}
}

// TestConnLossIgnoresOtherConnections: only the connection of a member's
// latest request counts. A member that joined on one connection and sent
// its latest request on another is not expelled when the first closes
// (kgo closes its idle join connection under healthy members), while the
// member of a connection closed after it is.
func TestConnLossIgnoresOtherConnections(t *testing.T) {
	grace := 100 * time.Millisecond
	ts := connLossServer(t, grace)
	join, beat, other := dial(t, ts.addr), dial(t, ts.addr), dial(t, ts.addr)
	const id = "member-a-000000000000000"
	cgJoin(t, join, id)
	if r := beat.roundTrip(cgHeartbeat("g", id, 1)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: error %d", r.ErrorCode)
	}
	cgJoin(t, other, "member-b-000000000000000")
	join.nc.Close()
	other.nc.Close()
	eventually(t, 10*time.Second, "the member of the later close to be expelled", func() bool {
		return ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed") == 1
	})
	time.Sleep(3 * grace)
	if n := ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed"); n != 1 {
		t.Fatalf("%v members expelled for a closed connection, want 1", n)
	}
	r := beat.roundTrip(cgHeartbeat("g", id, 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode == kerr.UnknownMemberID.Code {
		t.Fatalf("the member was expelled when a connection it no longer used closed")
	}
}

// TestConnLossOff: with the grace 0 a closed connection expels nobody (0
// means off, not "at once").
func TestConnLossOff(t *testing.T) {
	ts := connLossServer(t, 0)
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	cgJoin(t, a, "member-a-000000000000000")
	a.nc.Close()
	time.Sleep(200 * time.Millisecond) // ample for the close to reach the group

	cgJoin(t, b, "member-b-000000000000000")
	if n := ts.metric(t, "tenure_group_members", "group", "g"); n != 2 {
		t.Fatalf("%v members, want 2", n)
	}
}

// TestConnLossViewSettles: while the set's view settles after a node left,
// a closed connection starts no connection-loss grace (clients then close
// connections of their own accord, to dial a broker ID at the address
// Metadata moved it to), and the member keeps its session; once the view
// has settled, a closed connection expels its member a grace later again.
func TestConnLossViewSettles(t *testing.T) {
	const grace = 150 * time.Millisecond
	// The close must reach a's group within settle of the view's change:
	// under -race at load 12 a run took 2.2 s from the change to it.
	const settle = 5 * time.Second
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}}}
	na, nb := set.node(0), set.node(1)
	start := func(n *fakeNode) *testServer {
		return startServer(t, func(c *Config) {
			c.Store = nil
			c.TopicStore = set.shared
			c.Cluster = n
			c.TopicRefresh = 50 * time.Millisecond
			c.Core.ConnLossGrace = grace
			c.Core.ConsumerSessionTimeout = time.Minute
			c.ViewSettle = settle
		})
	}
	a, b := start(na), start(nb)
	set.advertise(a, b)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })
	dial(t, a.addr).roundTrip(metadataRequest(12, "jobs"))
	eventually(t, 5*time.Second, "a to see both nodes' addresses", func() bool {
		snap := a.view.snap.Load()
		return snap != nil && len(snap.live) == 2 && !slices.ContainsFunc(snap.live, func(n Node) bool { return n.Addr == "" })
	})

	x := dial(t, a.addr)
	const id = "member-x-000000000000000"
	cgJoin(t, x, id)
	b.stop() // b's port refuses: a's probe finds it down, and a's view changes
	eventually(t, 5*time.Second, "a's view to lose b", func() bool {
		snap := a.view.snap.Load()
		return len(snap.departed) == 1
	})
	x.nc.Close()
	// The close reaches the group; then no grace may expel the member.
	eventually(t, 10*time.Second, "a to see the close while its view settles", func() bool {
		return a.metric(t, "tenure_connection_loss_settling_total") == 1
	})
	time.Sleep(5 * grace)
	if n := a.metric(t, "tenure_members_expired_total", "reason", "connection-closed"); n != 0 {
		t.Fatalf("%v members expelled for a connection closed while the view settled, want 0", n)
	}
	if n := a.metric(t, "tenure_connection_loss_settling_total"); n != 1 {
		t.Fatalf("tenure_connection_loss_settling_total %v, want 1", n)
	}
	x2 := dial(t, a.addr)
	r := x2.roundTrip(cgHeartbeat("g", id, 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("the member's heartbeat after the settling close: error %d", r.ErrorCode)
	}

	// Settled: a close counts again (a crashed process goes fast).
	eventually(t, 2*settle, "the view to settle", func() bool { return !a.view.settling(time.Now(), settle) })
	x2.nc.Close()
	eventually(t, 5*time.Second, "the member of the closed connection to be expelled", func() bool {
		return a.metric(t, "tenure_members_expired_total", "reason", "connection-closed") == 1
	})
}

// TestTrackMemberMoves: a member whose requests alternate between two
// connections, while others stay on one, leaves each connection's list
// of its group's members bounded, and each list holds every member whose
// latest request its connection carried, also one that left the group
// and joined it again.
func TestTrackMemberMoves(t *testing.T) {
	recs, members := testgroups.Stable(t, "g")
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add(testgroups.Topic.Name, testgroups.Topic.ID, testgroups.Topic.Partitions)
	cfg.Topics = topics
	g, err := coordinator.Rebuild("g", &cfg, newGroupRand(), recs)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	g.Step(now, coordinator.Resume{})
	s := &Server{cfg: Config{Core: coordinator.Config{ConnLossGrace: time.Second}}}
	e := &groupEntry{name: "g", g: g}
	c, d := &conn{}, &conn{}
	// beat steps a heartbeat of member m (epoch 0: a join; -1: a leave)
	// on connection on, and tracks it as stepOn does.
	beat := func(on *conn, m testgroups.Member, epoch int32) {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", m.ID, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{testgroups.Topic.Name}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		g.Step(now, coordinator.Request{Msg: req, Resp: resp})
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s at epoch %d: error %d", m.ID, epoch, resp.ErrorCode)
		}
		s.trackMember(e, on, req)
		rd := g.Ready()
		for _, ev := range rd.Events {
			if ev.Kind == coordinator.EventMemberLeft {
				e.memberGone()
			}
		}
		g.Advance(rd)
	}
	a, stay := members[0], members[1:4]
	for _, m := range stay {
		beat(c, m, m.Epoch)
	}
	check := func(after string) {
		t.Helper()
		for _, cn := range []*conn{c, d} {
			var ids trackedIDs
			if p := cn.members[e]; p != nil {
				ids = *p
			}
			if len(ids) > 16 {
				t.Fatalf("%s a connection's list holds %d IDs: %v", after, len(ids), ids)
			}
			for _, m := range members {
				if g.MemberConn(m.ID) == any(cn) && !slices.Contains(ids, m.ID) {
					t.Fatalf("%s %s is on a connection whose list lacks it: %v", after, m.ID, ids)
				}
			}
		}
	}
	for i := range 1000 {
		on := c
		if i%2 == 1 {
			on = d
		}
		beat(on, a, a.Epoch)
		check(fmt.Sprintf("after %d moves", i+1))
	}
	b := stay[0]
	beat(d, b, -1)
	beat(c, b, 0)
	check("after a member left and joined again")
	if g.MemberConn(b.ID) != any(c) {
		t.Fatalf("a member that left and joined again on c: tagged %v", g.MemberConn(b.ID))
	}
}
