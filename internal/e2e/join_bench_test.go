package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testenv"
)

var (
	joinMembers  = flag.Int("e2e.join-members", 160000, "BenchmarkJoin: members in all, in groups of -e2e.members")
	joinCoalesce = flag.String("e2e.coalesce", "", "BenchmarkJoin: comma-separated --consumer-join-coalesce windows to compare, one sub-benchmark each (empty: the nodes' default)")
	joinBaseline = flag.String("e2e.baseline", "", "BenchmarkJoin, BenchmarkTakeover, BenchmarkCapacity: a `tenure` binary (another build) to run each case on as well, in the same run, for a before/after ratio")
	joinProfiles = flag.String("e2e.profiledir", "", "BenchmarkJoin: write each node's CPU profile here (<case>-<round>-tenure-<i>.pprof), and etcd's over the join in slices (<case>-<round>-etcd-<k>.pprof; go tool pprof merges them)")
	joinRounds   = flag.Int("e2e.join-rounds", 1, "BenchmarkJoin: with -e2e.baseline, how many times to run every case on both builds, the order of the builds alternating from round to round")
)

// BenchmarkJoin measures how fast a fleet joins: 160,000 raw KIP-848
// members (10,000 groups of 16, a topic of 64 partitions) join three
// `tenure serve --shards 48` nodes over one etcd process, all on loopback,
// with the load generator (the fleet of BenchmarkShards, pipelined: 4,000
// members per connection to each node, at most 256 requests of them in
// flight, 32 of those joins) in this process. It reports:
//
//	join-s          from the first join to every group settled (each member
//	                holds its target and has said so)
//	members/s       members over join-s
//	etcd-writes     the etcd revision's growth over the join: one per
//	                write request (all the puts of a transaction, nested
//	                ones included, share one revision)
//	store-batches   the nodes' writers' batches (Store.Persist calls)
//	records/member  the records the group cores handed the nodes' writers,
//	                per member joined
//	joined-s        until every member's join was answered
//	node-cpu-s      the three nodes' CPU over the join, summed
//	node-ms/member  the same per member joined
//	etcd-cpu-s      the etcd process's CPU over the join
//	etcd-ms/member  the same per member joined
//	loadgen-cpu-s   this process's CPU over the join
//	hb/member       heartbeats answered without error over the join (the
//	                joins and the reports of new assignments included),
//	                per member joined
//
// -e2e.coalesce=0,100ms runs one sub-benchmark per join coalescing window;
// -e2e.baseline=<binary> runs each case on another build of tenure too,
// so that a before/after ratio comes from the same run, and
// -e2e.join-rounds=N does that N times, the build that goes first
// alternating (on this machine the case that runs first is often the
// slower), and logs the medians of each build and of the rounds' ratios:
//
//	go test -run '^$' -bench BenchmarkJoin -benchtime 1x ./internal/e2e/
func BenchmarkJoin(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes under heavy load")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	windows := []string{""}
	if *joinCoalesce != "" {
		windows = strings.Split(*joinCoalesce, ",")
	}
	bins := []string{""}
	rounds := 1
	if *joinBaseline != "" {
		bins = append(bins, *joinBaseline)
		rounds = max(*joinRounds, 1)
	}
	// res[window][build] are the rounds' results of each case.
	res := make([][][]joinResult, len(windows))
	for r := range rounds {
		for wi, w := range windows {
			if res[wi] == nil {
				res[wi] = make([][]joinResult, len(bins))
			}
			for k := range bins {
				i := k
				if r%2 == 1 {
					i = len(bins) - 1 - k
				}
				name := "tenure"
				if i > 0 {
					name = "baseline"
				}
				if w != "" {
					name += "/coalesce=" + w
				}
				b.Run(name, func(b *testing.B) {
					for range b.N {
						res[wi][i] = append(res[wi][i], benchJoin(b, fmt.Sprintf("%s-%d", strings.ReplaceAll(name, "/", "-"), r+1), bins[i], w))
					}
				})
			}
		}
	}
	if len(bins) > 1 && rounds > 1 {
		for wi, w := range windows {
			logJoinRounds(b, w, res[wi][0], res[wi][1])
		}
	}
}

// joinResult is what one run of BenchmarkJoin's case measured.
type joinResult struct {
	joinS, nodeMS, etcdMS float64 // join-s, node-ms/member, etcd-ms/member
}

// logJoinRounds logs the medians of the rounds of this tree's build
// (cur) and the baseline's (base) for window w, and of their ratios
// round by round.
func logJoinRounds(b *testing.B, w string, cur, base []joinResult) {
	n := min(len(cur), len(base))
	if n == 0 {
		return
	}
	pick := func(rs []joinResult, f func(joinResult) float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = f(rs[i])
		}
		return out
	}
	ratio := func(f func(joinResult) float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = f(cur[i]) / f(base[i])
		}
		return out
	}
	for _, m := range []struct {
		name string
		f    func(joinResult) float64
	}{
		{"join-s", func(r joinResult) float64 { return r.joinS }},
		{"node-ms/member", func(r joinResult) float64 { return r.nodeMS }},
		{"etcd-ms/member", func(r joinResult) float64 { return r.etcdMS }},
	} {
		b.Logf("window %q, %d rounds: %s, tenure median %.3f, baseline median %.3f; tenure/baseline by round %.2f, median %.2fx",
			w, n, m.name, median(pick(cur, m.f)), median(pick(base, m.f)), ratio(m.f), median(ratio(m.f)))
	}
}

func benchJoin(b *testing.B, name, bin, window string) joinResult {
	size := *benchSize
	groups := *joinMembers / size
	args := []string{"--consumer-heartbeat-interval", benchHeartbeat.String(), "--consumer-session-timeout", benchSession.String(),
		"--election-ttl", benchTTL.String(), "--log-level", "warn", "--shards", strconv.Itoa(*benchShards)}
	if window != "" {
		args = append(args, "--consumer-join-coalesce", window)
	}
	args = append(args, strings.Fields(*benchArgs)...)
	opts := haOpts{etcdMembers: 1, http: true, args: args, tenure: bin}
	if dir := *joinProfiles; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		opts.nodeArgs = func(i int) []string {
			return []string{"--cpuprofile", filepath.Join(dir, fmt.Sprintf("%s-tenure-%d.pprof", name, i))}
		}
		opts.etcdArgs = []string{"--enable-pprof"}
	}
	h := startHASetWith(b, opts)
	if opts.nodeArgs != nil {
		// A node writes its profile as it returns, after handing its shards
		// off (up to the election TTL) and answering for the hand-off grace
		// (two heartbeat intervals, at most 10 s): longer than the 10 s the
		// set's cleanup allows before SIGKILL, which left every node but
		// the last one stopped with an empty profile. Stopping them
		// together here, before that cleanup, gives them the time.
		b.Cleanup(func() {
			var wg sync.WaitGroup
			for _, n := range h.nodes {
				wg.Go(func() { n.StopWithin(*benchTTL + 10*time.Second + 30*time.Second) })
			}
			wg.Wait()
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sc := &shardCheck{h: h, cli: h.etcdClient(), shards: *benchShards}
	testenv.Eventually(b, time.Minute, "the shards to be spread over the nodes", func() bool {
		_, err := sc.coordination(ctx)
		return err == nil
	})
	topicID := createTopicOn(b, h.nodes[0].Addr, "bench", partitions)
	f := newFleet(b, fleetConfig{addrs: h.addrs(), topic: "bench", topicID: topicID, partitions: partitions,
		groups: groups, prefix: "bench", members: func(int) int { return size },
		perLane: *benchLane, inFlight: *benchFlight, timeout: 10 * time.Second})
	sc.f = f

	m0 := storeMetrics(ctx, b, h)
	w0 := sc.sample(ctx)
	f.start()
	defer f.stop()
	if dir := *joinProfiles; dir != "" {
		defer profileEtcd(b, h, filepath.Join(dir, name+"-etcd"))()
	}
	var joined time.Duration // until every member's join was answered
	for last := time.Now(); ; {
		time.Sleep(250 * time.Millisecond)
		n, first := f.unsettled()
		if joined == 0 && f.joined() == groups*size {
			joined = time.Since(w0.at)
		}
		if n == 0 {
			break
		}
		if testing.Verbose() && time.Since(last) >= 10*time.Second {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "BenchmarkJoin %s: %v: %d members joined, %d groups unsettled, %d heartbeats answered, errors %v\n",
				name, time.Since(w0.at).Round(time.Second), f.joined(), n, f.served(), f.errorCodes())
		}
		if time.Since(w0.at) > 20*time.Minute {
			b.Fatalf("%d groups still unsettled after %v, the first %s", n, time.Since(w0.at).Round(time.Second), first)
		}
	}
	w1 := sc.sample(ctx)
	m1 := storeMetrics(ctx, b, h)
	f.check(b)
	join := w1.at.Sub(w0.at)
	var cpu time.Duration
	for i := range h.nodes {
		cpu += w1.cpu[i] - w0.cpu[i]
	}
	b.Logf("%s: %d members in %d groups joined in %v (%.0f members/s); etcd revision +%d; nodes' CPU %.1f s, etcd's %.1f s, the load generator's %.1f s",
		name, groups*size, groups, join.Round(time.Millisecond), float64(groups*size)/join.Seconds(), w1.rev-w0.rev,
		cpu.Seconds(), (w1.etcdCPU - w0.etcdCPU).Seconds(), (w1.self - w0.self).Seconds())
	var batches, persistS, readies, records float64
	for i := range m1 {
		batches += m1[i][0] - m0[i][0]
		persistS += m1[i][1] - m0[i][1]
		readies += m1[i][2] - m0[i][2]
		records += m1[i][3] - m0[i][3]
	}
	if batches > 0 {
		b.Logf("%s: every join answered after %v; store batches %.0f (%.0f/s over the join), %.1f group writes and %.1f ms each on average",
			name, joined.Round(time.Millisecond), batches, batches/join.Seconds(), readies/batches, 1000*persistS/batches)
	}
	b.ReportMetric(joined.Seconds(), "joined-s")
	b.ReportMetric(batches, "store-batches")
	b.ReportMetric(join.Seconds(), "join-s")
	b.ReportMetric(float64(groups*size)/join.Seconds(), "members/s")
	b.ReportMetric(float64(w1.rev-w0.rev), "etcd-writes")
	b.ReportMetric(records/float64(groups*size), "records/member")
	etcdCPU := w1.etcdCPU - w0.etcdCPU
	members := float64(groups * size)
	b.ReportMetric(cpu.Seconds(), "node-cpu-s")
	b.ReportMetric(1000*cpu.Seconds()/members, "node-ms/member")
	b.ReportMetric(etcdCPU.Seconds(), "etcd-cpu-s")
	b.ReportMetric(1000*etcdCPU.Seconds()/members, "etcd-ms/member")
	b.ReportMetric((w1.self - w0.self).Seconds(), "loadgen-cpu-s")
	b.ReportMetric(float64(w1.served-w0.served)/members, "hb/member")
	return joinResult{joinS: join.Seconds(), nodeMS: 1000 * cpu.Seconds() / members, etcdMS: 1000 * etcdCPU.Seconds() / members}
}

// storeMetrics reads each node's store batch count, the seconds they took,
// and the group writes and records they held, from its /metrics.
func storeMetrics(ctx context.Context, tb testing.TB, h *haSet) [][4]float64 {
	tb.Helper()
	out := make([][4]float64, len(h.nodes))
	for i := range h.nodes {
		for j, series := range []string{"tenure_store_persist_seconds_count", "tenure_store_persist_seconds_sum", "tenure_store_batch_readies_sum",
			"tenure_store_batch_records_sum"} {
			v, err := h.metric(ctx, i, series)
			if err != nil {
				tb.Fatal(err)
			}
			out[i][j] = v
		}
	}
	return out
}

// profileEtcd writes back-to-back CPU profiles of 5 s of h's etcd, as
// prefix-<k>.pprof, until the returned function is called (which waits
// for the one under way).
func profileEtcd(tb testing.TB, h *haSet, prefix string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		const slice = 5 * time.Second
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", h.etcd[0].Addr, int(slice/time.Second))
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			default:
			}
			if err := fetchProfile(url, fmt.Sprintf("%s-%02d.pprof", prefix, k), slice); err != nil {
				tb.Logf("profile of etcd: %v", err)
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
