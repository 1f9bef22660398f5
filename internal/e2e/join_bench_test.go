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
	joinProfiles = flag.String("e2e.profiledir", "", "BenchmarkJoin: write each node's CPU profile here (<case>-tenure-<i>.pprof)")
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
//	loadgen-cpu-s   this process's CPU over the join
//
// -e2e.coalesce=0,100ms runs one sub-benchmark per join coalescing window;
// -e2e.baseline=<binary> runs each case on another build of tenure too,
// alternating, so that a before/after ratio comes from the same run:
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
	if *joinBaseline != "" {
		bins = append(bins, *joinBaseline)
	}
	for _, w := range windows {
		for _, bin := range bins {
			name := "tenure"
			if bin != "" {
				name = "baseline"
			}
			if w != "" {
				name += "/coalesce=" + w
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					benchJoin(b, strings.ReplaceAll(name, "/", "-"), bin, w)
				}
			})
		}
	}
}

func benchJoin(b *testing.B, name, bin, window string) {
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
	b.ReportMetric(cpu.Seconds(), "node-cpu-s")
	b.ReportMetric((w1.self - w0.self).Seconds(), "loadgen-cpu-s")
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
