package e2e

import (
	"context"
	"flag"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	benchShards = flag.Int("e2e.shards", 48, "BenchmarkShards: --shards of the nodes (0 leaves the flag out: one leader serves every group)")
	benchGroups = flag.Int("e2e.groups", 10000, "BenchmarkShards: groups")
	benchSize   = flag.Int("e2e.members", 16, "BenchmarkShards: members per group")
	benchWindow = flag.Duration("e2e.window", 30*time.Second, "BenchmarkShards: length of the steady-state window")
	benchTTL    = flag.Duration("e2e.ttl", 5*time.Second, "BenchmarkShards: --election-ttl of the nodes (tenure's default)")
	benchLane   = flag.Int("e2e.perconn", 4000, "BenchmarkShards: members sharing one connection to each node")
	benchFlight = flag.Int("e2e.inflight", 256, "BenchmarkShards: most requests of the members sharing connections unanswered (an eighth of them joins)")
	benchArgs   = flag.String("e2e.args", "", "BenchmarkShards: more `tenure serve` flags, separated by spaces (e.g. \"--consumer-join-coalesce 100ms\")")
)

// benchHeartbeat and benchSession are the nodes' KIP-848 heartbeat
// interval and session timeout.
const (
	benchHeartbeat = 5 * time.Second
	benchSession   = 45 * time.Second
)

// BenchmarkShards runs 10,000 groups of 16 raw KIP-848 members (a topic of
// 64 partitions) on three `tenure serve --shards 48` nodes over one etcd
// process, all on loopback, with the load generator (fleet) in this
// process: the members share one connection to each node per 4,000 of
// them, with at most 256 of their requests in flight (32 of them joins),
// and a connection writes the heartbeats due within 50 ms in one batch.
// The nodes tell members to heartbeat every 5 s (session 45 s). It runs
// the scenario once, whatever b.N, and reports:
//
//	join-s          from the first join to every group settled (each
//	                member holds its target and has said so)
//	hb/s            heartbeats answered without error per second at steady
//	                state, summed over the nodes, over -e2e.window (30 s)
//	cpu-dev-%       the largest deviation of a node's share of the three
//	                nodes' CPU over the window from an even third (goal: 20)
//	etcd-writes/s   the etcd revision's growth per second over the window
//	                (goal: near zero: heartbeats that change nothing write
//	                nothing; lease renewals do not move the revision)
//	loadgen-cores   this process's CPU over the window, per second
//	failover-s      from a kill -9 of one node to the first heartbeat
//	                answered by the new owner for the last of that node's
//	                groups (about the election TTL, -e2e.ttl, and more)
//
// and fails if a group is unsettled or a member's epoch moves at steady
// state, if a member is expelled or its epoch goes backwards at any time,
// or if the kill moves a group the dead node did not coordinate. The -e2e
// flags change the shape; -e2e.shards=0 runs one leader, as tenure did
// before shards.
//
//	go test -run '^$' -bench BenchmarkShards -benchtime 1x ./internal/e2e/
func BenchmarkShards(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes under heavy load")
	}
	// The generator allocates for every answer: collect less often, so
	// that it leaves the cores to the nodes.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sc, join := startBenchFleet(b, ctx, "BenchmarkShards", *benchShards, "")
	h, f := sc.h, sc.f
	// The members that reported their assignment last are due again an
	// interval later: let that pass before measuring.
	time.Sleep(benchHeartbeat + time.Second)

	// Steady state.
	w0 := sc.sample(ctx)
	time.Sleep(*benchWindow)
	w1 := sc.sample(ctx)
	window := w1.at.Sub(w0.at)
	if moves := w1.epochMoves - w0.epochMoves; moves > 0 {
		b.Errorf("%d member epochs moved at steady state", moves)
	}
	if n, first := f.unsettled(); n > 0 {
		b.Errorf("%d groups unsettled at steady state, the first %s", n, first)
	}
	f.check(b)
	var cpus []time.Duration
	var cpuSum time.Duration
	for i := range h.nodes {
		c := w1.cpu[i] - w0.cpu[i]
		cpus = append(cpus, c)
		cpuSum += c
	}
	hbRate := float64(w1.served-w0.served) / window.Seconds()
	writes := float64(w1.rev-w0.rev) / window.Seconds()
	loadgen := (w1.self - w0.self).Seconds() / window.Seconds()
	dev := 0.0
	// The report is nine lines in two log calls, since a benchmark's log
	// is cut at ten; the steady state's goes out before the kill, so that
	// a fail-over that fails still shows it.
	var report strings.Builder
	fmt.Fprintf(&report, "%d groups × %d members on %d connections to each node, %d shards, election TTL %v: joined in %v\n",
		*benchGroups, *benchSize, len(f.lanes), *benchShards, *benchTTL, join.Round(time.Millisecond))
	fmt.Fprintf(&report, "steady state over %v: etcd revision +%d (%.2f writes/s)\n", window.Round(time.Millisecond), w1.rev-w0.rev, writes)
	fmt.Fprintf(&report, "%-9s %6s %8s %9s %6s\n", "process", "shards", "hb/s", "cpu-cores", "share")
	for i, c := range cpus {
		share := c.Seconds() / cpuSum.Seconds()
		dev = max(dev, math.Abs(share-1.0/3)*3*100)
		fmt.Fprintf(&report, "tenure-%-2d %6d %8.0f %9.3f %5.1f%%\n", i, w1.led[i], float64(w1.ok[i]-w0.ok[i])/window.Seconds(),
			c.Seconds()/window.Seconds(), share*100)
	}
	fmt.Fprintf(&report, "%-9s %6s %8s %9.3f\n", "etcd", "", "", (w1.etcdCPU-w0.etcdCPU).Seconds()/window.Seconds())
	fmt.Fprintf(&report, "%-9s %6s %8.0f %9.3f", "loadgen", "", hbRate, loadgen)
	b.Log(report.String())
	report.Reset()

	to := sc.killBusiest(b, ctx, "BenchmarkShards")
	failover := to.back[len(to.back)-1]
	b.Logf("%s", to)
	f.check(b)

	b.ReportMetric(join.Seconds(), "join-s")
	b.ReportMetric(hbRate, "hb/s")
	b.ReportMetric(dev, "cpu-dev-%")
	b.ReportMetric(writes, "etcd-writes/s")
	b.ReportMetric(loadgen, "loadgen-cores")
	b.ReportMetric(failover.Seconds(), "failover-s")
}

// sample is what the benchmark reads of the set and the fleet at one
// instant.
type sample struct {
	at         time.Time
	cpu        []time.Duration // by node
	etcdCPU    time.Duration
	self       time.Duration // this process's
	rev        int64         // etcd's revision
	led        []int         // shards by node
	ok         []int64       // heartbeats answered by node
	served     int64
	epochMoves int64
}

func (sc *shardCheck) sample(ctx context.Context) sample {
	h, f := sc.h, sc.f
	tb := h.t
	s := sample{at: time.Now(), served: f.served(), epochMoves: f.epochMoves.Load()}
	for i, p := range h.nodes {
		c, err := p.CPU()
		if err != nil {
			tb.Fatal(err)
		}
		s.cpu = append(s.cpu, c)
		s.ok = append(s.ok, f.ok[i].Load())
		led := -1
		if sc.shards > 0 {
			if led, err = h.shardsLed(ctx, i); err != nil {
				tb.Fatal(err)
			}
		}
		s.led = append(s.led, led)
	}
	var err error
	if s.etcdCPU, err = h.etcd[0].CPU(); err != nil {
		tb.Fatal(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	resp, err := sc.cli.Get(ctx, "/e2e/ready")
	if err != nil {
		tb.Fatal(err)
	}
	s.rev = resp.Header.Revision
	return s
}
