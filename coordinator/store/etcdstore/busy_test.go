package etcdstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// busyClient is a client of the test etcd whose next refuse Txn requests
// are answered as etcd answers them while its applied index trails its
// committed one ("etcdserver: too many requests"), without reaching it.
// refused counts them.
func busyClient(t *testing.T) (cli *clientv3.Client, refuse, refused *atomic.Int64) {
	t.Helper()
	refuse, refused = new(atomic.Int64), new(atomic.Int64)
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" && refuse.Add(-1) >= 0 {
			refused.Add(1)
			return rpctypes.ErrGRPCRequestTooManyRequests
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(intercept)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, refuse, refused
}

func busyRetries(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tenure_store_busy_retries_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no tenure_store_busy_retries_total")
	return 0
}

// TestPersistRetriesTooManyRequests: a write etcd refuses as too many
// requests (after a kill -9 and restart, while it applies its log) is
// sent again after a back-off, and lands; the refusals are counted, the
// spell is logged once as it starts and once as it ends, and the fence
// is untouched, so the next write goes straight through. Before, each
// refusal failed the write and was logged.
func TestPersistRetriesTooManyRequests(t *testing.T) {
	cli, refuse, refused := busyClient(t)
	reg := prometheus.NewRegistry()
	core, logs := observer.New(zap.InfoLevel)
	prefix := uniquePrefix(t)
	s := openOn(t, cli, etcdstore.Prefix(prefix), etcdstore.Registerer(reg), etcdstore.Logger(zap.New(core)))
	refuse.Store(5)
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 3})
	if got := refused.Load(); got != 5 {
		t.Fatalf("%d refusals, want 5", got)
	}
	if got := busyRetries(t, reg); got != 5 {
		t.Fatalf("tenure_store_busy_retries_total %v, want 5", got)
	}
	if n := logs.FilterMessageSnippet("too many requests").Len(); n != 1 {
		t.Fatalf("%d lines about the refusals, want 1: %v", n, logs.All())
	}
	if n := logs.FilterMessage("etcd store: etcd accepts writes again").Len(); n != 1 {
		t.Fatalf("%d lines about the end of the refusals, want 1: %v", n, logs.All())
	}
	if n := logs.FilterMessage("etcd store: persist failed").Len(); n != 0 {
		t.Fatalf("a write that landed was logged as failed: %v", logs.All())
	}
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 4})
	recs, err := openOn(t, etcd.Client(t), etcdstore.Prefix(prefix)).Load(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].(*coordinator.GroupRecord).Epoch != 4 {
		t.Fatalf("loaded %v, want group g at epoch 4", recs)
	}
}

// TestPersistTooManyRequestsBounded: a write etcd keeps refusing fails
// after BusyTimeout, as rejected (nothing written, no settling), and the
// store writes normally once etcd accepts again.
func TestPersistTooManyRequestsBounded(t *testing.T) {
	cli, refuse, refused := busyClient(t)
	prefix := uniquePrefix(t)
	s := openOn(t, cli, etcdstore.Prefix(prefix), etcdstore.BusyTimeout(300*time.Millisecond))
	refuse.Store(1 << 40)
	err := s.Persist(testenv.Context(t), []coordinator.Record{&coordinator.GroupRecord{Group: "g", Epoch: 1}})
	if !errors.Is(err, rpctypes.ErrTooManyRequests) {
		t.Fatalf("Persist: %v, want too many requests", err)
	}
	// Waits of 10-20, 20-40, 40-80 and 80-160 ms fit in 300 ms; the
	// next, 160-320, would not: 5 attempts, whatever the jitter.
	if n := refused.Load(); n != 5 {
		t.Fatalf("%d attempts within the bound, want 5", n)
	}
	refuse.Store(0)
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 2})
	recs, err := s.Load(testenv.Context(t))
	if err != nil || len(recs) != 1 || recs[0].(*coordinator.GroupRecord).Epoch != 2 {
		t.Fatalf("loaded %v %v, want group g at epoch 2", recs, err)
	}
}
