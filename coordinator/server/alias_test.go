package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// aliasPort is the port the server behind c lists broker id at in its
// Metadata (0 if it lists no such broker).
func aliasPort(t *testing.T, c *rawClient, id int32) int32 {
	t.Helper()
	md := c.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	for _, br := range md.Brokers {
		if br.NodeID == id {
			return br.Port
		}
	}
	return 0
}

// sameAlias checks that every survivor lists the departed broker id at
// want's port.
func sameAlias(t *testing.T, stage string, id int32, want *testServer, survivors ...*rawClient) {
	t.Helper()
	wantPort := portOf(t, want.addr)
	for i, c := range survivors {
		if got := aliasPort(t, c, id); got != wantPort {
			t.Fatalf("%s: survivor %d lists broker %d at port %d, want %d (the same on every survivor)", stage, i, id, got, wantPort)
		}
	}
}

// TestAliasAgreesOneLeader: the leader of a set of three dies; until the
// next leader is known, both survivors list its broker ID at the live node
// with the lowest ID (before, each listed it at itself, so a client saw
// the ID move at every Metadata it read from the other survivor), and
// then at the new leader.
func TestAliasAgreesOneLeader(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}, {ID: 2}}}
	na, nb, nc := set.node(0), set.node(1), set.node(2)
	a := startSetServer(t, set, na)
	b := startSetServer(t, set, nb)
	c := startSetServer(t, set, nc)
	set.advertise(a, b, c)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })

	// a dies; its registration and its leader key stay (in etcd for up
	// to a TTL), but the survivors' probes find it down.
	a.stop()
	for _, s := range []*testServer{b, c} {
		eventually(t, 5*time.Second, "the survivors to see a depart", func() bool {
			snap := s.view.snap.Load()
			return snap != nil && len(snap.departed) == 1
		})
	}
	cb, cc := dial(t, b.addr), dial(t, c.addr)
	sameAlias(t, "no leader known", 0, b, cb, cc)

	// c wins the next term: both point a's ID at c.
	set.setLeader(2)
	nc.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "c to lead", func() bool { return c.lead.Load() != nil })
	sameAlias(t, "c leads", 0, c, cb, cc)
}

// succNode is a fakeNode that knows the order in which the set's nodes
// lead (Succession), as ha's candidate keys give it.
type succNode struct {
	*fakeNode
	order []int32
}

func (n *succNode) Candidates() []Node {
	n.set.mu.Lock()
	defer n.set.mu.Unlock()
	var out []Node
	for _, id := range n.order {
		out = append(out, n.set.nodes[id])
	}
	return out
}

// TestAliasNamesTheSuccessor: the leader of a set of three dies, and the
// next candidate is not the live node with the lowest ID. Both survivors
// list its broker ID at the next candidate before the election is decided,
// and there it stays once that node leads: the alias never moves. Before,
// it pointed at the lowest live node first and moved to the new leader.
func TestAliasNamesTheSuccessor(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}, {ID: 2}}}
	order := []int32{0, 2, 1} // node 1 campaigned again, behind node 2
	start := func(n *succNode) *testServer {
		return startServer(t, func(c *Config) {
			c.Store, c.TopicStore, c.Cluster, c.TopicRefresh = nil, set.shared, n, 50*time.Millisecond
		})
	}
	na := &succNode{set.node(0), order}
	nc := &succNode{set.node(2), order}
	a, b, c := start(na), start(&succNode{set.node(1), order}), start(nc)
	set.advertise(a, b, c)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })

	// a dies; its registration and its leader key stay (in etcd for up
	// to a TTL), but the survivors' probes find it down.
	a.stop()
	for _, s := range []*testServer{b, c} {
		eventually(t, 5*time.Second, "the survivors to see a depart", func() bool {
			snap := s.view.snap.Load()
			return snap != nil && len(snap.departed) == 1
		})
	}
	cb, cc := dial(t, b.addr), dial(t, c.addr)
	sameAlias(t, "no leader known", 0, c, cb, cc)

	set.setLeader(2)
	nc.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "c to lead", func() bool { return c.lead.Load() != nil })
	sameAlias(t, "c leads", 0, c, cb, cc)
}

// TestAliasAgreesSharded: a node holding two of six shards dies; the
// survivors take its shards one at a time. Its broker ID stays at the
// lowest live node until both have an owner, and then points at the owner
// of most (a tie here, so the lower ID): it never moves. Before, each
// survivor pointed it at itself, then at the first taker, then at the
// owner of most.
func TestAliasAgreesSharded(t *testing.T) {
	const count = 6
	sh := newFakeShards(3, count)
	var ns []*fakeShardNode
	var ss []*testServer
	for id := range int32(3) {
		n := &fakeShardNode{fakeNode: sh.node(id), sh: sh, terms: make(chan ShardTerm, count)}
		ns = append(ns, n)
		ss = append(ss, startServer(t, func(c *Config) {
			c.Store, c.TopicStore, c.Cluster, c.TopicRefresh = nil, sh.shared, n, 50*time.Millisecond
		}))
	}
	sh.advertise(ss...)
	for s := range count {
		sh.give(ns[s/2], s) // node 0 holds shards 0 and 1
	}
	a, b, c := ss[0], ss[1], ss[2]
	for s := range count {
		eventually(t, 5*time.Second, "every shard served", func() bool { return ss[s/2].shardTerm(s, time.Now()) != nil })
	}
	// A refresh that starts now sees every owner: each survivor's view
	// then records the shards a held when it leaves.
	for _, s := range []*testServer{b, c} {
		for range 2 {
			select {
			case <-s.view.changes():
			case <-time.After(5 * time.Second):
				t.Fatal("the view did not refresh")
			}
		}
	}

	a.stop()
	sh.mu.Lock()
	sh.owners[0], sh.owners[1] = -1, -1 // its keys expired
	sh.mu.Unlock()
	for _, s := range []*testServer{b, c} {
		eventually(t, 5*time.Second, "the survivors to see a depart", func() bool {
			snap := s.view.snap.Load()
			return snap != nil && len(snap.departed) == 1 && len(snap.departed[0].shards) == 2
		})
	}
	cb, cc := dial(t, b.addr), dial(t, c.addr)
	sameAlias(t, "no shard taken", 0, b, cb, cc)

	sh.give(ns[2], 1)
	eventually(t, 5*time.Second, "c to serve shard 1", func() bool { return c.shardTerm(1, time.Now()) != nil })
	sameAlias(t, "c took one of two", 0, b, cb, cc)

	sh.give(ns[1], 0)
	eventually(t, 5*time.Second, "b to serve shard 0", func() bool { return b.shardTerm(0, time.Now()) != nil })
	sameAlias(t, "one each", 0, b, cb, cc)
}
