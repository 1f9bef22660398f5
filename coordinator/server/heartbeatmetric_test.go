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
	sent := time.Now()
	ca.send(cgHeartbeat("z-slow", "member-z-slow-000000000000000", 0))
	if _, _, err := ca.tryRecv(hold); err == nil {
		t.Fatal("the heartbeat was answered before the slow group's install ended")
	}
	open()
	_, resp := ca.recv()
	if r := resp.(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat to the group being installed: error code %d", r.ErrorCode)
	}
	// The install ended at open, at least hold after the send.
	checkHeartbeatObserved(t, a, api, before, sent, hold, "a takeover")
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
	sent := time.Now()
	c.send(cgHeartbeat("g", id, r.MemberEpoch))
	if _, _, err := c.tryRecv(hold); err == nil {
		t.Fatal("the commit or the heartbeat was answered before the commit was durable")
	}
	gs.release()
	for range 2 {
		if _, resp := c.recv(); responseCode(resp) != 0 {
			t.Fatalf("error %d once the write landed", responseCode(resp))
		}
	}
	checkHeartbeatObserved(t, ts, api, before, sent, hold, "a store write")
}

// checkHeartbeatObserved checks that ts's heartbeat histogram for api
// took one observation since before, of a heartbeat sent at sent and held
// at least hold by what: at least half the hold, for the reader read the
// frame some time after the send.
func checkHeartbeatObserved(t *testing.T, ts *testServer, api string, before histSum, sent time.Time, hold time.Duration, what string) {
	t.Helper()
	var got histSum
	eventually(t, 5*time.Second, "the heartbeat to be observed", func() bool {
		got = ts.histogram(t, "tenure_heartbeat_duration_seconds", "api", api)
		return got.count > before.count
	})
	if n := got.count - before.count; n != 1 {
		t.Fatalf("one heartbeat observed %v times", n)
	}
	if d := got.sum - before.sum; d < (hold / 2).Seconds() {
		t.Fatalf("heartbeat held %v by %s observed at %.6fs, want at least %v", time.Since(sent), what, d, hold/2)
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
