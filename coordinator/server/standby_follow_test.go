package server

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
)

// successionNode is a fakeShardNode that says which shards it may take
// next, as ha.Node does: never one it holds.
type successionNode struct {
	*fakeShardNode
	mu   sync.Mutex
	next []int
}

func (n *successionNode) StandbyShards() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.next)
}

func (n *successionNode) setNext(next ...int) {
	n.mu.Lock()
	n.next = next
	n.mu.Unlock()
}

// followSource is a recordsSource that is a ShardFollower, so that the
// standby asks the node which shards it may take.
type followSource struct {
	recordsSource
}

func (f *followSource) Follow([]int) {}

// TestStandbyFollowsShardUntilServed: a shard the standby follows stays
// followed once this node owns it (ha's StandbyShards leaves it out
// then) until the node serves it: a pass between the win and the
// takeover's pin dropped it, and the takeover loaded the store
// (TestShards failed so under a loaded machine's make test).
func TestStandbyFollowsShardUntilServed(t *testing.T) {
	const count = 4
	sh := newFakeShards(2, count)
	n := &successionNode{fakeShardNode: &fakeShardNode{fakeNode: sh.node(0), sh: sh, terms: make(chan ShardTerm, count)}}
	a := startServer(t, func(c *Config) {
		c.Store, c.TopicStore, c.Cluster, c.TopicRefresh = nil, sh.shared, n, 50*time.Millisecond
		c.Standby = &followSource{recordsSource{recs: map[string][]coordinator.Record{}}}
	})
	sb := a.standby
	n.setNext(2)
	if got := sb.shards(); !slices.Equal(got, []int{2}) {
		t.Fatalf("followed %v, want [2]", got)
	}
	// Won: etcd says this node owns shard 2, so StandbyShards leaves it
	// out, but the server does not serve it yet.
	sh.mu.Lock()
	sh.owners[2] = 0
	sh.mu.Unlock()
	n.setNext()
	if got := sb.shards(); !slices.Equal(got, []int{2}) {
		t.Fatalf("followed %v once the shard was won, before it is served; want [2]", got)
	}
	if !sb.pin(2) {
		t.Fatal("the takeover cannot pin the shard it won")
	}
	sb.unpin(2)
	// Served: no longer followed.
	sh.give(n.fakeShardNode, 2)
	eventually(t, 5*time.Second, "shard 2 served", func() bool { return a.shardTerm(2, time.Now()) != nil })
	eventually(t, 5*time.Second, "shard 2 no longer followed", func() bool { return len(sb.shards()) == 0 })
}
