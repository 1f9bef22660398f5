package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// TestSteadyHeartbeatsWriteNothing checks, on the durable default (the
// embedded etcd), that the heartbeats of a settled KIP-848 group write
// nothing: etcd's revision and the writer's batches stay where they were
// while every member heartbeats several times. A heartbeat that wrote
// would cost an fsync each, and the durable default would no longer cost
// what the memory store does (BenchmarkHeartbeat1000, cpu-etcd/memory).
func TestSteadyHeartbeatsWriteNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emb, err := embedetcd.Start(ctx, t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	st, err := etcdstore.New(ctx, emb.Client(), emb.StoreOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ts := startServer(t, func(c *Config) {
		c.Store = st
		c.Core.ConsumerSessionTimeout = benchSession
	})
	var clients []*kgo.Client
	for range 4 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		clients = append(clients, cl)
	}
	const group, topic, n = "steady", "steady-topic", 48
	if created, err := kadm.NewClient(clients[0]).CreateTopics(ctx, 64, 1, nil, topic); err != nil || created[topic].Err != nil {
		t.Fatalf("CreateTopics: %v %v", err, created[topic].Err)
	}
	members, err := setupConsumer(ctx, clients, group, topic, n)
	if err != nil {
		t.Fatalf("setting up %d members: %v", n, err)
	}
	revision := func() int64 {
		t.Helper()
		resp, err := emb.Client().Get(ctx, "steady-probe")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	rev0, batches0 := revision(), ts.histogram(t, "tenure_store_batch_records").count
	for round := range 5 {
		err := forEachParallel(ctx, n, n, func(i int) error {
			m := members[i]
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch = group, m.id, m.gen
			resp, err := req.RequestWith(ctx, clients[i%len(clients)])
			if err != nil {
				return err
			}
			if resp.ErrorCode != 0 || resp.MemberEpoch != m.gen || resp.Assignment != nil {
				t.Errorf("round %d, member %d: error %d, epoch %d (had %d), assignment %v: not a steady heartbeat",
					round, i, resp.ErrorCode, resp.MemberEpoch, m.gen, resp.Assignment)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rev, batches := revision(), ts.histogram(t, "tenure_store_batch_records").count; rev != rev0 || batches != batches0 {
		t.Errorf("%d members' steady heartbeats wrote: etcd revision %d to %d, writer batches %.0f to %.0f", n, rev0, rev, batches0, batches)
	}
}
