package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestBucket: a bucket passes a second's worth at once, then paces at its
// rate, throttling each request for the debt it leaves, and refills with
// time.
func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBucket(10)
	for i := range 10 {
		if d := b.take(t0); d != 0 {
			t.Fatalf("request %d of the burst throttled %v", i, d)
		}
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		if d := b.take(t0); d != want {
			t.Fatalf("request %d over the burst throttled %v, want %v", i, d, want)
		}
	}
	// A client that waited its throttle (300ms) is even again.
	if d := b.take(t0.Add(300 * time.Millisecond)); d != 100*time.Millisecond {
		t.Fatalf("after waiting the throttle: %v, want the next request's 100ms", d)
	}
	// A second idle refills the burst, no more.
	later := t0.Add(10 * time.Second)
	for i := range 10 {
		if d := b.take(later); d != 0 {
			t.Fatalf("request %d after a rest throttled %v", i, d)
		}
	}
	if d := b.take(later); d == 0 {
		t.Fatal("a rest filled the bucket beyond one second's worth")
	}
	// The debt, and so the throttle, is capped.
	for range 1000 {
		b.take(later)
	}
	if d := b.take(later); d != maxThrottle {
		t.Fatalf("throttle after a flood %v, want the cap %v", d, maxThrottle)
	}
}

// apiVersions3 is an ApiVersions request of a version that carries a
// throttle time.
func apiVersions3() kmsg.Request {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	return req
}

// TestConnectionQuota: a connection over its quota gets throttle times in
// its responses, and is paced: a pipelined burst of twice the quota takes
// the second half's time, however fast it was sent.
func TestConnectionQuota(t *testing.T) {
	// A low rate makes a token's time (100 ms) long against the reader's
	// lateness in waking from each throttle on a loaded machine, which
	// repays debt and lets a request through unthrottled; the burst's
	// and the pacing's durations, a second each, do not depend on it.
	const rate = 10
	ts := startServer(t, func(c *Config) { c.QuotaConnectionRequestRate = rate })
	c := dial(t, ts.addr)
	var frames []byte
	id := "test"
	for i := range 2 * rate {
		req := apiVersions3()
		c.sent[int32(i)] = req
		frames = appendRequest(frames, int32(i), &id, req)
	}
	start := time.Now()
	c.write(frames)
	// A server stalled for a token's time (100 ms here) lets
	// a request through unthrottled; the pacing below is what must hold.
	throttled, stalls := 0, 0
	for i := range 2 * rate {
		corr, resp := c.recv()
		if corr != int32(i) {
			t.Fatalf("response %d has correlation ID %d", i, corr)
		}
		if ms := resp.(*kmsg.ApiVersionsResponse).ThrottleMillis; ms > 0 {
			if i < rate {
				t.Fatalf("response %d of the burst throttled %dms", i, ms)
			}
			throttled++
			if ms > 1000/rate+1 {
				t.Fatalf("response %d throttled %dms; pacing at %d/s throttles each %dms", i, ms, rate, 1000/rate)
			}
		} else if throttled > 0 {
			stalls++
		}
	}
	elapsed := time.Since(start)
	// The burst passes; the other half is paced at the rate.
	if throttled < rate/2 || throttled > rate || stalls > rate/4 {
		t.Fatalf("%d of %d responses throttled (%d unthrottled after the first throttled one), want about %d",
			throttled, 2*rate, stalls, rate)
	}
	if min := (rate - 2) * time.Second / rate; elapsed < min {
		t.Fatalf("burst of %d answered in %v, faster than the quota allows (%v)", 2*rate, elapsed, min)
	}
	if n := ts.metric(t, "tenure_throttled_requests_total", "quota", "connection"); n != float64(throttled) {
		t.Fatalf("throttled requests counted %v, want %d", n, throttled)
	}
	// Another connection is not slowed by this one's quota.
	other := dial(t, ts.addr)
	if ms := other.roundTrip(apiVersions3()).(*kmsg.ApiVersionsResponse).ThrottleMillis; ms != 0 {
		t.Fatalf("a fresh connection throttled %dms", ms)
	}
}

// TestPrincipalQuota: a principal's connections share its quota, and
// another principal's is its own.
func TestPrincipalQuota(t *testing.T) {
	const rate = 20
	ts := startServer(t, func(c *Config) { c.QuotaRequestRate = rate })
	a1, a2 := dialAs(t, ts, "User:a"), dialAs(t, ts, "User:a")
	b := dialAs(t, ts, "User:b")
	// dialAs sent one request each (as the anonymous principal). Now a's
	// two connections take a's burst between them.
	// A stall of the test for a token's time (50 ms) lets a request
	// through unthrottled; sharing shows in the count.
	throttled := 0
	for range rate {
		for _, c := range []*rawClient{a1, a2} {
			if ms := c.roundTrip(apiVersions3()).(*kmsg.ApiVersionsResponse).ThrottleMillis; ms > 0 {
				throttled++
			}
		}
	}
	if throttled < rate/2 {
		t.Fatalf("%d of a's %d requests throttled: the connections do not share a's quota", throttled, 2*rate)
	}
	if ms := b.roundTrip(apiVersions3()).(*kmsg.ApiVersionsResponse).ThrottleMillis; ms != 0 {
		t.Fatalf("b throttled %dms for a's requests", ms)
	}
	if n := ts.metric(t, "tenure_throttled_requests_total", "quota", "principal"); n < float64(throttled) {
		t.Fatalf("throttled requests counted %v, want %d", n, throttled)
	}
	// The bucket goes with the principal's last connection.
	for _, c := range []*rawClient{a1, a2, b} {
		c.nc.Close()
	}
	eventually(t, 5*time.Second, "the principals' buckets to be dropped", func() bool {
		ts.quotas.mu.Lock()
		defer ts.quotas.mu.Unlock()
		return len(ts.quotas.byPrincipal) == 0
	})
}

// TestConnectionsPerIP: a connection beyond the per-IP limit is closed on
// accept, counted and logged; closing one makes room.
func TestConnectionsPerIP(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	ts := startServerLogger(t, zap.New(core), func(c *Config) { c.MaxConnectionsPerIP = 2 })
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	a.roundTrip(kmsg.NewPtrApiVersionsRequest())
	b.roundTrip(kmsg.NewPtrApiVersionsRequest())
	refused := dial(t, ts.addr)
	refused.send(kmsg.NewPtrApiVersionsRequest())
	refused.expectClosed(5 * time.Second)
	if n := ts.metric(t, "tenure_limit_rejections_total", "limit", "connections_per_ip"); n != 1 {
		t.Fatalf("per-IP rejections %v, want 1", n)
	}
	refusals := logs.FilterMessage("connection refused: per-IP connection limit reached").All()
	if len(refusals) != 1 {
		t.Fatalf("%d refusals logged, want 1", len(refusals))
	}
	if f := refusals[0].ContextMap(); f["ip"] != "127.0.0.1" || f["open"] != int64(2) || f["limit"] != int64(2) || f["remote"] == nil {
		t.Fatalf("refusal logged with %v", f)
	}
	a.roundTrip(kmsg.NewPtrApiVersionsRequest())
	b.nc.Close()
	eventually(t, 5*time.Second, "the closed connection to free its IP's room", func() bool {
		c := dial(t, ts.addr)
		c.send(kmsg.NewPtrApiVersionsRequest())
		_, _, err := c.tryRecv(time.Second)
		c.nc.Close()
		return err == nil
	})
}

// TestParkedBounds: a connection, or a group, holding its bound of parked
// requests gets COORDINATOR_LOAD_IN_PROGRESS for one more JoinGroup, and
// its held Fetches stop being held.
func TestParkedBounds(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MaxParkedPerConnection = 1
		c.MaxParkedPerGroup = 1
		c.Core.InitialRebalanceDelay = 300 * time.Millisecond
	})
	join := func(c *rawClient, group string) *kmsg.JoinGroupRequest {
		j := probeJoin().(*kmsg.JoinGroupRequest)
		j.Group = group
		first := c.roundTrip(j).(*kmsg.JoinGroupResponse)
		if first.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("first join of %s: %v", group, kerr.ErrorForCode(first.ErrorCode))
		}
		j.MemberID = first.MemberID
		return j
	}

	// Per connection: a second parked join on the same connection.
	c := dial(t, ts.addr)
	j1, j2 := join(c, "one"), join(c, "two")
	c.send(j1)
	c.send(j2)
	if _, resp := c.recv(); resp.(*kmsg.JoinGroupResponse).ErrorCode != 0 {
		t.Fatalf("the parked join: %v", kerr.ErrorForCode(resp.(*kmsg.JoinGroupResponse).ErrorCode))
	}
	if _, resp := c.recv(); resp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("a join beyond the connection's bound: %v", kerr.ErrorForCode(resp.(*kmsg.JoinGroupResponse).ErrorCode))
	}
	if n := ts.metric(t, "tenure_limit_rejections_total", "limit", "parked_connection"); n != 1 {
		t.Fatalf("parked_connection rejections %v, want 1", n)
	}

	// Per group: two connections' joins into one group.
	x, y := dial(t, ts.addr), dial(t, ts.addr)
	jx, jy := join(x, "three"), join(y, "three")
	x.send(jx)
	start := time.Now()
	eventually(t, time.Second, "the first join to park", func() bool {
		e := ts.term(t).groups.lookup("three")
		return e != nil && e.parked.Load() == 1
	})
	if resp := y.roundTrip(jy).(*kmsg.JoinGroupResponse); resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("a join beyond the group's bound: %v after %v", kerr.ErrorForCode(resp.ErrorCode), time.Since(start))
	}
	if _, resp := x.recv(); resp.(*kmsg.JoinGroupResponse).ErrorCode != 0 {
		t.Fatalf("the parked join: %v", kerr.ErrorForCode(resp.(*kmsg.JoinGroupResponse).ErrorCode))
	}
	eventually(t, time.Second, "the group's count to fall to 0", func() bool {
		return ts.term(t).groups.lookup("three").parked.Load() == 0
	})

	// Fetches: one held, the next answered without its wait.
	g := dial(t, ts.addr)
	g.roundTrip(metadataRequest(12, "jobs"))
	g.send(fetchRequest(12, 400*time.Millisecond, "jobs", 0))
	g.send(fetchRequest(12, 5*time.Second, "jobs", 0))
	start = time.Now()
	g.recv()
	g.recv()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the fetch beyond the bound was held: both answered after %v", d)
	}
	if n := ts.metric(t, "tenure_limit_rejections_total", "limit", "parked_connection"); n != 2 {
		t.Fatalf("parked_connection rejections %v, want 2", n)
	}
}
