package server

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

const memMembers = 10000

// BenchmarkMemory10000 measures what a 10,000-member group costs an
// in-process tenure server: the live heap after a GC once the members
// have joined and settled and every client connection is closed, minus
// the live heap of the same server before (so the store, the topic and
// the group's own records are counted, connections are not). Reported:
//
//	B/member    heap per member (target: under 2 KiB)
//	heap-MiB    the whole difference
//
// Classic members join with pipelined JoinGroup/SyncGroup requests (100
// per connection) and heartbeat once; KIP-848 members join at epoch 0 and
// heartbeat until their assignments settle.
func BenchmarkMemory10000(b *testing.B) {
	for _, proto := range []benchProtocol{benchClassic, benchConsumer} {
		b.Run(proto.String(), func(b *testing.B) {
			var total int64
			for range b.N {
				total += measureGroupHeap(b, proto)
			}
			perMember := float64(total) / float64(b.N) / memMembers
			b.ReportMetric(perMember, "B/member")
			b.ReportMetric(perMember*memMembers/(1<<20), "heap-MiB")
		})
	}
}

// liveHeap returns the live heap after a full collection.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func measureGroupHeap(b *testing.B, proto benchProtocol) int64 {
	b.Helper()
	ts := startServerLogger(b, zap.NewNop(), func(c *Config) {
		c.Core.InitialRebalanceDelay = time.Second
		c.Core.ConsumerSessionTimeout = 10 * time.Minute
		c.Core.ConsumerHeartbeatInterval = time.Minute
		c.PerGroupMetrics = false
	})
	defer ts.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The topic, and the server's first allocations, before the baseline.
	clients := newBenchClients(b, ts.addr, 4)
	createBenchTopic(b, clients[0])
	for _, cl := range clients {
		cl.Close()
	}
	eventually(b, 10*time.Second, "client connections to close", func() bool { return ts.metric(b, "tenure_connections") == 0 })
	before := liveHeap()

	start := time.Now()
	switch proto {
	case benchClassic:
		if err := joinClassicPipelined(ts.addr, memMembers); err != nil {
			b.Fatalf("joining %d classic members: %v", memMembers, err)
		}
	case benchConsumer:
		clients := newBenchClients(b, ts.addr, 4)
		if _, err := setupConsumer(ctx, clients, benchGroup, benchTopic, memMembers); err != nil {
			b.Fatalf("joining %d KIP-848 members: %v", memMembers, err)
		}
		for _, cl := range clients {
			cl.Close()
		}
	}
	joined := time.Since(start)
	eventually(b, 10*time.Second, "client connections to close", func() bool { return ts.metric(b, "tenure_connections") == 0 })
	e := ts.term(b).groups.lookup(benchGroup)
	e.mu.Lock()
	st := e.g.Stats()
	e.mu.Unlock()
	if st.Members != memMembers || st.Unowned != 0 {
		b.Fatalf("group has %d members and %d unowned partitions, want %d and 0", st.Members, st.Unowned, memMembers)
	}
	delta := liveHeap() - before
	b.Logf("%s: %d members joined in %v; heap +%.1f MiB, %.0f B/member",
		proto, memMembers, joined.Round(time.Millisecond), float64(delta)/(1<<20), float64(delta)/memMembers)
	return delta
}

// joinClassicPipelined joins n classic members over n/100 connections,
// 100 requests in flight on each (below the server's MaxInFlight): every
// member sends JoinGroup, rejoins with the member ID it was given, the
// leader syncs a round-robin plan, every other member syncs, and every
// member heartbeats once. Any error fails the whole.
func joinClassicPipelined(addr string, n int) error {
	const perConn = 100
	conns := make([]*benchConn, (n+perConn-1)/perConn)
	for i := range conns {
		c, err := dialBench(addr)
		if err != nil {
			return err
		}
		defer c.close()
		conns[i] = c
	}
	ids := make([]string, n)
	// each sends one request per member of each connection, built by
	// mk, and hands every response to check.
	each := func(mk func(i int) kmsg.Request, check func(i int, r kmsg.Response) error) error {
		errs := make(chan error, len(conns))
		for ci, c := range conns {
			go func() {
				lo, hi := ci*perConn, min(n, (ci+1)*perConn)
				reqs := make([]kmsg.Request, 0, hi-lo)
				for i := lo; i < hi; i++ {
					reqs = append(reqs, mk(i))
				}
				resps, err := c.pipeline(reqs)
				for k := 0; err == nil && k < len(resps); k++ {
					err = check(lo+k, resps[k])
				}
				errs <- err
			}()
		}
		var first error
		for range conns {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	join := func(i int) kmsg.Request {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 9
		req.Group, req.MemberID = benchGroup, ids[i]
		req.SessionTimeoutMillis = int32((10 * time.Minute) / time.Millisecond)
		req.RebalanceTimeoutMillis = int32(time.Minute / time.Millisecond)
		req.ProtocolType = "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{benchTopic}
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		return req
	}
	if err := each(join, func(i int, r kmsg.Response) error {
		jr := r.(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != kerr.MemberIDRequired.Code {
			return fmt.Errorf("first JoinGroup: %v", kerr.ErrorForCode(jr.ErrorCode))
		}
		ids[i] = jr.MemberID
		return nil
	}); err != nil {
		return err
	}
	var gen int32
	var leaderMembers []kmsg.JoinGroupResponseMember
	leader := -1
	if err := each(join, func(i int, r kmsg.Response) error {
		jr := r.(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != 0 {
			return fmt.Errorf("JoinGroup: %v", kerr.ErrorForCode(jr.ErrorCode))
		}
		gen = jr.Generation
		if jr.LeaderID == ids[i] {
			leader, leaderMembers = i, jr.Members
		}
		return nil
	}); err != nil {
		return err
	}
	if leader < 0 || len(leaderMembers) != n {
		return fmt.Errorf("leader %d was told of %d members, want %d", leader, len(leaderMembers), n)
	}
	plan := roundRobinPlan(leaderMembers)
	leaderMembers = nil
	if err := each(func(i int) kmsg.Request {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = 5
		req.Group, req.Generation, req.MemberID = benchGroup, gen, ids[i]
		req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		if i == leader {
			req.GroupAssignment = plan
		}
		return req
	}, func(i int, r kmsg.Response) error {
		if code := r.(*kmsg.SyncGroupResponse).ErrorCode; code != 0 {
			return fmt.Errorf("SyncGroup: %v", kerr.ErrorForCode(code))
		}
		return nil
	}); err != nil {
		return err
	}
	return each(func(i int) kmsg.Request {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 4
		req.Group, req.Generation, req.MemberID = benchGroup, gen, ids[i]
		return req
	}, func(i int, r kmsg.Response) error {
		if code := r.(*kmsg.HeartbeatResponse).ErrorCode; code != 0 {
			return fmt.Errorf("Heartbeat: %v", kerr.ErrorForCode(code))
		}
		return nil
	})
}
