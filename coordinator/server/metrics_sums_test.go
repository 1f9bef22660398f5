package server

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestScrapeDuringJoins: scrapes while a fleet's groups are created stop
// neither the joins nor the scrapes. The sums over the groups were
// GaugeFuncs, read on the gatherer's goroutine under each group's lock,
// while observe, under a group's lock, waits for the per-group vectors
// that the same gather is collecting: once a vector held more series than
// the gatherer's channel and a new group's series was being added, the
// node stopped for good (groupSums).
func TestScrapeDuringJoins(t *testing.T) {
	ts := startServer(t, nil)
	dial(t, ts.addr).roundTrip(metadataRequest(12, "jobs"))
	// 3,200 groups: the per-group vectors hold more series than the
	// gatherer's channel (1,000), so their Collect waits on it.
	const conns, perConn, window = 8, 400, 32
	stop := make(chan struct{})
	gathered := make(chan error, 1)
	var scrapes atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				gathered <- nil
				return
			default:
			}
			if _, err := ts.reg.Gather(); err != nil {
				gathered <- err
				return
			}
			scrapes.Add(1)
		}
	}()
	joined := make(chan error, conns)
	for i := range conns {
		c := dial(t, ts.addr)
		go func() { joined <- joinGroups(c, fmt.Sprintf("g%d-", i), perConn, window) }()
	}
	deadline := time.After(time.Minute)
	for range conns {
		select {
		case err := <-joined:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("the joins of %d groups stopped with %d scrapes done: a scrape and the groups wait for each other", conns*perConn, scrapes.Load())
		}
	}
	close(stop)
	select {
	case err := <-gathered:
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("a scrape did not return within a minute of the joins, %d done before", scrapes.Load())
	}
	if scrapes.Load() == 0 {
		t.Fatal("no scrape ran during the joins")
	}
	// The sums are still exported, one series each.
	for _, name := range []string{"tenure_unowned_partitions", "tenure_takeover_awaited_members"} {
		if ts.find(t, name) == nil {
			t.Errorf("no %s", name)
		}
	}
}

// joinGroups joins one member to each of n new groups named prefix<k>, up
// to window joins unanswered at a time, and returns the first error.
func joinGroups(c *rawClient, prefix string, n, window int) error {
	for k := 0; k < n; k += window {
		m := min(window, n-k)
		for j := range m {
			c.send(cgHeartbeat(fmt.Sprintf("%s%d", prefix, k+j), "member-a-000000000000000", 0))
		}
		for range m {
			_, resp, err := c.tryRecv(20 * time.Second)
			if err != nil {
				return fmt.Errorf("a join of the groups %s%d to %s%d went unanswered (the node stopped?): %w", prefix, k, prefix, k+m-1, err)
			}
			if code := resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode; code != 0 {
				return fmt.Errorf("join: error %d", code)
			}
		}
	}
	return nil
}
