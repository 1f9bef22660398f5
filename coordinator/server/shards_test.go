package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// fakeShards is a sharded HA set of in-process servers in which the test
// decides every shard's owner (package ha decides it on etcd, and is
// tested there). Each shard has a store of its own, shared by whichever
// node owns it, as the etcd store keeps each shard's groups apart.
type fakeShards struct {
	*fakeSet
	count  int
	stores []*store.Memory
	owners []int32 // -1: none
}

// newFakeShards is a set of nodes IDs 0 to nodes-1 with count shards,
// each with a store of its own and no owner.
func newFakeShards(nodes, count int) *fakeShards {
	sh := &fakeShards{fakeSet: &fakeSet{leader: -1, shared: store.NewMemory()}, count: count}
	for i := range nodes {
		sh.nodes = append(sh.nodes, Node{ID: int32(i)})
	}
	for range count {
		sh.stores = append(sh.stores, store.NewMemory())
		sh.owners = append(sh.owners, -1)
	}
	return sh
}

type fakeShardNode struct {
	*fakeNode
	sh    *fakeShards
	terms chan ShardTerm
}

func (n *fakeShardNode) Shards() int                  { return n.sh.count }
func (n *fakeShardNode) ShardOf(group string) int     { return ha.ShardOf(group, n.sh.count) }
func (n *fakeShardNode) ShardTerms() <-chan ShardTerm { return n.terms }

func (n *fakeShardNode) ShardOwner(s int) (Node, bool) {
	n.set.mu.Lock()
	defer n.set.mu.Unlock()
	if o := n.sh.owners[s]; o >= 0 {
		return n.set.nodes[o], true
	}
	return Node{}, false
}

type fakeShardTerm struct {
	*fakeTerm
	shard    int
	released chan struct{}
	once     sync.Once
}

func (t *fakeShardTerm) Shard() int { return t.shard }
func (t *fakeShardTerm) Release()   { t.once.Do(func() { close(t.released) }) }

// give hands shard s to node n with a fresh term.
func (sh *fakeShards) give(n *fakeShardNode, s int) *fakeShardTerm {
	sh.mu.Lock()
	sh.owners[s] = n.id
	sh.mu.Unlock()
	t := &fakeShardTerm{fakeTerm: newFakeTerm(sh.stores[s]), shard: s, released: make(chan struct{})}
	n.terms <- t
	return t
}

// take ends t and waits until its holder released it; the shard then has
// no owner.
func (sh *fakeShards) take(tb testing.TB, t *fakeShardTerm) {
	t.end()
	select {
	case <-t.released:
	case <-time.After(5 * time.Second):
		tb.Fatalf("shard %d not released", t.shard)
	}
	sh.mu.Lock()
	sh.owners[t.shard] = -1
	sh.mu.Unlock()
}

// groupsByShard returns a group name of each shard.
func groupsByShard(count int) []string {
	out := make([]string, count)
	for i, found := 0, 0; found < count; i++ {
		g := fmt.Sprintf("g%d", i)
		if s := ha.ShardOf(g, count); out[s] == "" {
			out[s] = g
			found++
		}
	}
	return out
}

// TestShardedCluster: with shards, each node coordinates the groups of
// the shards it holds a term of and sends clients to the owner of the
// others; a shard that moves stops being served where it was before the
// next owner takes it, and its groups go on at their epochs there; a
// shard without an owner is COORDINATOR_NOT_AVAILABLE.
func TestShardedCluster(t *testing.T) {
	const count = 4
	sh := newFakeShards(2, count)
	na := &fakeShardNode{fakeNode: sh.node(0), sh: sh, terms: make(chan ShardTerm, count)}
	nb := &fakeShardNode{fakeNode: sh.node(1), sh: sh, terms: make(chan ShardTerm, count)}
	start := func(n *fakeShardNode) *testServer {
		return startServer(t, func(c *Config) {
			c.Store, c.TopicStore, c.Cluster, c.TopicRefresh = nil, sh.shared, n, 50*time.Millisecond
		})
	}
	a, b := start(na), start(nb)
	sh.advertise(a, b)
	groups := groupsByShard(count)
	terms := []*fakeShardTerm{sh.give(na, 0), sh.give(na, 1), sh.give(nb, 2), sh.give(nb, 3)}
	servers := []*testServer{a, a, b, b}
	eventually(t, 5*time.Second, "every shard served", func() bool {
		return a.shardTerm(0, time.Now()) != nil && a.shardTerm(1, time.Now()) != nil &&
			b.shardTerm(2, time.Now()) != nil && b.shardTerm(3, time.Now()) != nil
	})
	// The status page's view: no node leads, each coordinates its
	// shards, and none is named leader.
	shardsOf := func(ts *testServer, want ...int) {
		t.Helper()
		l := ts.Leadership()
		if l.Shards == nil || l.Shards.Count != count || !slices.Equal(l.Shards.Coordinating, want) ||
			l.LeaderKnown || l.Leading != (len(want) > 0) {
			t.Fatalf("leadership of node %d: %+v shards %+v, want shards %v of %d and no leader", l.Self.ID, l, l.Shards, want, count)
		}
	}
	shardsOf(a, 0, 1)
	shardsOf(b, 2, 3)
	ca, cb := dial(t, a.addr), dial(t, b.addr)
	clients := map[*testServer]*rawClient{a: ca, b: cb}
	other := map[*testServer]*rawClient{a: cb, b: ca}
	ca.roundTrip(metadataRequest(12, "jobs"))

	// FindCoordinator names each group's shard owner, on either node.
	for _, c := range []*rawClient{ca, cb} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version = 4
		fc.CoordinatorKeys = groups
		for i, co := range c.roundTrip(fc).(*kmsg.FindCoordinatorResponse).Coordinators {
			if want := int32(i / 2); co.ErrorCode != 0 || co.NodeID != want {
				t.Fatalf("FindCoordinator(%s): node %d error %d, want node %d", groups[i], co.NodeID, co.ErrorCode, want)
			}
		}
	}
	// Each group is served by its owner only.
	member := func(s int) string { return fmt.Sprintf("member-%d-00000000000000000", s) }
	for s, g := range groups {
		r := clients[servers[s]].roundTrip(cgHeartbeat(g, member(s), 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 || r.MemberEpoch != 1 {
			t.Fatalf("join %s at its owner: error %d epoch %d", g, r.ErrorCode, r.MemberEpoch)
		}
		r = other[servers[s]].roundTrip(cgHeartbeat(g, member(s), 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("heartbeat of %s at the other node: error %d, want NOT_COORDINATOR", g, r.ErrorCode)
		}
	}
	lg := ca.roundTrip(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if len(lg.Groups) != 2 || lg.Groups[0].Group == groups[2] || lg.Groups[1].Group == groups[3] {
		t.Fatalf("ListGroups on a: %+v, want the groups of shards 0 and 1", lg.Groups)
	}

	// Shard 1 moves from a to b: a stops serving it before b takes it,
	// and its member goes on at its epoch on b.
	sh.take(t, terms[1])
	hb := cgHeartbeat(groups[1], member(1), 1)
	if r := ca.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("shard without owner: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	sh.give(nb, 1)
	eventually(t, 5*time.Second, "b to serve shard 1", func() bool { return b.shardTerm(1, time.Now()) != nil })
	r := cb.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("the moved group's member on its new owner: error %d epoch %d; it must go on at its epoch", r.ErrorCode, r.MemberEpoch)
	}
	if r := ca.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("the old owner after the move: error %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	shardsOf(a, 0)
	shardsOf(b, 1, 2, 3)
	// The other shards were not touched.
	hb0 := cgHeartbeat(groups[0], member(0), 1)
	if r := ca.roundTrip(hb0).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("shard 0 on a after shard 1 moved: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	if n := a.metric(t, "tenure_coordinating"); n != 1 {
		t.Fatalf("a leads %v, want 1 (shard 0)", n)
	}
	// The owner of shard 0 is the controller: it serves topic
	// deletions, and the other owners' groups forget the topic at their
	// next refresh.
	md := metadataRequest(12, "jobs")
	if c := cb.roundTrip(md).(*kmsg.MetadataResponse).ControllerID; c != 0 {
		t.Fatalf("b names controller %d, want shard 0's owner 0", c)
	}
	if r := cb.roundTrip(deleteTopicsRequest(6, "jobs")).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != kerr.NotController.Code {
		t.Fatalf("DeleteTopics on a node without shard 0: error %d, want NOT_CONTROLLER", r.Topics[0].ErrorCode)
	}
	if r := ca.roundTrip(deleteTopicsRequest(6, "jobs")).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics on shard 0's owner: error %d", r.Topics[0].ErrorCode)
	}
	eventually(t, 5*time.Second, "a group of b's shards to be told to give up the deleted topic's partitions", func() bool {
		r := cb.roundTrip(cgHeartbeat(groups[2], member(2), 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat on b: error %d", r.ErrorCode)
		}
		return r.Assignment != nil && len(r.Assignment.Topics) == 0
	})

	sh.take(t, terms[0])
	eventually(t, 5*time.Second, "a to lead nothing", func() bool { return a.metric(t, "tenure_coordinating") == 0 })
	shardsOf(a)
}

// gatedLoad is a store whose loads fail a number of times, then wait for
// the gate: a store that is slow to load, or not reachable yet.
type gatedLoad struct {
	store.Store
	fails atomic.Int32
	gate  chan struct{}
}

func (g *gatedLoad) Load(ctx context.Context) ([]coordinator.Record, error) {
	if g.fails.Add(-1) >= 0 {
		return nil, errors.New("etcd is not answering")
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Store.Load(ctx)
}

// TestTermLoadRetried: a term whose load fails is loaded again while it
// holds, rather than held serving nothing, and while it loads its groups'
// requests are answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry
// at this node, and FindCoordinator names this node.
func TestTermLoadRetried(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
	na := set.node(0)
	a := startSetServer(t, set, na)
	set.advertise(a)
	ca := dial(t, a.addr)
	ca.roundTrip(metadataRequest(12, "jobs"))

	gl := &gatedLoad{Store: set.shared, gate: make(chan struct{})}
	gl.fails.Store(2)
	term := newFakeTerm(gl)
	set.setLeader(0)
	na.terms <- term
	eventually(t, 5*time.Second, "the third load to wait at the gate", func() bool { return gl.fails.Load() < 0 })
	const m1 = "member-a-000000000000000"
	if r := ca.roundTrip(cgHeartbeat("g", m1, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join while the term loads: error %d, want COORDINATOR_LOAD_IN_PROGRESS", r.ErrorCode)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"g"}
	if c := ca.roundTrip(fc).(*kmsg.FindCoordinatorResponse).Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 0 {
		t.Fatalf("FindCoordinator while loading: %+v", c)
	}
	close(gl.gate)
	eventually(t, 5*time.Second, "the term to serve", func() bool { return a.lead.Load() != nil })
	if r := ca.roundTrip(cgHeartbeat("g", m1, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join once loaded: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
}
