package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFleetLookupAsksAgainAfterStaleAnswer: a lookup answered "no
// coordinator yet" long after it was sent (decided when it arrived, held
// behind other lookups on the shared finder connection) asks the node
// again at once and takes the coordinator named then, rather than backing
// its group off; a prompt "none yet" still backs off.
func TestFleetLookupAsksAgainAfterStaleAnswer(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	none := func(delay time.Duration) {
		c.ControlKey(int16(kmsg.FindCoordinator), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			time.Sleep(delay)
			req := kr.(*kmsg.FindCoordinatorRequest)
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			for _, key := range req.CoordinatorKeys {
				rc := kmsg.NewFindCoordinatorResponseCoordinator()
				rc.Key, rc.NodeID, rc.Port, rc.ErrorCode = key, -1, -1, kerr.CoordinatorNotAvailable.Code
				resp.Coordinators = append(resp.Coordinators, rc)
			}
			return resp, nil, true
		})
	}
	f := newFleet(t, fleetConfig{addrs: c.ListenAddrs(), topic: "t", partitions: 1, groups: 1, prefix: "stale",
		members: func(int) int { return 1 }, perLane: 1, inFlight: 1, timeout: 5 * time.Second})
	f.ctx, f.cancel = context.WithCancel(context.Background())
	t.Cleanup(f.cancel)

	none(0)
	if node, ok := f.find("g"); ok {
		t.Fatalf("a prompt answer of none found node %d", node)
	}
	none(findStale + 100*time.Millisecond)
	if node, ok := f.find("g"); !ok || node != 0 {
		t.Fatalf("after a stale answer of none the lookup found node %d (%v), want the one the node names when asked again", node, ok)
	}
	if n := f.outages.findStale.Load(); n != 1 {
		t.Fatalf("%d stale answers asked again, want 1", n)
	}
}
