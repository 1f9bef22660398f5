package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

const mod = "github.com/tenure-dev/tenure/"

// TestConnLossProcesses runs `tenure serve` and three stock kgo consumer
// processes of one KIP-848 group, then at the same instant pauses one
// (SIGSTOP: its connections stay open) and kills another (SIGKILL: its
// kernel closes them). Judged by the survivor's own callbacks:
//
//   - the survivor is given partitions of the killed consumer long before
//     any session could expire: its connection closed, so it was expelled
//     a connection-loss grace later (the rest of them go to the paused
//     consumer's target, and wait for it);
//   - the survivor is given none of the paused consumer's partitions
//     before its session timeout (less the one heartbeat interval by which
//     its last heartbeat may precede the pause): a pause is not a crash.
//
// The bounds leave the machine seconds of slack either way.
func TestConnLossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes for about 15 s")
	}
	const (
		session   = 12 * time.Second
		heartbeat = 500 * time.Millisecond
		grace     = time.Second
		n         = 3 // partitions per consumer
	)
	bins := proctest.Build(t, mod+"cmd/tenure", mod+"internal/kgoconsumer")
	srv := proctest.Start(t, "tenure", bins[0], "serve", "--listen", "{addr}", "--store", "memory", "--http", "",
		"--log-level", "info", "--consumer-session-timeout", session.String(),
		"--consumer-heartbeat-interval", heartbeat.String(), "--conn-loss-grace", grace.String())
	createTopicN(t, srv.Addr, "jobs", 3*n)
	o := newOwners()
	args := []string{"-brokers", srv.Addr, "-group", "g", "-topic", "jobs", "-protocol", "consumer"}
	survivor := startKgo(t, bins[1], o, "survivor", args...)
	paused := startKgo(t, bins[1], o, "paused", args...)
	killed := startKgo(t, bins[1], o, "killed", args...)
	procs := []*kgoProc{survivor, paused, killed}
	wait(t, o.when(split(n, "survivor", "paused", "killed")), time.Minute, "the group to settle", o, procs...)
	pausedHeld, killedHeld := o.holds("paused"), o.holds("killed")
	killedBack := o.when(holdsAny("survivor", killedHeld))
	pausedBack := o.when(holdsAny("survivor", pausedHeld))

	start := time.Now()
	paused.signal(syscall.SIGSTOP)
	killed.signal(syscall.SIGKILL)
	defer paused.signal(syscall.SIGCONT)

	tKilled := wait(t, killedBack, 2*session, "a partition of the killed consumer to be owned again", o, procs...).Sub(start)
	tPaused := wait(t, pausedBack, 3*session, "a partition of the paused consumer to be owned again", o, procs...).Sub(start)
	t.Logf("killed: partitions owned again after %v (grace %v); paused: after %v (session %v)", tKilled, grace, tPaused, session)
	if tKilled >= session-heartbeat {
		t.Errorf("the killed consumer's partitions took %v to start moving: a session expiry, not the connection loss (grace %v)", tKilled, grace)
	}
	if tPaused < session-heartbeat {
		t.Errorf("the paused consumer's partitions moved after %v, before its session (%v) could expire", tPaused, session)
	}
	if t.Failed() {
		t.Logf("server output:\n%s", srv.Output())
	}
}
