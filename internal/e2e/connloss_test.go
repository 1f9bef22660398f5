package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

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
	t.Parallel()
	const (
		session   = 12 * time.Second
		heartbeat = 500 * time.Millisecond
		grace     = time.Second
		n         = 3 // partitions per consumer
	)
	bins := build(t, mod+"cmd/tenure", mod+"internal/kgoconsumer")
	srv := proctest.StartServe(t, "tenure", bins[0], "serve", "--listen", "{addr}", "--store", "memory", "--http", "",
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

// TestConnLossProxyReset puts a proxy between two stock kgo consumer
// processes and `tenure serve` (advertised at the proxy) and, once the
// group is settled, closes every connection through it at once, as a
// proxy or load balancer that drops its connections does. The consumers
// are alive, so they are heard from again on new connections within the
// grace (the default, 3 s): nobody is expelled, and neither consumer loses
// or gives up a partition. The server must have seen the members' latest
// connections close, or the test proves nothing.
func TestConnLossProxyReset(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes for about 20 s")
	}
	t.Parallel()
	bins := build(t, mod+"cmd/tenure", mod+"internal/kgoconsumer")
	for _, proto := range []string{"consumer", "classic"} {
		t.Run("protocol="+proto, func(t *testing.T) {
			proxies := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
			listen, err := proctest.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			proxy := toxiproxy.NewProxy(proxies, "tenure", "127.0.0.1:0", listen)
			if err := proxy.Start(); err != nil {
				t.Fatal(err)
			}
			defer proxy.Stop()
			srv, err := proctest.StartOn("tenure", listen, bins[0], "serve", "--listen", "{addr}", "--advertise", proxy.Listen,
				"--store", "memory", "--http", "", "--log-level", "debug", "--conn-loss-grace", "3s")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			createTopicN(t, proxy.Listen, "jobs", 8)
			o := newOwners()
			args := []string{"-brokers", proxy.Listen, "-group", "g", "-topic", "jobs", "-protocol", proto}
			a := startKgo(t, bins[1], o, "a", args...)
			b := startKgo(t, bins[1], o, "b", args...)
			wait(t, o.when(split(4, "a", "b")), time.Minute, "the group to settle", o, a, b)
			// Every member heartbeats on its settled connection; the
			// reset then falls between two heartbeats (settling ends on
			// one), not on one in flight, which kgo would retry at once.
			time.Sleep(4500 * time.Millisecond)
			settled := len(a.output()) + len(b.output())
			proxy.Stop() // closes every connection through it
			if err := proxy.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Second)
			out := srv.Output()
			if !strings.Contains(out, "connection of members closed") {
				t.Fatalf("the server never saw a member's latest connection close:\n%s", out)
			}
			if strings.Contains(out, `"reason": "connection-closed"`) {
				t.Errorf("a live member was expelled for its closed connection")
			}
			if after := len(a.output()) + len(b.output()); after != settled {
				t.Errorf("the consumers' callbacks fired after the reset:\n%s\n%s", a.output(), b.output())
			}
			if t.Failed() {
				t.Logf("server output:\n%s", out)
			}
		})
	}
}
