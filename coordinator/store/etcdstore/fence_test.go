package etcdstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// faults sits between a client and the server (a gRPC interceptor) and
// makes the outcomes of writes unknown on demand, deterministically:
//
//   - modeLoseReply: the next Txn is applied, and its answer lost;
//   - modeHold: the next Txn is not sent but kept, as a request stuck in
//     the network, and the caller told its deadline passed; replay sends
//     it later;
//   - modeDown: every call fails as if the server were unreachable.
type faults struct {
	mu   sync.Mutex
	mode faultMode
	// after is the mode that follows a one-shot mode.
	after faultMode
	// pass is how many Txns a one-shot mode lets through first.
	pass int
	held []heldCall
}

type faultMode int

const (
	modeNone faultMode = iota
	modeLoseReply
	modeHold
	modeDown
)

type heldCall struct {
	method  string
	req     any
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption
}

const txnMethod = "/etcdserverpb.KV/Txn"

func (f *faults) set(m faultMode) { f.setThen(m, modeNone) }

// setThen sets a one-shot mode m and the mode after it.
func (f *faults) setThen(m, after faultMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.after = m, after
}

func (f *faults) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	f.mu.Lock()
	mode := f.mode
	switch {
	case method != txnMethod || (mode != modeLoseReply && mode != modeHold):
	case f.pass > 0:
		f.pass--
		mode = modeNone
	default:
		f.mode = f.after
	}
	if mode == modeHold && method == txnMethod {
		f.held = append(f.held, heldCall{method, req, cc, invoker, opts})
	}
	f.mu.Unlock()
	switch {
	case mode == modeDown:
		return status.Error(codes.Unavailable, "injected: server unreachable")
	case mode == modeLoseReply && method == txnMethod:
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		return status.Error(codes.DeadlineExceeded, "injected: reply lost")
	case mode == modeHold && method == txnMethod:
		return status.Error(codes.DeadlineExceeded, "injected: request held in the network")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// replay sends the held requests now, as a network that delivers them
// late, and returns their answers.
func (f *faults) replay(t *testing.T) []*pb.TxnResponse {
	t.Helper()
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.mu.Unlock()
	var out []*pb.TxnResponse
	for _, h := range held {
		resp := new(pb.TxnResponse)
		if err := h.invoker(testenv.Context(t), h.method, h.req, resp, h.cc, h.opts...); err != nil {
			t.Fatalf("replaying a held Txn: %v", err)
		}
		out = append(out, resp)
	}
	return out
}

// client returns a client of the shared server whose calls go through f.
func (f *faults) client(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   etcd.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(f.intercept)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// fenceRevision reads the fence key's ModRevision.
func fenceRevision(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(testenv.Context(t), prefix+"meta/fence")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("fence: %v %v", resp, err)
	}
	return resp.Kvs[0].ModRevision
}

// TestFenceLateWrite is the fence's purpose: a write whose request is
// stuck in the network when Persist gives up reaches the server only
// after Persist returned, and must write nothing.
func TestFenceLateWrite(t *testing.T) {
	f := &faults{}
	cli := f.client(t)
	prefix := uniquePrefix(t)
	// Four offsets a transaction: a batch holds MaxTxnOps-1 entries.
	s := openOn(t, cli, etcdstore.Prefix(prefix), etcdstore.MaxTxnOps(5))
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})
	fence := fenceRevision(t, cli, prefix)

	// A batch of three transactions: the first lands, the second is held.
	recs := offsets("g", 12)
	f.mu.Lock()
	f.mode, f.pass = modeHold, 1
	f.mu.Unlock()
	err := s.Persist(testenv.Context(t), recs)
	if err == nil {
		t.Fatal("Persist of a held write returned nil")
	}
	t.Logf("Persist: %v", err)
	if got := len(load(t, s)); got != 1+4 {
		t.Fatalf("%d records after the failed Persist, want its first transaction's 4 and the group", got)
	}
	if got := fenceRevision(t, cli, prefix); got <= fence {
		t.Fatalf("the fence did not move: %d, was %d", got, fence)
	}
	wantKeys := countKeys(t, cli, prefix)
	before := render(load(t, s), true)

	// The held request arrives now: it must fail its comparison.
	for _, resp := range f.replay(t) {
		if resp.Succeeded {
			t.Fatal("a write that arrived after the fence moved was applied")
		}
	}
	if got := countKeys(t, cli, prefix); got != wantKeys {
		t.Fatalf("keys after the late write: %d, want %d", got, wantKeys)
	}
	if after := render(load(t, s), true); after != before {
		t.Fatalf("the late write changed the store:\n%swas:\n%s", after, before)
	}
	// The store writes on.
	persist(t, s, recs...)
	if got := len(load(t, s)); got != 1+12 {
		t.Fatalf("%d records, want 13", got)
	}
}

// TestFenceLostReply: a write applied whose answer was lost is an error
// (Persist cannot know), but its outcome is final when Persist returns.
func TestFenceLostReply(t *testing.T) {
	f := &faults{}
	cli := f.client(t)
	prefix := uniquePrefix(t)
	s := openOn(t, cli, etcdstore.Prefix(prefix))
	fence := fenceRevision(t, cli, prefix)
	f.set(modeLoseReply)
	if err := s.Persist(testenv.Context(t), offsets("g", 3)); err == nil {
		t.Fatal("Persist with a lost reply returned nil")
	}
	if got := fenceRevision(t, cli, prefix); got <= fence {
		t.Fatalf("the fence did not move: %d, was %d", got, fence)
	}
	if got := len(load(t, s)); got != 3 {
		t.Fatalf("%d records; the write was applied, so 3", got)
	}
}

// TestFenceUnsettled: when the fence cannot be moved either (the server
// is unreachable), the store refuses to write and to load until it can,
// and a write that lands before it could is part of what the next load
// sees, never after.
func TestFenceUnsettled(t *testing.T) {
	f := &faults{}
	cli := f.client(t)
	prefix := uniquePrefix(t)
	reg := prometheus.NewRegistry()
	s := openOn(t, cli, etcdstore.Prefix(prefix), etcdstore.FenceTimeout(200*time.Millisecond), etcdstore.Registerer(reg))
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})

	f.setThen(modeHold, modeDown)
	err := s.Persist(testenv.Context(t), offsets("g", 2))
	if !errors.Is(err, etcdstore.ErrUnsettled) {
		t.Fatalf("Persist while the server is unreachable: %v, want ErrUnsettled", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Load(short); !errors.Is(err, etcdstore.ErrUnsettled) {
		t.Fatalf("Load while unsettled: %v, want ErrUnsettled", err)
	}
	if err := s.Persist(short, offsets("g", 1)); !errors.Is(err, etcdstore.ErrUnsettled) {
		t.Fatalf("Persist while unsettled: %v, want ErrUnsettled", err)
	}
	for op, want := range map[string]float64{"persist": 2, "load": 1, "load_group": 0} {
		if got := counterValue(t, reg, "tenure_store_errors_total", op); got != want {
			t.Errorf("tenure_store_errors_total{op=%q} = %v, want %v", op, got, want)
		}
	}
	if got := counterValue(t, reg, "tenure_store_errors_total", "fence"); got < 2 {
		t.Errorf("tenure_store_errors_total{op=\"fence\"} = %v, want the failed attempts", got)
	}
	if got := histogramCount(t, reg, "tenure_store_write_seconds"); got != 2 {
		t.Errorf("%d write transactions timed, want 2 (the held one included)", got)
	}

	// The network heals, and delivers the held write before the store
	// tries again: it lands (nothing had moved the fence), and the next
	// load sees it. Once that load settled, nothing more can land.
	f.set(modeNone)
	held := f.held
	for _, resp := range f.replay(t) {
		if !resp.Succeeded {
			t.Fatal("the held write failed though the fence had not moved")
		}
	}
	if got := len(load(t, s)); got != 3 {
		t.Fatalf("%d records after the late write landed, want 3", got)
	}
	f.held = held
	for _, resp := range f.replay(t) {
		if resp.Succeeded {
			t.Fatal("a second delivery of the late write was applied after the load settled")
		}
	}
	persist(t, s, offsets("h", 1)...)
}

// TestFenceContextDeadline: Persist's own deadline passing mid-write is the
// common unknown outcome. The fence moves on a detached context, so when
// Persist returns, the write either happened or never will: the store
// shows all of it or none, and nothing changes afterwards.
func TestFenceContextDeadline(t *testing.T) {
	s, cli, prefix := open(t)
	fence := fenceRevision(t, cli, prefix)
	// stored is the offset every partition holds: one transaction writes
	// all 64.
	stored := int64(-1)
	failed, applied := 0, 0
	for i := range 24 {
		recs := offsets("g", 64)
		for _, r := range recs {
			r.(*coordinator.OffsetRecord).Offset = int64(i)
		}
		timeout := []time.Duration{50 * time.Microsecond, 300 * time.Microsecond, time.Millisecond, 3 * time.Millisecond}[i%4]
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := s.Persist(ctx, recs)
		cancel()
		got := load(t, s)
		now := int64(-1)
		for j, r := range got {
			o := r.(*coordinator.OffsetRecord).Offset
			if j > 0 && o != now {
				t.Fatalf("a transaction half applied: offsets %d and %d", now, o)
			}
			now = o
		}
		switch {
		case err == nil && now != int64(i):
			t.Fatalf("Persist %d succeeded, the store holds %d", i, now)
		case err != nil && now != int64(i) && now != stored:
			t.Fatalf("Persist %d failed, the store holds %d, was %d", i, now, stored)
		case err != nil:
			failed++
			if now == int64(i) {
				applied++
			}
			if f := fenceRevision(t, cli, prefix); f <= fence {
				t.Fatalf("Persist failed (%v) but the fence did not move", err)
			} else {
				fence = f
			}
		}
		stored = now
	}
	time.Sleep(100 * time.Millisecond)
	if got := load(t, s); len(got) > 0 && got[0].(*coordinator.OffsetRecord).Offset != stored {
		t.Fatalf("a write landed after the fence: %d, was %d", got[0].(*coordinator.OffsetRecord).Offset, stored)
	}
	t.Logf("%d of 24 writes ran out of time (%d of them applied all the same); each moved the fence", failed, applied)
}

// TestFenceConcurrentWrites: Persist calls of distinct keys run at once,
// and the fence keeps its promise among them: while one write's request is
// stuck in the network, the others go on (those that compared the fence
// before it moved write again at its new revision), every call that
// returned nil is durable, and the stuck request, arriving late, writes
// nothing.
func TestFenceConcurrentWrites(t *testing.T) {
	f := &faults{}
	cli := f.client(t)
	prefix := uniquePrefix(t)
	s := openOn(t, cli, etcdstore.Prefix(prefix))
	fence := fenceRevision(t, cli, prefix)
	f.set(modeHold) // the next Txn, whichever call sends it
	const writers, each = 8, 5
	errs := make([][]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := &coordinator.OffsetRecord{Group: "g", Topic: "t", Partition: int32(w*each + i), Offset: 1, Token: 1, MemberID: "m"}
				errs[w] = append(errs[w], s.Persist(testenv.Context(t), []coordinator.Record{rec}))
			}
		}()
	}
	wg.Wait()
	var failed []int32
	for w := range writers {
		for i, err := range errs[w] {
			if err != nil {
				t.Logf("write %d of writer %d: %v", i, w, err)
				failed = append(failed, int32(w*each+i))
			}
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%d writes failed (%v), want the stuck one", len(failed), failed)
	}
	if got := fenceRevision(t, cli, prefix); got <= fence {
		t.Fatalf("the fence did not move: %d, was %d", got, fence)
	}
	for _, resp := range f.replay(t) {
		if resp.Succeeded {
			t.Fatal("a write that arrived after the fence moved was applied")
		}
	}
	got := map[int32]bool{}
	for _, r := range load(t, s) {
		if o, ok := r.(*coordinator.OffsetRecord); ok {
			got[o.Partition] = true
		}
	}
	for p := range int32(writers * each) {
		if want := p != failed[0]; got[p] != want {
			t.Errorf("partition %d stored: %v, want %v", p, got[p], want)
		}
	}
}
