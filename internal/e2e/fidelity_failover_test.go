package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// runFailover is the fail-over case for real: an HA set of three `tenure
// serve` processes on a three-member etcd (election TTL 1 s, the
// fidelity timing, --takeover-grace 4 s) and the member library in the
// test process, seeded with every node. The leading node is killed with
// SIGKILL, never to return, and in the same instant m1's connections
// close, as if its process died with the node (they shared a host whose
// processes were killed, or an operator's kill took both). The successor
// restores m1 from the store and, never having had its connection, waits
// out its takeover grace; it returns the time from the kill until a
// member other than m1 runs each of m1's partitions, and the epoch bumps.
func runFailover(t *testing.T) (time.Duration, int64) {
	h := startHASetWith(t, haOpts{args: []string{
		"--consumer-session-timeout", fidSession.String(), "--consumer-heartbeat-interval", fidInterval.String(),
		"--conn-loss-grace", fidGrace.String(), "--takeover-grace", fidTakeoverGrace.String(), "--log-level", "warn", "--http", "",
	}})
	createTopicN(t, h.addrs()[0], fidTopic, fidParts)
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	g := startFidMembers(t, h.addrs, log)
	defer g.close(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := h.leader(ctx)
	before := g.epoch(t)
	victims := g.r.of("m1")
	killed := time.Now()
	if err := h.nodes[l].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.kills[0].kill()
	waitUntil(t, 4*fidSession+2*fidTakeoverGrace, func() bool { return g.r.takenOver(victims, "m1") }, "m1's partitions to be taken over")
	reassign := time.Since(killed)
	time.Sleep(2 * fidInterval)
	return reassign, g.epoch(t) - before
}
