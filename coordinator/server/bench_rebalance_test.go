package server

import (
	"context"
	"testing"
	"time"
)

// rebalanceHeartbeat is the KIP-848 heartbeat interval of the rebalance
// benchmarks: members learn of a new assignment only when they
// heartbeat, so it bounds how fast partitions move.
const rebalanceHeartbeat = 500 * time.Millisecond

// BenchmarkRebalance848 measures, for tenure and kfake (both in-process,
// KIP-848 heartbeat interval 500 ms), with eight stock kgo members
// (kgo.ServerSideBalancer) on a 64-partition topic:
//
//	<server>-stable-ms   from creating the eight clients, cold, to the
//	                     last OnPartitionsAssigned/Revoked that leaves
//	                     every partition owned exactly once, evenly
//	                     (confirmed by ConsumerGroupDescribe)
//	<server>-leave-ms    from the start of one member's Close (a
//	                     graceful leave) to the last OnPartitionsAssigned
//	                     that gives its partitions to the others
//
// Members learn of an assignment on their next heartbeat, so leave-ms is
// bounded by one heartbeat interval plus processing: the target is
// 500 + 10 ms. leave-ms/hb is leave-ms over the interval.
func BenchmarkRebalance848(b *testing.B) {
	backends := []struct {
		name  string
		start func(testing.TB, time.Duration, time.Duration) *interopBackend
	}{
		{"tenure", startTenureWith},
		{"kfake", startKfakeWith},
	}
	var stable, leave [2]time.Duration
	for range b.N {
		for i, be := range backends {
			s, l := measureRebalance(b, be.start(b, rebalanceHeartbeat, 10*time.Second))
			stable[i] += s
			leave[i] += l
		}
	}
	for i, be := range backends {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
		b.ReportMetric(ms(stable[i]), be.name+"-stable-ms")
		b.ReportMetric(ms(leave[i]), be.name+"-leave-ms")
		b.ReportMetric(ms(leave[i])/float64(rebalanceHeartbeat.Milliseconds()), be.name+"-leave-ms/hb")
	}
}

func measureRebalance(b *testing.B, be *interopBackend) (stable, leave time.Duration) {
	b.Helper()
	g := newInteropGroup(b, be, interop848, interopMembers)
	live := make([]int, interopMembers)
	start := time.Now()
	for i := range live {
		live[i] = i
		g.join(i)
	}
	stable = g.settledAt(live).Sub(start)

	const leaver = 0
	live = live[1:]
	start = time.Now()
	g.leave(leaver)
	leave = g.settledAt(live).Sub(start)
	b.Logf("%s: %d members stable after %v; a leave reassigned after %v", be.name, interopMembers, stable, leave)
	return stable, leave
}

// settledAt waits until the live members own every partition exactly
// once, evenly, as the server's description confirms, and returns the
// time of the callback that made it so. The members' view is polled
// every millisecond; the server's only once the members agree.
func (g *interopGroup) settledAt(live []int) time.Time {
	t := g.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), interopSettle)
	defer cancel()
	var why string
	for ctx.Err() == nil {
		if why = g.own.checkExclusive(live); why != "" {
			time.Sleep(time.Millisecond)
			continue
		}
		at := g.own.lastChange()
		if why = g.serverView(ctx, live); why == "" && g.own.lastChange().Equal(at) {
			return at
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s %s: group not stable with members %v after %v: %s", g.b.name, g.mode, live, interopSettle, why)
	return time.Time{}
}
