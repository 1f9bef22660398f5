package ha_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// leaveTTL is the election TTL of the tests that check that Leave hands
// over without waiting for a lease: a hand-off is a few etcd round trips
// and a watch event, a lease a TTL. At etcd's smallest TTL, a -race run on
// a loaded machine took 1.155 s for those round trips (TestShardsLeave,
// its lease renewed all along), so these tests leave them more room.
const leaveTTL = 3 * time.Second

// TestLeaderLeave: a one-leader set's leader that leaves hands the
// leadership to the other node at once, well within the TTL, without
// closing; it wins no term afterwards, even once alone; its peers' views
// announce each change on Changed. A follower's Leave holds nothing.
func TestLeaderLeave(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	rec := newRecorder(t)
	var nodes []*ha.Node
	for i := range 2 {
		n := join(t, etcd.Client(t), prefix, addr(i), ha.ElectionTTL(leaveTTL))
		rec.follow(i, n)
		nodes = append(nodes, n)
	}
	first := rec.next(5 * ttl)
	leader, other := nodes[first.node], nodes[1-first.node]
	testenv.Eventually(t, 5*ttl, "both nodes to see each other", func() bool {
		return len(leader.Nodes()) == 2 && len(other.Nodes()) == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
	defer cancel()
	if held, err := other.Leave(ctx); err != nil || held != 0 {
		t.Fatalf("a follower's Leave: %d, %v; want 0, nil", held, err)
	}
	// The follower stays registered: only a leader leaves at once.
	if len(leader.Nodes()) != 2 {
		t.Fatalf("after a follower's Leave the leader sees %v", leader.Nodes())
	}

	// Start again with a fresh follower, the one that left closed.
	other.Close()
	other = join(t, etcd.Client(t), prefix, addr(2), ha.ElectionTTL(leaveTTL))
	rec.follow(2, other)
	// The leader must see the new follower too: a leader that sees nobody
	// else has nobody to hand over to, and its Leave holds nothing.
	testenv.Eventually(t, 5*ttl, "the new follower and the leader to see each other", func() bool {
		l, ok := other.Leader()
		return ok && l.ID == leader.Self().ID &&
			slices.ContainsFunc(leader.Nodes(), func(n ha.NodeInfo) bool { return n.ID == other.Self().ID })
	})
	changed := other.Changed()
	start := time.Now()
	if held, err := leader.Leave(ctx); err != nil || held != 1 {
		t.Fatalf("the leader's Leave: %d, %v; want 1, nil", held, err)
	}
	took := time.Since(start)
	if first.term.Valid(time.Now()) {
		t.Fatal("the leader's term is still valid after Leave")
	}
	select {
	case <-changed:
	case <-time.After(5 * ttl):
		t.Fatal("the follower's Changed did not close when the leader left")
	}
	next := rec.next(5 * ttl)
	if next.node != 2 {
		t.Fatalf("node %d won after the leader left, want the follower", next.node)
	}
	t.Logf("leadership handed over in %v (TTL %v)", took.Round(time.Millisecond), leaveTTL)
	if took >= leaveTTL {
		t.Fatalf("Leave took %v, as long as a lease expiry", took)
	}
	if l, ok := leader.Leader(); !ok || l.ID != other.Self().ID {
		t.Fatalf("the node that left names %v (%v) as leader, want %d", l, ok, other.Self().ID)
	}
	if got := leader.Nodes(); len(got) != 1 || got[0].ID != other.Self().ID {
		t.Fatalf("the node that left is still registered: %v", got)
	}
	// Alone again, it still wins nothing: it is on its way out.
	other.Close()
	rec.none(3*ttl, "the node that left won a term")
	rec.checkSafety()
}
