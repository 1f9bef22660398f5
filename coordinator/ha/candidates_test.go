package ha_test

import (
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestCandidatesNameTheSuccessor: the leader dies (its lease left to
// expire) in a set whose next candidate is not the live node with the
// lowest ID. While the dead leader's key lingers, both survivors' Candidates
// name the same next candidate, and that node, not the lowest live one,
// wins the next term. This is what lets survivors point a dead leader's
// broker ID at its successor before the election is decided.
func TestCandidatesNameTheSuccessor(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	rec := newRecorder(t)
	dead := etcd.Client(t)
	n0 := join(t, dead, prefix, addr(0))
	rec.follow(0, n0)
	if first := rec.next(5 * time.Second); first.node != 0 {
		t.Fatalf("node %d won first, want 0", first.node)
	}
	n1 := join(t, etcd.Client(t), prefix, addr(1))
	n2 := join(t, etcd.Client(t), prefix, addr(2))
	rec.follow(2, n2)
	// n1 leaves and comes back on its address: the same ID, a candidacy
	// behind n2's.
	n1.Close()
	n1 = join(t, etcd.Client(t), prefix, addr(1))
	rec.follow(1, n1)
	if n0.Self().ID != 0 || n1.Self().ID != 1 || n2.Self().ID != 2 {
		t.Fatalf("IDs %d, %d, %d; want 0, 1, 2", n0.Self().ID, n1.Self().ID, n2.Self().ID)
	}
	order := func(n *ha.Node) []int32 {
		var ids []int32
		for _, c := range n.Candidates() {
			ids = append(ids, c.ID)
		}
		return ids
	}
	for _, n := range []*ha.Node{n1, n2} {
		testenv.Eventually(t, 5*time.Second, "the survivors to see the candidates 0, 2, 1", func() bool {
			o := order(n)
			return len(o) == 3 && o[0] == 0 && o[1] == 2 && o[2] == 1
		})
	}

	// A kill -9: the client goes, so the lease is left to expire (within
	// a TTL: the survivors read the candidates at once, while its key
	// lingers). n0.Close waits up to a TTL for a revocation that cannot
	// reach etcd, so it comes after.
	dead.Close()
	for _, n := range []*ha.Node{n1, n2} {
		if o := order(n); len(o) != 3 || o[0] != 0 {
			t.Fatalf("node %d sees the candidates %v right after the kill; want 0 still first (its key lingers)", n.Self().ID, o)
		}
		if next := order(n)[1]; next != 2 {
			t.Fatalf("node %d names %d next, want 2", n.Self().ID, next)
		}
	}
	n0.Close()
	won := rec.next(5 * ttl)
	if won.node != 2 {
		t.Fatalf("node %d won after the leader died, want 2 (the next candidate; 1 is the lowest live ID)", won.node)
	}
}
