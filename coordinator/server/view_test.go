package server

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestViewDeadPeer: in a set of three, node c stops for good (its port
// refuses) while its registration stays, as after a kill -9 within the
// election TTL. Node b's probe finds it down: b's Metadata lists c's
// broker ID at the leader's address and leads no partition with it; a
// Fetch parked on b, then b's connection's next Fetch once, are answered
// NOT_LEADER_OR_FOLLOWER. When the leader a dies too, b holds a
// FindCoordinator until b wins the next term, and answers it with itself.
func TestViewDeadPeer(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}, {ID: 2}}}
	na, nb, nc := set.node(0), set.node(1), set.node(2)
	a := startSetServer(t, set, na)
	b := startSetServer(t, set, nb)
	c := startSetServer(t, set, nc)
	set.advertise(a, b, c)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })

	eventually(t, 5*time.Second, "b to see every node's address", func() bool {
		snap := b.view.snap.Load()
		return snap != nil && len(snap.live) == 3 && !slices.ContainsFunc(snap.live, func(n Node) bool { return n.Addr == "" })
	})
	cb := dial(t, b.addr)
	md := cb.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 3 {
		t.Fatalf("Metadata before: %d brokers, want 3", len(md.Brokers))
	}
	leaders := map[int32]int{}
	for _, p := range md.Topics[0].Partitions {
		leaders[p.Leader]++
	}
	if len(leaders) != 3 {
		t.Fatalf("partition leaders before %v: want them spread over the 3 nodes", leaders)
	}

	// A Fetch parks on b; then c dies.
	fetch := fetchRequest(12, 20*time.Second, "jobs", 0, 1)
	want := cb.send(fetch)
	// Until b parks it, a Fetch is not told of the change: read after
	// it, it would wait out its 20 s.
	eventually(t, 5*time.Second, "b to park the Fetch", func() bool { return parkedFetches(b) == 1 })
	c.stop()
	corr, resp := cb.recv()
	if corr != want {
		t.Fatalf("correlation %d, want %d", corr, want)
	}
	if code := fetchResponseCode(resp); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("the parked Fetch after c died: error %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	if n := b.metric(t, "tenure_peers_down"); n != 1 {
		t.Fatalf("tenure_peers_down %v, want 1", n)
	}
	if n := b.metric(t, "tenure_view_changes_total"); n < 1 {
		t.Fatalf("tenure_view_changes_total %v", n)
	}
	// The next Fetch on a connection that was told is served as usual.
	quick := fetchRequest(12, 0, "jobs", 0)
	if code := fetchResponseCode(cb.roundTrip(quick)); code != 0 {
		t.Fatalf("the next Fetch: error %d", code)
	}
	md = cb.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	var alias *kmsg.MetadataResponseBroker
	for i, br := range md.Brokers {
		if br.NodeID == 2 {
			alias = &md.Brokers[i]
		}
	}
	aHost, aPort, _ := set.nodes[0].hostPortOn("PLAINTEXT")
	if alias == nil || alias.Host != aHost || alias.Port != aPort {
		t.Fatalf("c's broker ID in b's Metadata: %+v, want it at the leader's %s:%d", alias, aHost, aPort)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader == 2 {
			t.Fatalf("partition %d still led by the dead node", p.Partition)
		}
		if len(p.Replicas) != 1 || p.Replicas[0] != p.Leader {
			t.Fatalf("partition %d: replicas %v, leader %d", p.Partition, p.Replicas, p.Leader)
		}
	}

	// The leader dies too; its registration stays (in etcd it would for
	// up to a TTL), but b's probe finds it down: FindCoordinator waits
	// for the next leader rather than naming a dead one.
	a.stop()
	eventually(t, 5*time.Second, "b to probe a down", func() bool { return b.view.down(0) })
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"g"}
	sent := time.Now()
	want = cb.send(fc)
	// Held before b leads: read after it, the request would be answered
	// at once, and not counted.
	eventually(t, 10*time.Second, "b to hold the FindCoordinator", func() bool {
		return b.metric(t, "tenure_find_coordinator_held_total") == 1
	})
	time.Sleep(time.Until(sent.Add(300 * time.Millisecond)))
	tb := newFakeTerm(set.shared)
	set.setLeader(1)
	nb.terms <- tb
	corr, resp = cb.recv()
	if corr != want {
		t.Fatalf("correlation %d, want %d", corr, want)
	}
	co := resp.(*kmsg.FindCoordinatorResponse).Coordinators[0]
	if co.ErrorCode != 0 || co.NodeID != 1 {
		t.Fatalf("FindCoordinator held over the fail-over: %+v, want node 1", co)
	}
	if took := time.Since(sent); took < 300*time.Millisecond {
		t.Fatalf("FindCoordinator answered after %v, before b led", took)
	}
	if n := b.metric(t, "tenure_find_coordinator_held_total"); n != 1 {
		t.Fatalf("tenure_find_coordinator_held_total %v, want 1", n)
	}
	md = cb.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	var ids []int32
	for _, br := range md.Brokers {
		ids = append(ids, br.NodeID)
		if br.NodeID != 1 && br.Port != portOf(t, b.addr) {
			t.Fatalf("departed node %d at port %d, want b's own", br.NodeID, br.Port)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int32{0, 1, 2}) {
		t.Fatalf("brokers %v, want 0, 1, 2 (two aliased to b)", ids)
	}
}

// TestFindCoordinatorWaitBound: with no coordinator anywhere, a held
// FindCoordinator is answered COORDINATOR_NOT_AVAILABLE after
// CoordinatorWait.
func TestFindCoordinatorWaitBound(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
	a := startServer(t, func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.Cluster = set.node(0)
		c.CoordinatorWait = 400 * time.Millisecond
	})
	set.advertise(a)
	ca := dial(t, a.addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	fc.Version = 3
	start := time.Now()
	r := ca.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
	if took := time.Since(start); r.ErrorCode != kerr.CoordinatorNotAvailable.Code || took < 400*time.Millisecond {
		t.Fatalf("error %d after %v, want COORDINATOR_NOT_AVAILABLE after the 400ms wait", r.ErrorCode, took)
	}
}

// TestMovedByVersion: the moved signal is FENCED_LEADER_EPOCH for a Fetch
// that names topics by ID (v13+), which @platformatic/kafka needs to drop
// its cached metadata, and NOT_LEADER_OR_FOLLOWER before, for the clients
// that predate topic IDs. Either way once per connection: the next Fetch
// is served.
func TestMovedByVersion(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}, {ID: 2}}}
	na, nb, nc := set.node(0), set.node(1), set.node(2)
	a := startSetServer(t, set, na)
	b := startSetServer(t, set, nb)
	c := startSetServer(t, set, nc)
	set.advertise(a, b, c)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })
	eventually(t, 5*time.Second, "b to see every node's address", func() bool {
		snap := b.view.snap.Load()
		return snap != nil && len(snap.live) == 3 && !slices.ContainsFunc(snap.live, func(n Node) bool { return n.Addr == "" })
	})
	old, byID := dial(t, b.addr), dial(t, b.addr)
	md := byID.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	old.roundTrip(metadataRequest(12, "jobs"))
	v16 := fetchRequest(16, 20*time.Second, "", 0, 1)
	v16.Topics[0].TopicID = md.Topics[0].TopicID
	v12 := fetchRequest(12, 20*time.Second, "jobs", 0, 1)
	wantOld, wantByID := old.send(v12), byID.send(v16)

	c.stop() // the view changes: both parked Fetches are told
	for _, x := range []struct {
		c    *rawClient
		want int32
		code int16
	}{{old, wantOld, kerr.NotLeaderForPartition.Code}, {byID, wantByID, kerr.FencedLeaderEpoch.Code}} {
		corr, resp := x.c.recv()
		if corr != x.want {
			t.Fatalf("correlation %d, want %d", corr, x.want)
		}
		if code := fetchResponseCode(resp); code != x.code {
			t.Fatalf("v%d Fetch parked over the change: error %d, want %d", resp.GetVersion(), code, x.code)
		}
	}
	v16.MaxWaitMillis, v12.MaxWaitMillis = 0, 0
	if code := fetchResponseCode(byID.roundTrip(v16)); code != 0 {
		t.Fatalf("the next v16 Fetch: error %d", code)
	}
	if code := fetchResponseCode(old.roundTrip(v12)); code != 0 {
		t.Fatalf("the next v12 Fetch: error %d", code)
	}
}

// TestNewConnToldAfterDeparture: a connection made within ViewSettle of a
// change that departed a node has its first Fetch told "moved" as well,
// since its client may hold a coordinator from before the change and have
// no older connection to this node that the change could tell (kafkajs
// with every partition led by the dead node, docs/FAILOVER.md). A
// connection made when nodes only joined, or after the window, is served.
func TestNewConnToldAfterDeparture(t *testing.T) {
	const settle = 4 * time.Second
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}, {ID: 2}}}
	na, nb, nc := set.node(0), set.node(1), set.node(2)
	a := startSetServer(t, set, na)
	b := startServer(t, func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.Cluster = nb
		c.TopicRefresh = 50 * time.Millisecond
		c.ViewSettle = settle
	})
	c := startSetServer(t, set, nc)
	set.advertise(a, b, c)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })
	eventually(t, 5*time.Second, "b to see every node's address", func() bool {
		snap := b.view.snap.Load()
		return snap != nil && len(snap.live) == 3 && !slices.ContainsFunc(snap.live, func(n Node) bool { return n.Addr == "" })
	})
	dial(t, b.addr).roundTrip(metadataRequest(12, "jobs"))
	quick := fetchRequest(12, 0, "jobs", 0, 1)

	if code := fetchResponseCode(dial(t, b.addr).roundTrip(quick)); code != 0 {
		t.Fatalf("a new connection's first Fetch while nodes only joined: error %d, want none", code)
	}

	c.stop()
	eventually(t, 5*time.Second, "b to alias c", func() bool {
		snap := b.view.snap.Load()
		return len(snap.departed) == 1 && !snap.departedAt.IsZero()
	})
	fresh := dial(t, b.addr)
	if code := fetchResponseCode(fresh.roundTrip(quick)); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a new connection's first Fetch after c departed: error %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	if code := fetchResponseCode(fresh.roundTrip(quick)); code != 0 {
		t.Fatalf("its second Fetch: error %d, want none", code)
	}

	time.Sleep(time.Until(b.view.snap.Load().departedAt.Add(settle + 100*time.Millisecond)))
	if code := fetchResponseCode(dial(t, b.addr).roundTrip(quick)); code != 0 {
		t.Fatalf("a new connection's first Fetch after the window: error %d, want none", code)
	}
}

// parkedFetches counts the Fetches s's connections hold until their wait
// ends, the ones a view change answers (conn.moved).
func parkedFetches(s *testServer) int {
	n := 0
	s.eachConn(func(c *conn) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, sl := range c.q[c.head:] {
			if _, ok := sl.req.(*kmsg.FetchRequest); ok && sl.state == slotWaiting && sl.timer != nil {
				n++
			}
		}
	})
	return n
}
