package ha_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// faults sits between one client and the server (gRPC interceptors) and
// holds calls as a network that drops packets would, until it heals or
// the call's context ends:
//
//   - faultKeepalive: lease renewals only (the LeaseKeepAlive stream);
//   - faultPartition: every new call and stream (streams already open,
//     such as an established watch, go on).
type faults struct {
	mu     sync.Mutex
	mode   faultMode
	healed chan struct{} // closed when the mode goes back to none
}

type faultMode int

const (
	faultNone faultMode = iota
	faultKeepalive
	faultPartition
)

const keepaliveMethod = "/etcdserverpb.Lease/LeaseKeepAlive"

func (f *faults) set(m faultMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m != faultNone && f.mode == faultNone {
		f.healed = make(chan struct{})
	}
	if m == faultNone && f.mode != faultNone {
		close(f.healed)
	}
	f.mode = m
}

// hold blocks a call to method while the fault covers it.
func (f *faults) hold(ctx context.Context, method string) error {
	f.mu.Lock()
	mode, healed := f.mode, f.healed
	f.mu.Unlock()
	if mode == faultNone || (mode == faultKeepalive && method != keepaliveMethod) {
		return nil
	}
	select {
	case <-healed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *faults) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := f.hold(ctx, method); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (f *faults) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if err := f.hold(ctx, method); err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// client returns a client of the shared server whose calls go through f.
func (f *faults) client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(f.unary),
			grpc.WithChainStreamInterceptor(f.stream),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestInDoubt: a leader whose renewals stop reaching etcd, while etcd
// itself is fine, ends its term (in_doubt) before any other node's term
// starts: the valid intervals of all terms, polled on one clock, never
// overlap. The deposed term's guarded writes fail. Once the network heals
// the node registers again under its ID and can lead again.
//
// keepalive: only the renewals are lost; the node still revokes its lease
// when it gives up, so a successor wins at once. partition: every call of
// the node hangs, so the successor waits for etcd to expire the lease.
func TestInDoubt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode faultMode
	}{
		{"keepalive", faultKeepalive},
		{"partition", faultPartition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testInDoubt(t, tc.mode)
		})
	}
}

func testInDoubt(t *testing.T, mode faultMode) {
	t.Helper()
	prefix := uniquePrefix(t)
	rec := newRecorder(t)
	cli := etcd.Client(t)
	var (
		nodes []*ha.Node
		fs    []*faults
		regs  []*prometheus.Registry
	)
	for i := range 3 {
		f := &faults{}
		reg := prometheus.NewRegistry()
		n := join(t, f.client(t, etcd.Endpoints), prefix, addr(i), ha.Registerer(reg))
		rec.follow(i, n)
		nodes, fs, regs = append(nodes, n), append(fs, f), append(regs, reg)
	}
	first := rec.next(5 * time.Second)
	faulty := first.node
	id := nodes[faulty].Self().ID

	cut := time.Now()
	fs[faulty].set(mode)
	second := rec.next(3 * ttl)
	if second.node == faulty {
		t.Fatalf("the cut-off node %d won again", faulty)
	}
	waitDone(t, first.term, 0, "the cut-off leader's term when another won")
	old, cur := rec.snapshot(first), rec.snapshot(second)
	t.Logf("cut off: the term was valid %v more, the successor's term began %v after the cut",
		old.last.Sub(cut).Round(time.Millisecond), cur.first.Sub(cut).Round(time.Millisecond))
	if old.last.Sub(cut) >= ttl {
		t.Errorf("the cut-off term was valid %v after the cut, longer than the TTL", old.last.Sub(cut))
	}
	if got := metric(t, regs[faulty], "tenure_leader_lost_total", "in_doubt"); got != 1 {
		t.Errorf("tenure_leader_lost_total{reason=in_doubt} = %v, want 1", got)
	}
	if got := metric(t, regs[faulty], "tenure_ha_keepalive_failures_total", ""); got < 1 {
		t.Errorf("tenure_ha_keepalive_failures_total = %v, want some", got)
	}
	if guardWrites(t, cli, prefix, first.term) {
		t.Fatal("a write guarded by the in-doubt term succeeded")
	}
	if !guardWrites(t, cli, prefix, second.term) {
		t.Fatal("the successor's guarded write failed")
	}
	rec.none(ttl, "while cut off")

	// Healed, the node registers again under its ID and, once the others
	// leave, leads again.
	fs[faulty].set(faultNone)
	testenv.Eventually(t, 5*time.Second, "the node to be registered again", func() bool {
		for _, n := range nodes[faulty].Nodes() {
			if n.ID == id && n.Addr == addr(faulty) {
				return true
			}
		}
		return false
	})
	if got := nodes[faulty].Self().ID; got != id {
		t.Errorf("the node's ID went from %d to %d", id, got)
	}
	for i, n := range nodes {
		if i != faulty {
			n.Close()
		}
	}
	var again *termRec
	for again == nil || again.node != faulty {
		again = rec.next(3 * ttl)
	}
	if !guardWrites(t, cli, prefix, again.term) {
		t.Fatal("the healed leader's guarded write failed")
	}
	rec.checkSafety()
}
