package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// txnShapes records the Txn requests a client sends: per request, how
// many transactions it nests (0 for a plain one).
type txnShapes struct {
	mu     sync.Mutex
	nested []int
}

func (s *txnShapes) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*pb.TxnRequest); ok {
		n := 0
		for _, op := range r.Success {
			if op.GetRequestTxn() != nil {
				n++
			}
		}
		s.mu.Lock()
		s.nested = append(s.nested, n)
		s.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (s *txnShapes) since(i int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.nested[i:]...)
}

// TestCombinedShards: three shards' writes, sent at once through one
// Combiner, go to etcd as one request of three nested transactions, each
// with its shard's guard and fence. The shard whose guard fails (its
// owner key moved) and the shard fenced by a newer store of its own write
// nothing and are told so (ErrGuardFailed, ErrFenced); the third shard's
// write lands all the same.
func TestCombinedShards(t *testing.T) {
	cli, shapes := shapedClient(t)
	ctx := testenv.Context(t)
	prefix := uniquePrefix(t)
	owner := func(s int) string { return fmt.Sprintf("%sowners/%d", prefix, s) }
	guard := func(s int) etcdstore.Opt {
		return etcdstore.Guard(clientv3.Compare(clientv3.Value(owner(s)), "=", "n1"))
	}
	for s := range 3 {
		if _, err := cli.Put(ctx, owner(s), "n1"); err != nil {
			t.Fatal(err)
		}
	}
	comb := etcdstore.NewCombiner(cli)
	t.Cleanup(comb.Close)
	store := prefix + "store/"
	var shards []*etcdstore.Store
	for s := range 3 {
		shards = append(shards, openShard(t, cli, store, s, 3, guard(s), etcdstore.Combine(comb)))
	}
	for s, st := range shards {
		persist(t, st, shardGroup(fmt.Sprintf("g%d", s), 1, "m")...)
	}

	// Shard 1 moves to another node; shard 2 is opened again (a later
	// term of this node's).
	if _, err := cli.Put(ctx, owner(1), "n2"); err != nil {
		t.Fatal(err)
	}
	again := openShard(t, cli, store, 2, 3, guard(2))
	before := countKeys(t, cli, store+"shards/")

	queued, release := etcdstore.HoldCombiner(comb)
	first := len(shapes.since(0))
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for s, st := range shards {
		wg.Go(func() { errs[s] = st.Persist(ctx, shardGroup(fmt.Sprintf("g%d", s), 2, "m2")) })
	}
	testenv.Eventually(t, 10*time.Second, "three writes waiting in the combiner", func() bool { return queued() == 3 })
	release()
	wg.Wait()

	if errs[0] != nil {
		t.Errorf("shard 0: %v, want written", errs[0])
	}
	if !errors.Is(errs[1], etcdstore.ErrGuardFailed) {
		t.Errorf("shard 1: %v, want ErrGuardFailed", errs[1])
	}
	if !errors.Is(errs[2], etcdstore.ErrFenced) {
		t.Errorf("shard 2: %v, want ErrFenced", errs[2])
	}
	if got := shapes.since(first); len(got) != 1 || got[0] != 3 {
		t.Errorf("requests sent (transactions nested in each): %v, want one of 3", got)
	}
	// Shard 0's write added a member, its assignment and a batch of its
	// offsets; the others wrote nothing.
	if after := countKeys(t, cli, store+"shards/"); after != before+3 {
		t.Errorf("keys under the shards: %d before, %d after, want 3 more (shard 0's new member and offset batch)", before, after)
	}
	if got := load(t, shards[0])[0].(*coordinator.GroupRecord).Epoch; got != 2 {
		t.Errorf("shard 0's group at epoch %d, want 2", got)
	}
	for s, st := range []*etcdstore.Store{shards[1], again} {
		if got := load(t, st)[0].(*coordinator.GroupRecord).Epoch; got != 1 {
			t.Errorf("shard %d's group at epoch %d, want 1", s+1, got)
		}
	}
	// The combiner goes on: the newer store of shard 2 writes through it.
	persist(t, again, &coordinator.GroupRecord{Group: "g2", Type: coordinator.Consumer, Epoch: 3})
}

// TestCombinedDuplicateKey: two shards writing one shared key (a
// generation log entry) at once make a request etcd refuses as a whole;
// nothing of it was written, so the Combiner sends each transaction alone,
// and both land.
func TestCombinedDuplicateKey(t *testing.T) {
	cli, shapes := shapedClient(t)
	ctx := testenv.Context(t)
	comb := etcdstore.NewCombiner(cli)
	t.Cleanup(comb.Close)
	prefix := uniquePrefix(t)
	a := openShard(t, cli, prefix, 0, 2, etcdstore.Combine(comb))
	b := openShard(t, cli, prefix, 1, 2, etcdstore.Combine(comb))

	queued, release := etcdstore.HoldCombiner(comb)
	first := len(shapes.since(0))
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, st := range []*etcdstore.Store{a, b} {
		wg.Go(func() {
			errs[i] = st.Persist(ctx, []coordinator.Record{
				&coordinator.GroupRecord{Group: fmt.Sprintf("g%d", i), Type: coordinator.Consumer, Epoch: 1},
				&coordinator.GenerationRecord{Group: "shared", Epoch: 1, Reason: fmt.Sprintf("from %d", i)},
			})
		})
	}
	testenv.Eventually(t, 10*time.Second, "two writes waiting in the combiner", func() bool { return queued() == 2 })
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("shard %d: %v, want written", i, err)
		}
	}
	if got := shapes.since(first); len(got) != 3 || got[0] != 2 || got[1] != 0 || got[2] != 0 {
		t.Errorf("requests sent (transactions nested in each): %v, want one of 2 (refused), then each alone", got)
	}
	for i, st := range []*etcdstore.Store{a, b} {
		if got := load(t, st)[0].(*coordinator.GroupRecord).Group; got != fmt.Sprintf("g%d", i) {
			t.Errorf("shard %d holds %s", i, got)
		}
	}
}

// TestCombinerTrickle: a transaction sent while a request is in flight
// waits for it, however little is in flight, and goes in the next request
// with whatever came meanwhile; a second request starts beside the first
// only once more waits than one request holds, and takes what fits.
func TestCombinerTrickle(t *testing.T) {
	cli, shapes := shapedClient(t)
	ctx := testenv.Context(t)
	const maxOps, shards = 16, 16
	comb := etcdstore.NewCombiner(cli, etcdstore.MaxTxnOps(maxOps))
	t.Cleanup(comb.Close)
	stores := combinedShards(t, cli, comb, maxOps, shards)

	// A trickle: one small transaction while a request flies.
	queued, release := etcdstore.HoldRequest(comb)
	first := len(shapes.since(0))
	done := make(chan error, 1)
	go func() { done <- stores[0].Persist(ctx, groupOfShard(0, 1)) }()
	testenv.Eventually(t, 10*time.Second, "the write waiting for the request in flight", func() bool { return queued() == 1 })
	if got := shapes.since(first); len(got) != 0 {
		t.Fatalf("requests sent beside the one in flight: %v, want none", got)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// More than one request holds: a second starts beside the one in
	// flight with what fits; the rest waits.
	queued, release = etcdstore.HoldRequest(comb)
	first = len(shapes.since(0))
	errs := make(chan error, shards)
	for s, st := range stores {
		go func() { errs <- st.Persist(ctx, groupOfShard(s, 2)) }()
	}
	var written int
	testenv.Eventually(t, 10*time.Second, "every write written beside the request in flight, or waiting for it", func() bool {
		takeWritten(t, errs, &written)
		return written+queued() == shards
	})
	if got := shapes.since(first); len(got) != 1 || got[0] != written || written+1 > maxOps {
		t.Errorf("requests sent beside the one in flight (transactions nested in each): %v, %d written; want one, of those written", got, written)
	}
	if written == 0 || written == shards {
		t.Errorf("%d of %d writes went beside the request in flight; want those that fit one request, the rest waiting", written, shards)
	}
	release()
	for ; written < shards; written++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCombinerDelay: a write that finds no request in flight waits out
// the combine delay, and the other shards' writes that come meanwhile go
// with it in one request. The delay ends early when more waits than one
// request holds, and writes that wait for a request's answer go when it
// comes, without a delay of their own.
func TestCombinerDelay(t *testing.T) {
	cli, shapes := shapedClient(t)
	ctx := testenv.Context(t)
	const maxOps, shards = 16, 16
	// A delay longer than any test: only EndCombineDelay ends it, or the
	// rules that send without waiting it out.
	comb := etcdstore.NewCombiner(cli, etcdstore.MaxTxnOps(maxOps), etcdstore.CombineDelay(time.Hour))
	t.Cleanup(comb.Close)
	stores := combinedShards(t, cli, comb, maxOps, shards)
	errs := make(chan error, shards)
	written := 0
	// queue sends shard s's write and waits until it waits in the
	// Combiner or is written.
	queue := func(s, epoch int) {
		t.Helper()
		want := written + etcdstore.CombinerQueued(comb) + 1
		go func() { errs <- stores[s].Persist(ctx, groupOfShard(s, epoch)) }()
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("shard %d's write queued or written", s), func() bool {
			takeWritten(t, errs, &written)
			return written+etcdstore.CombinerQueued(comb) == want
		})
	}
	waitWritten := func(n int, what string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for written < n {
			select {
			case err := <-errs:
				if err != nil {
					t.Fatal(err)
				}
				written++
			case <-timeout:
				t.Fatalf("%d of %d writes written after 30 s: %s", written, n, what)
			}
		}
	}

	// Three shards' writes one after another, while nothing is in
	// flight: none goes before the delay ends, then all in one request.
	first := len(shapes.since(0))
	for s := range 3 {
		queue(s, 1)
	}
	if got := shapes.since(first); len(got) != 0 || written != 0 {
		t.Fatalf("requests sent during the delay (transactions nested in each): %v, %d written; want none", got, written)
	}
	etcdstore.EndCombineDelay(comb)
	waitWritten(3, "the delay ended")
	if got := shapes.since(first); !slices.Equal(got, []int{3}) {
		t.Errorf("requests after the delay (transactions nested in each): %v, want one of 3", got)
	}

	// Writes that come while a request is in flight go once it is
	// answered, without waiting out a delay.
	queued, release := etcdstore.HoldRequest(comb)
	first, written = len(shapes.since(0)), 0
	for s := range 2 {
		queue(s, 2)
	}
	if n := queued(); n != 2 {
		t.Fatalf("%d writes waiting for the request in flight, want 2", n)
	}
	release()
	waitWritten(2, "the request they waited for was answered")
	if got := shapes.since(first); !slices.Equal(got, []int{2}) {
		t.Errorf("requests after the answer (transactions nested in each): %v, want one of 2", got)
	}

	// Writes one after another during a delay, until more waits than one
	// request holds: those that fit go at once, the rest when it is
	// answered.
	first, written = len(shapes.since(0)), 0
	s := 0
	for ; s < shards && len(shapes.since(first)) == 0; s++ {
		queue(s, 3)
	}
	if s == shards && len(shapes.since(first)) == 0 {
		t.Fatalf("%d writes waited out the delay; want a request once more waited than one holds", shards)
	}
	waitWritten(s, "more waited than one request holds")
	if got := shapes.since(first); len(got) != 2 || got[0] != s-1 || got[1] != 0 {
		t.Errorf("requests of %d writes sent one after another (transactions nested in each): %v; want one of %d, then the last alone", s, got, s-1)
	}
}

// shapedClient is a client of the test's etcd whose transactions shapes
// records, closed when t ends.
func shapedClient(t *testing.T) (*clientv3.Client, *txnShapes) {
	t.Helper()
	shapes := &txnShapes{}
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(shapes.intercept)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, shapes
}

// takeWritten adds to written the writes whose Persist has returned on
// errs, without waiting for more, and reports their errors.
func takeWritten(t *testing.T, errs <-chan error, written *int) {
	t.Helper()
	for {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
			*written++
		default:
			return
		}
	}
}

// combinedShards opens n shards of one prefix whose writes go through
// comb, in transactions of at most maxOps operations.
func combinedShards(t *testing.T, cli *clientv3.Client, comb *etcdstore.Combiner, maxOps, n int) []*etcdstore.Store {
	t.Helper()
	prefix := uniquePrefix(t)
	var stores []*etcdstore.Store
	for s := range n {
		stores = append(stores, openShard(t, cli, prefix, s, n, etcdstore.MaxTxnOps(maxOps), etcdstore.Combine(comb)))
	}
	return stores
}

// groupOfShard is a write of shard s's group at epoch.
func groupOfShard(s, epoch int) []coordinator.Record {
	return []coordinator.Record{&coordinator.GroupRecord{Group: fmt.Sprintf("g%d", s), Type: coordinator.Consumer, Epoch: int32(epoch)}}
}
