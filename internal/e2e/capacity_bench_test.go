package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/internal/benchcpu"
	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

var (
	capGroups  = flag.Int("e2e.capacity-groups", 250, "BenchmarkCapacity: groups of 16 members")
	capFixed   = flag.Float64("e2e.capacity-load", 6000, "BenchmarkCapacity: the fixed offered load (heartbeats plus commits per second) at which CPU is compared")
	capStart   = flag.Float64("e2e.capacity-start", 8000, "BenchmarkCapacity: the first offered load of the search for the maximum")
	capStep    = flag.Float64("e2e.capacity-step", 1.25, "BenchmarkCapacity: the factor between offered loads of the search")
	capWindow  = flag.Duration("e2e.capacity-window", 6*time.Second, "BenchmarkCapacity: the length of each measured window (several periods of the members at the loads measured)")
	capP99     = flag.Duration("e2e.capacity-p99", 50*time.Millisecond, "BenchmarkCapacity: the 99th percentile round trip a sustained load stays within")
	capCases   = flag.String("e2e.capacity-cases", "embedded/nodes=1,etcd/nodes=1,etcd/nodes=3", "BenchmarkCapacity: the cases to run, comma-separated")
	capSearch  = flag.Bool("e2e.capacity-search", true, "BenchmarkCapacity: search for the maximum (false: measure the fixed load only)")
	capPerLane = flag.Int("e2e.capacity-perconn", 1000, "BenchmarkCapacity: members sharing one connection to each node")
	capProfile = flag.String("e2e.capacity-profile", "", "BenchmarkCapacity: a `dir` to write a CPU profile of each node over the fixed load's window to (the nodes get --enable-pprof): <case>-node<i>.pprof")
	capTick    = flag.Duration("e2e.capacity-tick", fleetTick, "BenchmarkCapacity: the load generator's tick: the heartbeats and commits of a lane due within one go out together, in one write per node (a tick far below the members' period sends each request on its own, as clients with timers of their own do)")
	capRounds  = flag.Int("e2e.capacity-rounds", 1, "BenchmarkCapacity: with -e2e.baseline, how many times to run every case on both builds, the order of the builds alternating from round to round")
)

// BenchmarkCapacity finds what one node sustains and what sharding costs:
// 250 groups of 16 raw KIP-848 members (a topic of 64 partitions, each
// member owning 4), driven by the fleet of BenchmarkShards in this
// process, each member sending a heartbeat and an offset commit of its
// partitions every period (commits on the durable default: fsync on).
//
// Cases (-e2e.capacity-cases):
//
//	embedded/nodes=1  one `tenure serve` on its default store, the
//	                  embedded etcd, in a data directory of its own
//	etcd/nodes=1      one `tenure serve --shards 48` on an etcd process
//	etcd/nodes=3      three of them on one etcd process
//	etcd/nodes=1/third  one node as etcd/nodes=1, at a third of the
//	                  fixed load: each of the three nodes' share, so
//	                  that three times its CPU is what three nodes
//	                  would spend if being a set cost nothing
//
// For each, the offered load (heartbeats plus commits per second) starts
// at -e2e.capacity-start and grows by -e2e.capacity-step until a window
// (-e2e.capacity-window, three periods of the members at least) has a
// p99 round trip above 50 ms or serves less than 90% of what was
// offered, or a commit fails; the last window that passed is the
// maximum. If the first window fails, the load steps down instead, to
// the first that passes. Then the load is set to -e2e.capacity-load (the
// same for every case) for the CPU comparison; -e2e.capacity-search=false
// measures that alone. Heartbeats and commits share each member's
// connection, whose answers come in order, so a heartbeat queued behind
// a commit waits for the commit's fsync: their p99s are reported apart
// but are mostly alike. Reported per case:
//
//	hb-per-s             heartbeats answered per second at the maximum
//	commits-per-s        commits acknowledged per second at the maximum
//	p99-ms               their p99 round trip at the maximum
//	cpu-s-per-1k-ops     the nodes' CPU (summed) per 1,000 operations at
//	                     the fixed load (etcd's own is logged beside it):
//	                     on a shared machine, the figure that does not
//	                     depend on how much of it the run got
//	fixed-hb-p99-ms,     the p99 round trips of heartbeats and of commits
//	fixed-commit-p99-ms  at the fixed load
//
// and, in the log, the fixed load's CPU of etcd/nodes=3 over etcd/nodes=1
// (goal: 1.2 or less); with etcd/nodes=1/third, that ratio split into
// what one node spends at a third of the load against all of it (its
// economy of scale) and what three nodes spend against three lone nodes
// at a third each (the cost of being a set: following, elections, a
// node's own round trips). The load generator shares the machine's cores with
// the nodes: its CPU is logged too.
//
// -e2e.tenure=<tenure binary> runs that build instead of this tree's;
// -e2e.baseline=<tenure binary> runs each case on that build too
// (<case>/baseline), -e2e.capacity-rounds times, this tree's build first
// in odd rounds and the baseline's first in even ones, and logs each
// round's and the median ratios: on a shared machine only builds measured
// side by side compare. -e2e.capacity-profile=DIR writes each node's CPU
// profile over the fixed load's window.
//
//	go test -run '^$' -bench BenchmarkCapacity -benchtime 1x ./internal/e2e/
func BenchmarkCapacity(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes under heavy load")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	bins := []string{*lossTenure} // this tree's build unless -e2e.tenure names one
	rounds := 1
	if *joinBaseline != "" {
		bins = append(bins, *joinBaseline)
		rounds = max(*capRounds, 1)
	}
	// cpus[build][round] are the node and etcd CPU-s per 1,000 operations
	// of each case.
	type perK struct{ nodes, etcd float64 }
	cpus := make([][]map[string]perK, len(bins))
	for i := range cpus {
		cpus[i] = make([]map[string]perK, rounds)
		for r := range rounds {
			cpus[i][r] = map[string]perK{}
		}
	}
	label := func(i int) string {
		if i == 0 {
			return "tenure"
		}
		return "baseline"
	}
	for r := range rounds {
		for _, name := range strings.Split(*capCases, ",") {
			for k := range bins {
				i := k
				if r%2 == 1 {
					i = len(bins) - 1 - k
				}
				sub := name
				if i > 0 {
					sub += "/baseline"
				}
				b.Run(sub, func(b *testing.B) {
					for range b.N {
						n, e := benchCapacity(b, name, bins[i], fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(name, "/", "-"), label(i), r+1))
						cpus[i][r][name] = perK{n, e}
					}
				})
			}
		}
	}
	for i := range bins {
		var ratios, withEtcd []float64
		for r := range rounds {
			one, three := cpus[i][r]["etcd/nodes=1"], cpus[i][r]["etcd/nodes=3"]
			if one.nodes == 0 || three.nodes == 0 {
				continue
			}
			ratios = append(ratios, three.nodes/one.nodes)
			withEtcd = append(withEtcd, (three.nodes+three.etcd)/(one.nodes+one.etcd))
			b.Logf("%s, round %d, at %.0f ops/s: three sharded nodes spend %.2fx the CPU of one (%.3f against %.3f CPU-s per 1,000 operations); with etcd's, %.2fx",
				label(i), r+1, *capFixed, three.nodes/one.nodes, three.nodes, one.nodes, withEtcd[len(withEtcd)-1])
			if third := cpus[i][r]["etcd/nodes=1/third"]; third.nodes > 0 {
				// Per operation, three lone nodes at a third of the
				// load each spend what one of them does.
				b.Logf("%s, round %d: one node at a third of the load spends %.2fx its CPU per operation at all of it (%.3f); three nodes spend %.2fx three lone nodes at a third each (with etcd's, %.2fx)",
					label(i), r+1, third.nodes/one.nodes, third.nodes, three.nodes/third.nodes, (three.nodes+three.etcd)/(third.nodes+third.etcd))
			}
		}
		if len(ratios) > 1 {
			b.Logf("%s: median of %d rounds, %.2fx (with etcd's, %.2fx)", label(i), len(ratios), median(ratios), median(withEtcd))
		}
	}
	if len(bins) > 1 {
		for _, name := range strings.Split(*capCases, ",") {
			var pairs []float64
			for r := range rounds {
				if a, c := cpus[0][r][name].nodes, cpus[1][r][name].nodes; a > 0 && c > 0 {
					pairs = append(pairs, a/c)
				}
			}
			if len(pairs) > 0 {
				b.Logf("%s: node CPU per operation, tenure over baseline, by round %.2f, median %.2fx", name, pairs, median(pairs))
			}
		}
	}
}

// median returns the median of xs (the mean of the middle two if even).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// capTarget is what a case runs on: the nodes and, for an external etcd,
// its process.
type capTarget struct {
	nodes []*proctest.Process
	http  []string // the nodes' --http addresses (etcd cases)
	etcd  *proctest.Process
	set   *haSet           // the etcd cases' set, for its writes
	cli   *clientv3.Client // on the set's etcd
}

// capWrites is what the nodes had written so far: etcd's revision (one a
// request: a node's combined shards share one), the writers' batches and
// the group writes they held, summed over the nodes.
type capWrites struct{ rev, batches, readies float64 }

// writes reads t's capWrites (zero for the embedded store).
func (t capTarget) writes(tb testing.TB) capWrites {
	if t.set == nil {
		return capWrites{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := t.cli.Get(ctx, "/e2e/ready")
	if err != nil {
		tb.Fatal(err)
	}
	w := capWrites{rev: float64(resp.Header.Revision)}
	for _, m := range storeMetrics(ctx, tb, t.set) {
		w.batches += m[0]
		w.readies += m[2]
	}
	return w
}

func (t capTarget) addrs() []string {
	var out []string
	for _, p := range t.nodes {
		out = append(out, p.Addr)
	}
	return out
}

// cpu returns the nodes' CPU, summed, and etcd's (zero if embedded).
func (t capTarget) cpu(tb testing.TB) (nodes, etcd time.Duration) {
	for _, p := range t.nodes {
		c, err := p.CPU()
		if err != nil {
			tb.Fatal(err)
		}
		nodes += c
	}
	if t.etcd != nil {
		c, err := t.etcd.CPU()
		if err != nil {
			tb.Fatal(err)
		}
		etcd = c
	}
	return nodes, etcd
}

// startCapacity starts the case's processes, running the tenure binary
// bin (this tree's if empty).
func startCapacity(b *testing.B, name, bin string) capTarget {
	name = strings.TrimSuffix(name, "/third")
	args := []string{"--consumer-heartbeat-interval", benchHeartbeat.String(), "--consumer-session-timeout", benchSession.String(),
		"--log-level", "warn"}
	if *capProfile != "" {
		args = append(args, "--enable-pprof")
	}
	args = append(args, strings.Fields(*benchArgs)...)
	store, nodesArg, ok := strings.Cut(name, "/nodes=")
	nodes, err := strconv.Atoi(nodesArg)
	if !ok || err != nil || nodes < 1 {
		b.Fatalf("case %q: want <store>/nodes=<n>", name)
	}
	switch store {
	case "embedded":
		if nodes != 1 {
			b.Fatalf("case %q: the embedded store serves one node", name)
		}
		if bin == "" {
			bin = build(b, "github.com/tenure-dev/tenure/cmd/tenure")[0]
		}
		if *capProfile != "" {
			b.Fatalf("case %q: -e2e.capacity-profile profiles the etcd cases (the nodes' --http)", name)
		}
		p := proctest.Start(b, "tenure", bin, append([]string{"serve", "--listen", "{addr}", "--http", "",
			"--data-dir", filepath.Join(b.TempDir(), "data")}, args...)...)
		return capTarget{nodes: []*proctest.Process{p}}
	case "etcd":
		args = append(args, "--election-ttl", benchTTL.String(), "--shards", strconv.Itoa(*benchShards))
		h := startHASetWith(b, haOpts{etcdMembers: 1, http: true, args: args, nodes: nodes, tenure: bin})
		sc := &shardCheck{h: h, cli: h.etcdClient(), shards: *benchShards}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		testenv.Eventually(b, time.Minute, "the shards to be spread over the nodes", func() bool {
			_, err := sc.coordination(ctx)
			return err == nil
		})
		return capTarget{nodes: h.nodes, http: h.http, etcd: h.etcd[0], set: h, cli: sc.cli}
	}
	b.Fatalf("case %q: the store is embedded or etcd", name)
	return capTarget{}
}

// capWindowResult is one measured window.
type capWindowResult struct {
	offered, hb, commits float64 // per second
	fails                int64
	p99                  time.Duration // the larger of hbP99 and commitP99
	hbP99, commitP99     time.Duration
	nodeCPU, etcdCPU     time.Duration
	self                 time.Duration
	elapsed              time.Duration
	writes               capWrites // over the window
}

func (r capWindowResult) ops() float64 { return r.hb + r.commits }

func (r capWindowResult) String() string {
	s := fmt.Sprintf("offered %.0f/s: %.0f hb/s + %.0f commits/s (%d failed), p99 %v (heartbeats %v, commits %v); nodes %.2f cores, etcd %.2f, load generator %.2f",
		r.offered, r.hb, r.commits, r.fails, r.p99, r.hbP99, r.commitP99, r.nodeCPU.Seconds()/r.elapsed.Seconds(),
		r.etcdCPU.Seconds()/r.elapsed.Seconds(), r.self.Seconds()/r.elapsed.Seconds())
	if w := r.writes; w.batches > 0 {
		s += fmt.Sprintf("; etcd requests %.0f/s, store batches %.0f/s of %.1f group writes", w.rev/r.elapsed.Seconds(),
			w.batches/r.elapsed.Seconds(), w.readies/w.batches)
	}
	return s
}

// benchCapacity runs one case on the tenure binary bin (this tree's if
// empty) and returns the nodes' and etcd's CPU-s per 1,000 operations at
// the fixed load; tag names its profiles.
func benchCapacity(b *testing.B, name, bin, tag string) (nodes, etcd float64) {
	t := startCapacity(b, name, bin)
	topicID := createTopicOn(b, t.nodes[0].Addr, "bench", partitions)
	members := *capGroups * 16
	f := newFleet(b, fleetConfig{addrs: t.addrs(), topic: "bench", topicID: topicID, partitions: partitions,
		groups: *capGroups, prefix: "cap", members: func(int) int { return 16 },
		perLane: *capPerLane, inFlight: *benchFlight, timeout: 10 * time.Second, tick: *capTick})
	f.start()
	defer f.stop()
	start := time.Now()
	for {
		time.Sleep(250 * time.Millisecond)
		n, first := f.unsettled()
		if n == 0 {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("%d groups still unsettled after %v, the first %s", n, time.Since(start).Round(time.Second), first)
		}
	}
	f.check(b)
	f.load.commits.Store(true)
	// run offers rate (operations per second: a heartbeat and a commit
	// per member per period) and measures a window once every member
	// runs on the new period.
	last := benchHeartbeat
	run := func(rate float64, profile bool) capWindowResult {
		period := time.Duration(float64(2*members) / rate * float64(time.Second))
		f.load.period.Store(int64(period))
		time.Sleep(last + time.Second)
		last = period
		h0, c0, x0 := f.served(), f.load.commitsOK.Load(), f.load.commitsFail.Load()
		hl0, cl0 := f.load.hbLatency.snapshot(), f.load.commitLatency.snapshot()
		// At least three periods, so that the members beating once or
		// twice in a window do not make its rate.
		window := max(*capWindow, 3*period)
		var profiles sync.WaitGroup
		if profile && *capProfile != "" {
			profileNodes(b, &profiles, t, window, tag)
		}
		w0 := t.writes(b)
		n0, e0 := t.cpu(b)
		s0, at := benchcpu.Process(), time.Now()
		time.Sleep(window)
		h1, c1, x1 := f.served(), f.load.commitsOK.Load(), f.load.commitsFail.Load()
		hl1, cl1 := f.load.hbLatency.snapshot(), f.load.commitLatency.snapshot()
		n1, e1 := t.cpu(b)
		w1 := t.writes(b)
		r := capWindowResult{offered: rate, elapsed: time.Since(at), fails: x1 - x0, nodeCPU: n1 - n0, etcdCPU: e1 - e0, self: benchcpu.Process() - s0,
			writes: capWrites{rev: w1.rev - w0.rev, batches: w1.batches - w0.batches, readies: w1.readies - w0.readies}}
		r.hb = float64(h1-h0) / r.elapsed.Seconds()
		r.commits = float64(c1-c0) / r.elapsed.Seconds()
		r.hbP99, _ = latencyQuantile(hl0, hl1, 0.99)
		r.commitP99, _ = latencyQuantile(cl0, cl1, 0.99)
		r.p99 = max(r.hbP99, r.commitP99)
		profiles.Wait()
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "BenchmarkCapacity %s: %v\n", name, r)
		}
		return r
	}
	sustained := func(r capWindowResult) bool {
		return r.p99 <= *capP99 && r.ops() >= 0.9*r.offered && r.fails == 0
	}
	// The search climbs from -e2e.capacity-start while windows pass; if
	// the first fails it steps down instead, to the first that passes
	// (a loaded machine's maximum may lie below the start), giving up
	// below a sixteenth of the start.
	best := capWindowResult{elapsed: time.Second}
	third := strings.HasSuffix(name, "/third")
	if !*capSearch || third {
		// The fixed load only (a lone node's maximum is etcd/nodes=1's).
	} else if r := run(*capStart, false); sustained(r) {
		best = r
		for rate := *capStart * *capStep; ; rate *= *capStep {
			if time.Duration(float64(2*members)/rate*float64(time.Second)) < 2*f.cfg.tickLen() {
				b.Logf("%s: the load generator's members cannot offer more than %.0f/s", name, rate / *capStep)
				break
			}
			r := run(rate, false)
			if !sustained(r) {
				b.Logf("%s: beyond the maximum at %v", name, r)
				break
			}
			best = r
		}
	} else {
		b.Logf("%s: beyond the maximum at %v", name, r)
		for rate := *capStart / *capStep; rate >= *capStart/16; rate /= *capStep {
			if r := run(rate, false); sustained(r) {
				best = r
				break
			}
		}
	}
	if *capSearch && !third && best.offered == 0 {
		b.Logf("%s: no window sustained a p99 of %v or less", name, *capP99)
	}
	load := *capFixed
	if third {
		load /= 3
	}
	fixed := run(load, true)
	f.check(b)
	kops := fixed.ops() * fixed.elapsed.Seconds() / 1000
	perK := fixed.nodeCPU.Seconds() / kops
	b.Logf("%s: maximum %v", name, best)
	b.Logf("%s: fixed load %v: %.3f node CPU-s per 1,000 operations, etcd %.3f", name, fixed, perK,
		fixed.etcdCPU.Seconds()/kops)
	b.ReportMetric(best.hb, "hb-per-s")
	b.ReportMetric(best.commits, "commits-per-s")
	b.ReportMetric(float64(best.p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(fixed.hbP99.Microseconds())/1000, "fixed-hb-p99-ms")
	b.ReportMetric(float64(fixed.commitP99.Microseconds())/1000, "fixed-commit-p99-ms")
	b.ReportMetric(perK, "cpu-s-per-1k-ops")
	return perK, fixed.etcdCPU.Seconds() / kops
}

// profileNodes starts fetching a CPU profile of each node of t over the
// next window into -e2e.capacity-profile, <tag>-node<i>.pprof; wg is done
// when they are written.
func profileNodes(b *testing.B, wg *sync.WaitGroup, t capTarget, window time.Duration, tag string) {
	if err := os.MkdirAll(*capProfile, 0o755); err != nil {
		b.Fatal(err)
	}
	for i, addr := range t.http {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(window.Round(time.Second)/time.Second))
			if err := fetchProfile(url, filepath.Join(*capProfile, fmt.Sprintf("%s-node%d.pprof", tag, i)), window); err != nil {
				b.Logf("profile of node %d: %v", i, err)
			}
		}()
	}
}
