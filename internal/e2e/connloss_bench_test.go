package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// BenchmarkCrashReown times, with real processes, how long the partitions
// of a consumer that goes away take to be owned again by the consumer that
// stays, as the survivor's own callbacks (OnPartitionsAssigned) say: from
// the signal to the callback that completes the survivor's hold on every
// partition. Two stock kgo consumer processes (internal/kgoconsumer) share
// a group of 8 partitions on `tenure serve`:
//
//   - protocol=consumer: KIP-848 with tenure's default timing (session
//     20 s, heartbeat 1 s);
//   - protocol=classic: kgo's default timing (session 45 s, heartbeat 3 s,
//     cooperative-sticky);
//   - grace=0s is the coordinator before connection-aware expiry
//     (--conn-loss-grace 0), grace=3s its default;
//   - fault=kill is SIGKILL (the kernel closes the connections), fault=term
//     is SIGTERM (kgo's Close leaves the group).
//
// It reports s/reown (the mean) and goal-s, the bound for a kill
// with the grace on: grace + one heartbeat interval + 0.5 s. Run:
//
//	go test -run '^$' -bench BenchmarkCrashReown -benchtime 1x ./internal/e2e/
func BenchmarkCrashReown(b *testing.B) {
	bins := build(b, mod+"cmd/tenure", mod+"internal/kgoconsumer")
	for _, proto := range []struct {
		name      string
		heartbeat time.Duration // the members' interval
	}{{"consumer", time.Second}, {"classic", 3 * time.Second}} {
		for _, grace := range []time.Duration{0, 3 * time.Second} {
			for _, fault := range []string{"kill", "term"} {
				name := fmt.Sprintf("protocol=%s/grace=%v/fault=%s", proto.name, grace, fault)
				b.Run(name, func(b *testing.B) {
					srv := proctest.Start(b, "tenure", bins[0], "serve", "--listen", "{addr}", "--store", "memory",
						"--http", "", "--log-level", "warn", "--conn-loss-grace", grace.String())
					createTopicN(b, srv.Addr, "jobs", 8)
					var total time.Duration
					b.ResetTimer()
					for i := range b.N {
						total += reownOnce(b, bins[1], srv.Addr, fmt.Sprintf("g%d", i), proto.name, fault)
					}
					b.ReportMetric(total.Seconds()/float64(b.N), "s/reown")
					if grace > 0 && fault == "kill" {
						b.ReportMetric((grace + proto.heartbeat + 500*time.Millisecond).Seconds(), "goal-s")
					}
				})
			}
		}
	}
}

// reownOnce starts two consumers in group, waits until each holds 4 of
// the 8 partitions, takes one away with fault, and returns how long the
// other then took to hold all 8.
func reownOnce(b *testing.B, bin, addr, group, proto, fault string) time.Duration {
	b.StopTimer()
	o := newOwners()
	args := []string{"-brokers", addr, "-group", group, "-topic", "jobs", "-protocol", proto}
	survivor := startKgo(b, bin, o, "survivor", args...)
	victim := startKgo(b, bin, o, "victim", args...)
	wait(b, o.when(split(4, "survivor", "victim")), 2*time.Minute, "the group to settle", o, survivor, victim)
	// Let the settled group heartbeat once more, so the victim's latest
	// request is a heartbeat, as in a group at rest.
	time.Sleep(4 * time.Second)
	back := o.when(holdsAll("survivor", []int32{0, 1, 2, 3, 4, 5, 6, 7}))
	b.StartTimer()
	start := time.Now()
	switch fault {
	case "kill":
		victim.signal(syscall.SIGKILL)
	case "term":
		victim.signal(syscall.SIGTERM)
	}
	took := wait(b, back, 3*time.Minute, "the survivor to hold every partition", o, survivor, victim).Sub(start)
	b.StopTimer()
	b.Logf("%s: owned again after %v", fault, took.Round(time.Millisecond))
	survivor.signal(syscall.SIGKILL)
	victim.signal(syscall.SIGKILL)
	return took
}
