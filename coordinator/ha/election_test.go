package ha_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

func addr(i int) string { return fmt.Sprintf("tenure-%d.test:9092", i) }

// TestElection: three nodes elect exactly one leader, hold IDs 0, 1 and 2
// and see each other; when the leader closes another wins within the TTL
// and a second, the deposed term's guarded writes fail, and revisions
// grow. A resignation hands over too, and a node joining later takes the
// lowest free ID.
func TestElection(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	rec := newRecorder(t)
	cli := etcd.Client(t)
	var nodes []*ha.Node
	var regs []*prometheus.Registry
	for i := range 3 {
		reg := prometheus.NewRegistry()
		n := join(t, etcd.Client(t), prefix, addr(i), ha.Registerer(reg))
		rec.follow(i, n)
		nodes, regs = append(nodes, n), append(regs, reg)
	}

	first := rec.next(5 * time.Second)
	rec.none(300*time.Millisecond, "a second node became leader while the first leads")
	if !first.term.Valid(time.Now()) {
		t.Fatal("the only term is not valid")
	}

	var ids []int32
	for _, n := range nodes {
		ids = append(ids, n.Self().ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int32{0, 1, 2}) {
		t.Fatalf("IDs %v, want 0, 1, 2", ids)
	}
	want := []ha.NodeInfo{}
	for _, n := range nodes {
		want = append(want, n.Self())
	}
	slices.SortFunc(want, func(a, b ha.NodeInfo) int { return int(a.ID - b.ID) })
	leader := nodes[first.node].Self()
	testenv.Eventually(t, 5*time.Second, "every node to see three nodes and the leader", func() bool {
		for _, n := range nodes {
			got, ok := n.Leader()
			if !reflect.DeepEqual(n.Nodes(), want) || !ok || !reflect.DeepEqual(got, leader) {
				return false
			}
		}
		return true
	})
	for i, reg := range regs {
		wantLeader := 0.0
		if i == first.node {
			wantLeader = 1
		}
		if got := metric(t, reg, "tenure_leader", ""); got != wantLeader {
			t.Errorf("node %d: tenure_leader %v, want %v", i, got, wantLeader)
		}
		if got := metric(t, reg, "tenure_leader_terms_total", ""); got != wantLeader {
			t.Errorf("node %d: tenure_leader_terms_total %v, want %v", i, got, wantLeader)
		}
		if got := metric(t, reg, "tenure_ha_nodes", ""); got != 3 {
			t.Errorf("node %d: tenure_ha_nodes %v, want 3", i, got)
		}
	}
	if !guardWrites(t, cli, prefix, first.term) {
		t.Fatal("the leader's guarded write failed")
	}

	// The leader closes: another wins at once (Close revokes the lease).
	closed := time.Now()
	if err := nodes[first.node].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	second := rec.next(ttl + time.Second)
	t.Logf("node %d won %v after the leader closed", second.node, time.Since(closed).Round(time.Millisecond))
	waitDone(t, first.term, 0, "the closed leader's term")
	if first.term.Valid(time.Now()) {
		t.Fatal("the closed leader's term is valid")
	}
	if guardWrites(t, cli, prefix, first.term) {
		t.Fatal("a write guarded by the deposed term succeeded")
	}
	if !guardWrites(t, cli, prefix, second.term) {
		t.Fatal("the new leader's guarded write failed")
	}
	if second.term.Revision() <= first.term.Revision() {
		t.Fatalf("revision %d after %d", second.term.Revision(), first.term.Revision())
	}

	// The new leader resigns: the last node wins, and the resigned one
	// stays a candidate.
	if err := second.term.Resign(testenv.Context(t)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	third := rec.next(ttl)
	if third.node == second.node || third.node == first.node {
		t.Fatalf("node %d won after node %d resigned", third.node, second.node)
	}
	if got := metric(t, regs[second.node], "tenure_leader_lost_total", "resigned"); got != 1 {
		t.Errorf("tenure_leader_lost_total{reason=resigned} %v, want 1", got)
	}
	if guardWrites(t, cli, prefix, second.term) {
		t.Fatal("a write guarded by the resigned term succeeded")
	}

	// A node joining now from another address does not take the closed
	// leader's ID, which stays that address's (clients map IDs to
	// addresses), but one no address had; it queues behind the resigned
	// node once that one is a candidate again.
	testenv.Eventually(t, 5*time.Second, "the resigned node to be a candidate again", func() bool {
		resp, err := cli.Get(testenv.Context(t), prefix+"meta/ha/leader/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})
	late := join(t, etcd.Client(t), prefix, addr(3))
	rec.follow(3, late)
	if got := late.Self().ID; got != 3 {
		t.Fatalf("a late node from a new address got ID %d, want 3: 0 to 2 are other addresses'", got)
	}
	if err := nodes[third.node].Close(); err != nil {
		t.Fatal(err)
	}
	if fourth := rec.next(ttl + time.Second); fourth.node != second.node {
		t.Fatalf("node %d won, want the resigned node %d, which queued first", fourth.node, second.node)
	}
	rec.checkSafety()
}

// TestJoinOptions: Join refuses bad options and addresses before it
// touches etcd.
func TestJoinOptions(t *testing.T) {
	t.Parallel()
	cli := etcd.Client(t)
	for _, tc := range []struct {
		name string
		addr string
		opts []ha.Opt
	}{
		{"no port", "tenure.test", nil},
		{"port zero", "tenure.test:0", nil},
		{"empty prefix", addr(0), []ha.Opt{ha.Prefix("")}},
		{"TTL below a second", addr(0), []ha.Opt{ha.ElectionTTL(500 * time.Millisecond)}},
		{"TTL not whole seconds", addr(0), []ha.Opt{ha.ElectionTTL(1500 * time.Millisecond)}},
		{"negative drift", addr(0), []ha.Opt{ha.MaxDrift(-0.1)}},
		{"drift of a half", addr(0), []ha.Opt{ha.MaxDrift(0.5)}},
		{"negative margin", addr(0), []ha.Opt{ha.Margin(-time.Millisecond)}},
		{"margin leaves less than half a TTL", addr(0), []ha.Opt{ha.ElectionTTL(2 * time.Second), ha.Margin(time.Second)}},
		{"nil logger", addr(0), []ha.Opt{ha.Logger(nil)}},
		{"HTTP address without a port", addr(0), []ha.Opt{ha.HTTPAddr("tenure.test")}},
		{"HTTP port zero", addr(0), []ha.Opt{ha.HTTPAddr("tenure.test:0")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ha.Join(testenv.Context(t), cli, tc.addr, tc.opts...)
			if !errors.Is(err, ha.ErrInvalidOption) {
				if n != nil {
					n.Close()
				}
				t.Fatalf("Join: %v, want ErrInvalidOption", err)
			}
			t.Log(err)
		})
	}
	// The largest margin that keeps half a TTL is accepted.
	n, err := ha.Join(testenv.Context(t), cli, addr(0), ha.Prefix(uniquePrefix(t)),
		ha.ElectionTTL(2*time.Second), ha.Margin(980*time.Millisecond))
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	n.Close()
}

// TestHTTPAddr: a node's HTTP address reaches every node, in Nodes and
// Leader (whichever leads); a node without one registers what nodes
// registered before the field existed, and reads as "".
func TestHTTPAddr(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	cli := etcd.Client(t)
	a := join(t, etcd.Client(t), prefix, addr(0), ha.HTTPAddr("tenure-0.test:9644"))
	b := join(t, etcd.Client(t), prefix, addr(1))
	want := []ha.NodeInfo{{ID: 0, Addr: addr(0), HTTP: "tenure-0.test:9644"}, {ID: 1, Addr: addr(1)}}
	if got := []ha.NodeInfo{a.Self(), b.Self()}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Self: %+v, want %+v", got, want)
	}
	testenv.Eventually(t, 5*time.Second, "both nodes to see both, and the same leader", func() bool {
		l0, ok0 := a.Leader()
		l1, ok1 := b.Leader()
		return ok0 && ok1 && reflect.DeepEqual(l0, l1) &&
			slices.ContainsFunc(want, func(n ha.NodeInfo) bool { return reflect.DeepEqual(n, l0) }) &&
			reflect.DeepEqual(a.Nodes(), want) && reflect.DeepEqual(b.Nodes(), want)
	})
	resp, err := cli.Get(testenv.Context(t), prefix+"meta/ha/nodes/1")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the registration of node 1: %v", err)
	}
	if got, old := string(resp.Kvs[0].Value), fmt.Sprintf(`{"id":1,"addr":%q}`, addr(1)); got != old {
		t.Fatalf("a node without HTTP registered %s, want the old form %s", got, old)
	}
}

// TestCloseFreesEverything: a closed node leaves no key behind, and Close
// is idempotent; Terms is closed.
func TestCloseFreesEverything(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	cli := etcd.Client(t)
	n := join(t, cli, prefix, addr(0))
	term := <-n.Terms()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, term, 0, "after Close")
	if _, ok := <-n.Terms(); ok {
		t.Fatal("Terms delivered a term after Close")
	}
	// Only the address's ID stays, for the node's next start, and the
	// prefix's shard count.
	resp, err := cli.Get(testenv.Context(t), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 2 || !strings.HasPrefix(string(resp.Kvs[0].Key), prefix+"meta/ha/addrs/") ||
		string(resp.Kvs[1].Key) != prefix+"meta/shards" {
		t.Fatalf("%d keys left after Close: %v", len(resp.Kvs), resp.Kvs)
	}
	again := join(t, cli, prefix, addr(0))
	defer again.Close()
	if again.Self().ID != 0 {
		t.Fatalf("the node restarted on its address got ID %d, want its own 0", again.Self().ID)
	}
}

// TestIDSticksAfterKill: a node killed without closing holds its ID until
// its lease expires; its next incarnation on the same address waits for it
// and takes the same ID, as a Kafka broker keeps its ID.
func TestIDSticksAfterKill(t *testing.T) {
	etcd := testenv.EtcdForTest(t)
	prefix := "/sticky/"
	dead := etcd.Client(t)
	first := join(t, dead, prefix, addr(0))
	other := join(t, etcd.Client(t), prefix, addr(1))
	defer other.Close()
	// A kill -9: the client goes away first, so the lease is left to
	// expire.
	id := first.Self().ID
	dead.Close()
	first.Close()
	start := time.Now()
	next := join(t, etcd.Client(t), prefix, addr(0))
	defer next.Close()
	if next.Self().ID != id {
		t.Fatalf("the next incarnation got ID %d, want %d", next.Self().ID, id)
	}
	t.Logf("took the ID back after %v", time.Since(start).Round(time.Millisecond))
}

// deposedTTL is TestDeposed's election TTL. Nothing in the test waits on
// a lease, so a TTL longer than the package's 1 s costs no time; with
// 1 s, a starved etcd that answered no renewal for 890 ms put both
// nodes' leases in doubt, both registered again, and node 0 won where
// node 1 must ("no term won within 1s", at load 17).
const deposedTTL = 3 * time.Second

// TestDeposed: an operator deleting the leader key ends the term (reason
// deposed) as soon as the node's watch shows it, its guarded writes fail,
// and the node, still a candidate, leads again once alone. This is outside
// the guarantee that terms never overlap: the successor may win before
// the watch delivers the deletion.
func TestDeposed(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	rec := newRecorder(t)
	cli := etcd.Client(t)
	reg := prometheus.NewRegistry()
	n0 := join(t, etcd.Client(t), prefix, addr(0), ha.Registerer(reg), ha.ElectionTTL(deposedTTL))
	rec.follow(0, n0)
	first := rec.next(5 * time.Second)
	n1 := join(t, etcd.Client(t), prefix, addr(1), ha.ElectionTTL(deposedTTL))
	rec.follow(1, n1)

	ctx := testenv.Context(t)
	resp, err := cli.Get(ctx, prefix+"meta/ha/leader/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("leader key: %v %v", resp, err)
	}
	if _, err := cli.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	// No lease expires here: the deletion and Close end the terms.
	waitDone(t, first.term, deposedTTL, "the term whose key was deleted")
	// Done closes before the loss is counted.
	testenv.Eventually(t, deposedTTL, "the loss to be counted as deposed", func() bool {
		return metric(t, reg, "tenure_leader_lost_total", "deposed") == 1
	})
	if guardWrites(t, cli, prefix, first.term) {
		t.Fatal("a write guarded by the deposed term succeeded")
	}
	if second := rec.next(deposedTTL); second.node != 1 {
		t.Fatalf("node %d won after node 0 was deposed, want node 1", second.node)
	}
	n1.Close()
	if third := rec.next(deposedTTL); third.node != 0 {
		t.Fatalf("node %d won, want node 0", third.node)
	}
}

// TestPreferID: a node joining for the first time takes the ID it prefers
// when it is free, the lowest free one when a live node has it or another
// address had it, and a node that rejoins keeps its address's ID whatever
// it prefers.
func TestPreferID(t *testing.T) {
	prefix := uniquePrefix(t)
	cli := etcd.Client(t)
	n3 := join(t, cli, prefix, addr(3), ha.PreferID(3))
	if id := n3.Self().ID; id != 3 {
		t.Fatalf("a node preferring 3 got %d", id)
	}
	n0 := join(t, cli, prefix, addr(0))
	if id := n0.Self().ID; id != 0 {
		t.Fatalf("a node without a preference got %d, want the lowest free, 0", id)
	}
	if id := join(t, cli, prefix, addr(5), ha.PreferID(3)).Self().ID; id != 1 {
		t.Fatalf("a node preferring the live node's 3 got %d, want the lowest free, 1", id)
	}
	// 3's address keeps 3 once it left: another address may not take it.
	if err := n3.Close(); err != nil {
		t.Fatal(err)
	}
	if id := join(t, cli, prefix, addr(6), ha.PreferID(3)).Self().ID; id != 2 {
		t.Fatalf("a node preferring the ID of a departed address got %d, want the lowest free, 2", id)
	}
	if id := join(t, cli, prefix, addr(3), ha.PreferID(7)).Self().ID; id != 3 {
		t.Fatalf("the departed node rejoining got %d, want its own 3", id)
	}
}
