package server

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHeartbeatHistogramTimesTakeoverWait: a heartbeat held by its
// group's takeover is observed from its frame read to its response, the
// wait included, not only the reader's part before the wait; and the
// observation falls in a finite bucket.
func TestHeartbeatHistogramTimesTakeoverWait(t *testing.T) {
	const hold = 150 * time.Millisecond
	a, ca, open := gatedTakeover(t, time.Minute)
	api := kmsg.NameForKey(68)
	before := a.histogram(t, "tenure_heartbeat_duration_seconds", "api", api)
	ca.send(cgHeartbeat("z-slow", "member-z-slow-000000000000000", 0))
	read := awaitRead(t, a, 68)
	if _, _, err := ca.tryRecv(hold); err == nil {
		t.Fatal("the heartbeat was answered before the slow group's install ended")
	}
	open()
	_, resp := ca.recv()
	if r := resp.(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat to the group being installed: error code %d", r.ErrorCode)
	}
	// The install ended at open, at least hold after the read.
	checkHeartbeatObserved(t, a, api, before, read, hold, "a takeover")
	h := a.find(t, "tenure_heartbeat_duration_seconds", "api", api).GetHistogram()
	bs := h.GetBucket()
	if top := bs[len(bs)-1]; top.GetCumulativeCount() != h.GetSampleCount() {
		t.Fatalf("%d of %d heartbeats observed at or below the top bucket %vs: the rest only in +Inf",
			top.GetCumulativeCount(), h.GetSampleCount(), top.GetUpperBound())
	}
}

// TestHeartbeatHistogramTimesStoreWrite: a heartbeat whose answer waits
// for its group's write in flight (a commit's) is observed from its frame
// read to its response, the write included.
func TestHeartbeatHistogramTimesStoreWrite(t *testing.T) {
	const hold = 150 * time.Millisecond
	const id = "member-a-000000000000000"
	gs, ts, c, r := gatedMember(t, id)
	api := kmsg.NameForKey(68)
	before := ts.histogram(t, "tenure_heartbeat_duration_seconds", "api", api)

	gs.hold()
	commit := commitRequest("g", id, r.MemberEpoch, "jobs", 0, 42)
	commit.Version = 9
	c.send(commit)
	<-gs.entered
	c.send(cgHeartbeat("g", id, r.MemberEpoch))
	read := awaitRead(t, ts, 68)
	if _, _, err := c.tryRecv(hold); err == nil {
		t.Fatal("the commit or the heartbeat was answered before the commit was durable")
	}
	gs.release()
	for range 2 {
		if _, resp := c.recv(); responseCode(resp) != 0 {
			t.Fatalf("error %d once the write landed", responseCode(resp))
		}
	}
	checkHeartbeatObserved(t, ts, api, before, read, hold, "a store write")
}

// awaitRead waits until ts has read a request of key, which then waits
// for its answer, and returns a time after the read: the histogram times
// a request from its frame's read, which a loaded machine's reader may
// make long after the client's send.
func awaitRead(t *testing.T, ts *testServer, key int16) time.Time {
	t.Helper()
	eventually(t, 10*time.Second, "the server to read the request", func() bool {
		n := 0
		ts.eachConn(func(c *conn) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, sl := range c.q[c.head:] {
				if sl.key == key && sl.state == slotWaiting {
					n++
				}
			}
		})
		return n == 1
	})
	return time.Now()
}

// checkHeartbeatObserved checks that ts's heartbeat histogram for api
// took one observation since before, of a heartbeat read before read and
// held at least hold after it by what.
func checkHeartbeatObserved(t *testing.T, ts *testServer, api string, before histSum, read time.Time, hold time.Duration, what string) {
	t.Helper()
	var got histSum
	eventually(t, 5*time.Second, "the heartbeat to be observed", func() bool {
		got = ts.histogram(t, "tenure_heartbeat_duration_seconds", "api", api)
		return got.count > before.count
	})
	if n := got.count - before.count; n != 1 {
		t.Fatalf("one heartbeat observed %v times", n)
	}
	if d := got.sum - before.sum; d < hold.Seconds() {
		t.Fatalf("heartbeat held %v after its read by %s observed at %.6fs, want at least %v", time.Since(read), what, d, hold)
	}
}

// TestHeartbeatBuckets: the heartbeat histogram resolves a heartbeat
// that changes nothing (microseconds) and reaches the seconds a takeover
// wait or a slow store write takes, in a bounded number of series.
func TestHeartbeatBuckets(t *testing.T) {
	a := startServer(t, nil)
	c := dial(t, a.addr)
	c.roundTrip(cgHeartbeat("g", "member-g-0000000000000000000", 0))
	m := a.find(t, "tenure_heartbeat_duration_seconds", "api", kmsg.NameForKey(68))
	if m == nil {
		t.Fatal("no heartbeat histogram series after a heartbeat")
	}
	bs := m.GetHistogram().GetBucket()
	if n := len(bs); n < 16 || n > 20 {
		t.Fatalf("%d buckets, want 16 to 20", n)
	}
	low, high := bs[0].GetUpperBound(), bs[len(bs)-1].GetUpperBound()
	if low > 2e-6 || high < 10 || math.IsInf(high, 1) {
		t.Fatalf("buckets from %vs to %vs, want from at most 2µs to at least 10s", low, high)
	}
	for i := 1; i < len(bs); i++ {
		if r := bs[i].GetUpperBound() / bs[i-1].GetUpperBound(); r > 3 {
			t.Fatalf("buckets %vs and %vs are %.1f times apart, want at most 3", bs[i-1].GetUpperBound(), bs[i].GetUpperBound(), r)
		}
	}
}
