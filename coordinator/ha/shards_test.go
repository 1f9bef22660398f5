package ha_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// shardRec is one shard term of one node, as a poller saw it.
type shardRec struct {
	node        int
	term        *ha.Term
	first, last time.Time // first and last instants Valid was true
	ended       bool
}

// shardWatch holds the shard terms of every node of a test: each term is
// polled until it ends, then released, as a server drops a shard.
type shardWatch struct {
	t    *testing.T
	mu   sync.Mutex
	recs []*shardRec
	wg   sync.WaitGroup
}

func newShardWatch(t *testing.T) *shardWatch {
	w := &shardWatch{t: t}
	t.Cleanup(w.wg.Wait)
	return w
}

func (w *shardWatch) follow(i int, n *ha.Node) {
	w.wg.Go(func() {
		for term := range n.ShardTerms() {
			rec := &shardRec{node: i, term: term}
			w.mu.Lock()
			w.recs = append(w.recs, rec)
			w.mu.Unlock()
			w.wg.Go(func() {
				for {
					now := time.Now()
					valid := term.Valid(now)
					w.mu.Lock()
					if valid {
						if rec.first.IsZero() {
							rec.first = now
						}
						rec.last = now
					} else {
						rec.ended = true
					}
					w.mu.Unlock()
					if !valid {
						term.Release()
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
	})
}

// join joins node i to the set of prefix with shards shards, and follows
// its shard terms.
func (w *shardWatch) join(prefix string, i, shards int, opts ...ha.Opt) *ha.Node {
	n := join(w.t, etcd.Client(w.t), prefix, addr(i), append([]ha.Opt{ha.Shards(shards)}, opts...)...)
	w.follow(i, n)
	return n
}

// owners returns the node holding a live term of each shard (-1: none),
// failing the test if two do.
func (w *shardWatch) owners(shards int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int, shards)
	for i := range out {
		out[i] = -1
	}
	for _, r := range w.recs {
		if r.ended || r.first.IsZero() {
			continue
		}
		if s := r.term.Shard(); out[s] >= 0 {
			w.t.Fatalf("shard %d held by nodes %d and %d at once", s, out[s], r.node)
		} else {
			out[s] = r.node
		}
	}
	return out
}

// waitBalanced waits until every shard is held by one of nodes, each
// holding floor or ceil of its share, and returns the owners.
func (w *shardWatch) waitBalanced(shards int, nodes []int, within time.Duration) []int {
	w.t.Helper()
	var owners []int
	testenv.Eventually(w.t, within, fmt.Sprintf("%d shards balanced over nodes %v", shards, nodes), func() bool {
		owners = w.owners(shards)
		count := map[int]int{}
		for _, o := range owners {
			if !slices.Contains(nodes, o) {
				return false
			}
			count[o]++
		}
		for _, n := range nodes {
			if c := count[n]; c < shards/len(nodes) || c > (shards+len(nodes)-1)/len(nodes) {
				return false
			}
		}
		return true
	})
	return owners
}

// checkSafety fails the test if two terms of one shard were valid at
// once, or if a shard's revisions do not grow.
func (w *shardWatch) checkSafety(shards int) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	by := make([][]shardRec, shards)
	for _, r := range w.recs {
		if !r.first.IsZero() {
			by[r.term.Shard()] = append(by[r.term.Shard()], *r)
		}
	}
	for s, recs := range by {
		slices.SortFunc(recs, func(a, b shardRec) int { return a.first.Compare(b.first) })
		for i := 1; i < len(recs); i++ {
			prev, cur := recs[i-1], recs[i]
			if !prev.last.Before(cur.first) {
				w.t.Errorf("shard %d: node %d's term was valid %v after node %d's began", s, prev.node, prev.last.Sub(cur.first), cur.node)
			}
			if cur.term.Revision() <= prev.term.Revision() {
				w.t.Errorf("shard %d: revisions do not grow: %d then %d", s, prev.term.Revision(), cur.term.Revision())
			}
		}
	}
}

func moved(before, after []int) (n int, between []int) {
	for s := range before {
		if before[s] != after[s] {
			n++
			if before[s] >= 0 && after[s] >= 0 {
				between = append(between, s)
			}
		}
	}
	return n, between
}

// TestShards: shards spread evenly over the nodes; a node that joins
// takes only its share, from the others' excess; a node that is killed
// loses only its shards, to the others, after its lease expires; and no
// two nodes ever hold a valid term of one shard at once.
func TestShards(t *testing.T) {
	t.Parallel()
	const shards = 12
	prefix := uniquePrefix(t)
	w := newShardWatch(t)
	w.join(prefix, 0, shards)
	w.join(prefix, 1, shards)
	two := w.waitBalanced(shards, []int{0, 1}, 5*ttl)

	dead := etcd.Client(t)
	n2 := join(t, dead, prefix, addr(2), ha.Shards(shards))
	w.follow(2, n2)
	three := w.waitBalanced(shards, []int{0, 1, 2}, 5*ttl)
	if n, between := moved(two, three); n != shards/3 || len(between) != n {
		t.Fatalf("node 2 joining moved %d shards (%v -> %v), want %d, all to node 2", n, two, three, shards/3)
	}
	for s, o := range three {
		if two[s] != o && o != 2 {
			t.Fatalf("shard %d moved from %d to %d, not to the joiner", s, two[s], o)
		}
	}
	// The last write of one of node 2's shard terms, for the handover
	// revision of the term that takes the shard next.
	var lastTerm *ha.Term
	w.mu.Lock()
	for _, r := range w.recs {
		if r.node == 2 {
			lastTerm = r.term
		}
	}
	w.mu.Unlock()
	resp, err := etcd.Client(t).Txn(testenv.Context(t)).If(lastTerm.Guard()).Then(clientv3.OpPut(prefix+"data", "last")).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("node 2's guarded write to shard %d: %v (succeeded: %v)", lastTerm.Shard(), err, err == nil && resp.Succeeded)
	}
	lastWrite := resp.Header.Revision
	// A kill -9: the client goes first, so the lease is left to expire.
	start := time.Now()
	dead.Close()
	n2.Close()
	two = w.waitBalanced(shards, []int{0, 1}, 5*ttl)
	w.mu.Lock()
	next := 0
	for _, r := range w.recs {
		if r.node == 2 || r.term.Shard() != lastTerm.Shard() || r.term.Revision() < lastTerm.Revision() {
			continue
		}
		next++
		if r.term.HandoverRevision() <= lastWrite {
			t.Errorf("shard %d's next term: handover revision %d, want above node 2's last write at %d", lastTerm.Shard(), r.term.HandoverRevision(), lastWrite)
		}
	}
	w.mu.Unlock()
	if next == 0 {
		t.Errorf("no term of shard %d after node 2's", lastTerm.Shard())
	}
	t.Logf("node 2's shards served again %v after it died (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)
	for s, o := range three {
		if o != 2 && two[s] != o {
			t.Fatalf("shard %d moved from node %d to %d though its owner lived", s, o, two[s])
		}
	}
	w.checkSafety(shards)
	w.mu.Lock()
	var deadTerms []*ha.Term
	for _, r := range w.recs {
		if r.node == 2 {
			deadTerms = append(deadTerms, r.term)
		}
	}
	w.mu.Unlock()
	for _, term := range deadTerms {
		if guardWrites(t, etcd.Client(t), prefix, term) {
			t.Fatalf("a write guarded by the dead node's term of shard %d succeeded", term.Shard())
		}
	}
}

// TestShardOwner: every node's watch names each shard's owner.
func TestShardOwner(t *testing.T) {
	t.Parallel()
	const shards = 5
	prefix := uniquePrefix(t)
	w := newShardWatch(t)
	nodes := []*ha.Node{
		join(t, etcd.Client(t), prefix, addr(0), ha.Shards(shards)),
		join(t, etcd.Client(t), prefix, addr(1), ha.Shards(shards)),
	}
	for i, n := range nodes {
		w.follow(i, n)
	}
	owners := w.waitBalanced(shards, []int{0, 1}, 5*ttl)
	testenv.Eventually(t, ttl, "every node to see every owner", func() bool {
		for _, n := range nodes {
			for s, o := range owners {
				got, ok := n.ShardOwner(s)
				if !ok || got.ID != nodes[o].Self().ID || got.Addr != addr(o) {
					return false
				}
			}
		}
		return true
	})
	if _, ok := nodes[0].ShardOwner(shards + 3); ok {
		t.Fatal("a shard beyond the count has an owner")
	}
	if nodes[0].ShardCount() != shards {
		t.Fatalf("ShardCount = %d", nodes[0].ShardCount())
	}
}

// TestShardCountIsFixed: a node with another count than the prefix's
// first is refused, and so is one without shards on a sharded prefix.
func TestShardCountIsFixed(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	cli := etcd.Client(t)
	join(t, cli, prefix, addr(0), ha.Shards(8))
	for _, opts := range [][]ha.Opt{{ha.Shards(9)}, nil} {
		all := append([]ha.Opt{ha.Prefix(prefix), ha.ElectionTTL(ttl)}, opts...)
		n, err := ha.Join(testenv.Context(t), cli, addr(1), all...)
		if !errors.Is(err, ha.ErrShardCount) {
			if n != nil {
				n.Close()
			}
			t.Fatalf("Join with %v on a prefix of 8 shards: %v, want ErrShardCount", opts, err)
		}
	}
	// The refused nodes left nothing behind: no registration holds an ID.
	resp, err := cli.Get(testenv.Context(t), prefix+"meta/ha/nodes/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("registrations after refusals: %v %v, want 1", resp, err)
	}
	if _, err := ha.Join(testenv.Context(t), cli, addr(2), ha.Shards(0)); !errors.Is(err, ha.ErrInvalidOption) {
		t.Fatalf("Shards(0): %v", err)
	}
}

// TestShardDeposed: an operator deleting a shard's owner key ends the
// owner's term of it as soon as the watch shows it (its guarded writes
// fail at once), and the node, still the shard's target, takes it again
// under a new revision.
func TestShardDeposed(t *testing.T) {
	t.Parallel()
	const shards = 3
	prefix := uniquePrefix(t)
	cli := etcd.Client(t)
	n := join(t, etcd.Client(t), prefix, addr(0), ha.Shards(shards))
	first := map[int]*ha.Term{}
	for len(first) < shards {
		select {
		case term := <-n.ShardTerms():
			first[term.Shard()] = term
		case <-time.After(5 * ttl):
			t.Fatalf("%d of %d shard terms", len(first), shards)
		}
	}
	if _, err := cli.Delete(testenv.Context(t), prefix+"meta/ha/shards/1"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, first[1], time.Second, "the term whose key was deleted")
	first[1].Release()
	if guardWrites(t, cli, prefix, first[1]) {
		t.Fatal("a write guarded by the deposed shard term succeeded")
	}
	select {
	case again := <-n.ShardTerms():
		if again.Shard() != 1 || again.Revision() <= first[1].Revision() || !again.Valid(time.Now()) {
			t.Fatalf("next term: shard %d revision %d (deposed %d)", again.Shard(), again.Revision(), first[1].Revision())
		}
	case <-time.After(5 * ttl):
		t.Fatal("shard 1 not taken again")
	}
	for _, s := range []int{0, 2} {
		if !first[s].Valid(time.Now()) {
			t.Fatalf("shard %d's term ended with shard 1's", s)
		}
	}
}

// TestShardsLeave: a node that leaves hands its shards to the others at
// once, each released before it is taken, without waiting for its lease.
func TestShardsLeave(t *testing.T) {
	t.Parallel()
	const shards = 6
	prefix := uniquePrefix(t)
	w := newShardWatch(t)
	n0 := w.join(prefix, 0, shards, ha.ElectionTTL(leaveTTL))
	n1 := w.join(prefix, 1, shards, ha.ElectionTTL(leaveTTL))
	w.waitBalanced(shards, []int{0, 1}, 5*ttl)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*leaveTTL)
	defer cancel()
	if held, err := n1.Leave(ctx); err != nil || held != shards/2 {
		t.Fatalf("Leave: %d shards, %v; want %d", held, err, shards/2)
	}
	took := time.Since(start)
	// Leave returns once etcd shows the new owners; the watch's pollers
	// see each term valid a moment after it reaches them.
	testenv.Eventually(t, ttl, "node 0 to hold every shard after Leave", func() bool {
		return !slices.ContainsFunc(w.owners(shards), func(o int) bool { return o != 0 })
	})
	t.Logf("handed %d shards over in %v (TTL %v)", shards/2, took.Round(time.Millisecond), leaveTTL)
	if took >= leaveTTL {
		t.Fatalf("Leave took %v, as long as a lease expiry", took)
	}
	n1.Close()
	w.checkSafety(shards)

	// A node alone has nobody to hand its shards to.
	if held, err := n0.Leave(ctx); err != nil || held != 0 {
		t.Fatalf("Leave of the last node: %d, %v", held, err)
	}
}
