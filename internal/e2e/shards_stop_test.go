package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestShardsGracefulStop stops a node of a sharded set with SIGTERM, as a
// rolling restart does, under stock kgo KIP-848 consumers with a short
// session: the node hands its shards to the others and answers
// NOT_COORDINATOR for a grace before it closes, so the consumers of its
// groups find the new owners and none loses its partitions (a consumer
// whose coordinator's port just closes redials it until its session
// expires). Then the node comes back and takes its share again, again
// with nobody's partitions lost.
func TestShardsGracefulStop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	t.Parallel()
	h := startHASetWith(t, haOpts{etcdMembers: 1, http: true, args: []string{"--shards", "6",
		"--consumer-session-timeout", "6s", "--consumer-heartbeat-interval", "1s", "--log-level", "warn"}})
	// The consumers poll until the test ends, and each request has a
	// deadline of its own (call): one deadline for every step ended the
	// consumers' polls and the last steps' requests once the steps took
	// longer than it, as on a loaded machine (85 s of 90 seen).
	ctx := t.Context()
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 10*time.Second) }
	createTopicOn(t, h.nodes[0].Addr, topic, partitions)
	var groups []string
	var consumers []*stockConsumer
	for g := range 6 {
		name := fmt.Sprintf("graceful-%d", g)
		groups = append(groups, name)
		consumers = append(consumers, startStock(ctx, t, h.addrs(), name, true))
	}
	for _, sc := range consumers {
		sc.waitSettled(t)
	}
	cctx, cancel := call()
	ids, err := h.nodeIDs(cctx)
	if err != nil {
		t.Fatal(err)
	}
	coords, err := coordinatorsAt(cctx, h.nodes[0].Addr, groups)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	// The node that coordinates the most groups.
	victim, most := 0, -1
	for i, id := range ids {
		n := 0
		for _, c := range coords {
			if c == id {
				n++
			}
		}
		if n > most {
			victim, most = i, n
		}
	}
	if most == 0 {
		t.Fatalf("no node coordinates a group: %v", coords)
	}
	stopped := time.Now()
	h.nodes[victim].Stop()
	t.Logf("node %d (%d of the groups) stopped in %v", ids[victim], most, time.Since(stopped).Round(time.Millisecond))
	others := slices.DeleteFunc(slices.Clone(h.addrs()), func(a string) bool { return a == h.nodes[victim].Addr })
	testenv.Eventually(t, 10*time.Second, "every group coordinated by a node still up", func() bool {
		cctx, cancel := call()
		defer cancel()
		c, err := coordinatorsAt(cctx, others[0], groups)
		if err != nil {
			return false
		}
		for _, id := range c {
			if id == ids[victim] {
				return false
			}
		}
		return true
	})
	// Longer than the session: a consumer that did not follow is expelled
	// by now.
	time.Sleep(8 * time.Second)
	for _, sc := range consumers {
		sc.checkKept(t)
	}

	h.start(victim)
	testenv.Eventually(t, 20*time.Second, "the restarted node to take its share", func() bool {
		cctx, cancel := call()
		defer cancel()
		n, err := h.shardsLed(cctx, victim)
		return err == nil && n == 2
	})
	time.Sleep(8 * time.Second)
	for _, sc := range consumers {
		sc.checkKept(t)
	}
}
