package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// takeoverCommits makes BenchmarkTakeover's members commit, as consumers
// do: the groups a takeover moves then hold offsets, and keep committing,
// so that a standby's rebuilt copies are as stale as a real set's.
var takeoverCommits = flag.Int("e2e.takeover-commits", 0, "BenchmarkTakeover: with N above 0, each member commits its partitions with every Nth heartbeat (staggered) from the join on, and the kill comes N heartbeat intervals later: groups with offsets that keep changing, as consumers' auto-commits make them (0: no commits)")

// BenchmarkTakeover measures what a kill -9 of a coordinating node costs
// the groups it served: 10,000 groups of 16 raw KIP-848 members (the
// -e2e flags of BenchmarkShards shape it alike) join three nodes over one
// etcd process, and once every group is settled the node that serves the
// most groups is killed. Two sub-benchmarks:
//
//	one-leader   one leader serves every group; the leader is killed
//	sharded      --shards 48; the node with the most groups is killed
//
// Each runs once, whatever b.N, and reports
//
//	served-max-s   from the kill to the first heartbeat answered by the new
//	               coordinator for the last of the dead node's groups
//	served-med-s   the same, for the median group
//	ttl-s          the election TTL (-e2e.ttl): the dead node's lease
//	               lives that long, so no group can be served sooner;
//	               the goal is served-max-s <= ttl-s + 1
//	found-max-s    from the kill to the last lookup that found the new
//	               coordinator, of any of those groups
//	queued-max-s   the longest wait of such a group's first heartbeat after
//	               its lookup, in its lane behind the lane's other due
//	               members: the load generator's share, which a stock
//	               client on a connection of its own does not have
//	answered-max-s the longest the new coordinator took to answer such a
//	               heartbeat
//
// and logs where the survivors' terms took their groups from
// (tenure_takeover_groups_total: rebuilt ahead by a warm standby, restored
// from its mirror, or loaded from the store; -e2e.args=--standby=false
// measures the load), and how many requests waited for a load or an
// install (tenure_takeover_waits_total) rather than be refused. -e2e.baseline=<tenure binary> runs each case on
// that build too (<case>/baseline), right after this tree's. -count=N
// does not alternate them: it runs each sub-benchmark N times in a row
// (this tree's N times, then the baseline N times); for the other order,
// give the build before as -e2e.tenure and this tree's as -e2e.baseline
// (the load generator is this tree's either way). -e2e.profile writes CPU
// profiles of the survivors and of the load generator, second by second
// from the kill. -e2e.takeover-commits=N has every member commit its
// partitions with every Nth heartbeat: the dead node's groups then hold
// offsets and keep changing, so the survivors' standbys must give the
// copies they rebuilt ahead the offsets of now as they install them.
//
// and fails as BenchmarkShards does if a group the dead node did not
// coordinate moves, or a member is expelled or its epoch goes backwards.
//
//	go test -run '^$' -bench 'BenchmarkTakeover' -benchtime 1x ./internal/e2e/
func BenchmarkTakeover(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes under heavy load")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	type takeoverCase struct {
		name   string
		shards int
		bin    string // the tenure binary; "": this tree's
	}
	var cases []takeoverCase
	for _, c := range []takeoverCase{{name: "one-leader", bin: *lossTenure}, {name: "sharded", shards: *benchShards, bin: *lossTenure}} {
		cases = append(cases, c)
		if *joinBaseline != "" {
			cases = append(cases, takeoverCase{c.name + "/baseline", c.shards, *joinBaseline})
		}
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			sc, join := startBenchFleet(b, ctx, "BenchmarkTakeover/"+c.name, c.shards, c.bin)
			if *takeoverCommits > 0 {
				// Every member commits once a cycle: let a whole cycle
				// pass, so that every group the kill takes has offsets
				// and is still committing.
				sc.f.load.commitEvery.Store(int64(*takeoverCommits))
				sc.f.load.commits.Store(true)
				time.Sleep(time.Duration(*takeoverCommits) * benchHeartbeat)
			}
			// The members that reported their assignment last are due
			// again an interval later: let that pass, so that the kill
			// finds every member heartbeating on its interval.
			time.Sleep(benchHeartbeat + time.Second)
			ok0, failed0 := sc.f.load.commitsOK.Load(), sc.f.load.commitsFail.Load()
			hl0, cl0 := sc.f.load.hbLatency.snapshot(), sc.f.load.commitLatency.snapshot()
			sc.f.check(b)
			to := sc.killBusiest(b, ctx, "BenchmarkTakeover/"+c.name)
			sc.f.check(b)
			// Where the survivors' terms took their groups from.
			// and how many requests waited for a load or an install.
			from, waits := map[string]float64{}, map[string]float64{}
			for i, p := range sc.h.nodes {
				if p.Exited() {
					continue
				}
				for _, src := range []string{"standby", "mirror", "store"} {
					if v, err := sc.h.metric(ctx, i, `tenure_takeover_groups_total{from="`+src+`"}`); err == nil {
						from[src] += v
					}
				}
				for _, o := range []string{"served", "timeout"} {
					if v, err := sc.h.metric(ctx, i, `tenure_takeover_waits_total{outcome="`+o+`"}`); err == nil {
						waits[o] += v
					}
				}
			}
			b.Logf("joined in %v; %s; the survivors' terms took %v groups from the standby, %v from the mirror, %v from the store; requests that waited for a load or install: %v served, %v timed out",
				join.Round(time.Millisecond), to, from["standby"], from["mirror"], from["store"], waits["served"], waits["timeout"])
			b.Log(to.clients)
			// The round trips from the kill on, of every node: a lane's
			// answers come in order, so a commit held for its write holds
			// the heartbeats behind it on the lane's connection.
			hl1, cl1 := sc.f.load.hbLatency.snapshot(), sc.f.load.commitLatency.snapshot()
			b.Logf("round trips after the kill (p50/p99/max): heartbeats %s, commits %s", latencies(hl0, hl1), latencies(cl0, cl1))
			if *takeoverCommits > 0 {
				b.Logf("offset commits: %d answered before the kill, %d after it (%d failed or unanswered, the dead node's in flight among them)",
					ok0, sc.f.load.commitsOK.Load()-ok0, sc.f.load.commitsFail.Load()-failed0)
			}
			b.ReportMetric(to.back[len(to.back)-1].Seconds(), "served-max-s")
			b.ReportMetric(to.back[len(to.back)/2].Seconds(), "served-med-s")
			b.ReportMetric(benchTTL.Seconds(), "ttl-s")
			// served-max-s's parts, to tell the load generator's share
			// from the server's: a group's first heartbeat after its
			// lookup waits in its lane behind the lane's other due
			// members, which a stock client, on a connection of its own,
			// does not.
			b.ReportMetric(most(to.outages.found).Seconds(), "found-max-s")
			b.ReportMetric(most(to.outages.queued).Seconds(), "queued-max-s")
			b.ReportMetric(most(to.outages.answer).Seconds(), "answered-max-s")
		})
	}
}

// startBenchFleet starts three nodes over one etcd process with the
// benchmarks' flags (shards > 0: --shards), waits for them to agree on who
// coordinates what, and has a fleet of the -e2e flags' shape join them;
// it returns once every group is settled, with the time that took. name
// prefixes the progress lines of -test.v.
func startBenchFleet(b *testing.B, ctx context.Context, name string, shards int, bin string) (*shardCheck, time.Duration) {
	args := []string{"--consumer-heartbeat-interval", benchHeartbeat.String(), "--consumer-session-timeout", benchSession.String(),
		"--election-ttl", benchTTL.String(), "--log-level", "warn"}
	if shards > 0 {
		args = append(args, "--shards", strconv.Itoa(shards))
	}
	args = append(args, profileArgs()...)
	args = append(args, strings.Fields(*benchArgs)...)
	h := startHASetWith(b, haOpts{etcdMembers: 1, http: true, args: args, tenure: bin})
	sc := &shardCheck{h: h, cli: h.etcdClient(), shards: shards}
	if shards > 0 {
		testenv.Eventually(b, time.Minute, "the shards to be spread over the nodes", func() bool {
			_, err := sc.coordination(ctx)
			return err == nil
		})
	} else {
		h.leader(ctx)
	}
	topicID := createTopicOn(b, h.nodes[0].Addr, "bench", partitions)
	f := newFleet(b, fleetConfig{addrs: h.addrs(), topic: "bench", topicID: topicID, partitions: partitions,
		groups: *benchGroups, prefix: "bench", members: func(int) int { return *benchSize },
		perLane: *benchLane, inFlight: *benchFlight, timeout: 10 * time.Second})
	sc.f = f

	start := time.Now()
	f.start()
	b.Cleanup(f.stop)
	for last := start; ; {
		time.Sleep(time.Second)
		n, first := f.unsettled()
		if n == 0 {
			return sc, time.Since(start)
		}
		if testing.Verbose() && time.Since(last) >= 10*time.Second {
			// Not b.Logf: a benchmark's log is cut at ten lines.
			last = time.Now()
			fmt.Fprintf(os.Stderr, "%s: joining, %v: %d groups unsettled, %d heartbeats answered, errors %v; the first unsettled: %.300s\n",
				name, time.Since(start).Round(time.Second), n, f.served(), f.errorCodes(), first)
		}
		if time.Since(start) > 20*time.Minute {
			b.Fatalf("%d groups still unsettled after %v, the first %s", n, time.Since(start).Round(time.Second), first)
		}
		f.check(b)
	}
}

// takeover is what killBusiest saw.
type takeover struct {
	victim   int
	killed   time.Time       // when the kill was sent, by the wall clock, to find it in the nodes' logs
	exited   time.Duration   // from the kill until the process was gone
	shards   int             // the victim's shards (0: one leader)
	taken    time.Duration   // from the kill until etcd showed each of them owned by another node
	back     []time.Duration // by the victim's group, sorted: from the kill to its first heartbeat answered elsewhere
	codes    map[string]int64
	unanswer int64
	clients  string // the outages as the fleet saw them (outageReport)
	outages  outageTimes
}

func (to takeover) String() string {
	retaken := ""
	if to.shards > 0 {
		retaken = fmt.Sprintf("its %d shards all owned by the others in etcd %v later; ", to.shards, to.taken.Round(time.Millisecond))
	}
	return fmt.Sprintf("kill -9 tenure-%d at %s (gone %v later): %sits %d groups served again from %v to %v later (median %v); heartbeat errors seen: %v, and %d without an answer",
		to.victim, to.killed.UTC().Format("15:04:05.000"), to.exited.Round(time.Millisecond), retaken, len(to.back), to.back[0].Round(time.Millisecond), to.back[len(to.back)-1].Round(time.Millisecond),
		to.back[len(to.back)/2].Round(time.Millisecond), to.codes, to.unanswer)
}

// killBusiest kills -9 the node that serves the most groups (with one
// leader, the leader) and waits until each of its groups is served by
// another node; it fails the benchmark if a group of another node moves.
func (sc *shardCheck) killBusiest(b *testing.B, ctx context.Context, name string) takeover {
	h, f := sc.h, sc.f
	before := sc.histories()
	byNode := make([][]*fleetGroup, len(h.nodes))
	for _, g := range f.groups {
		hist := before[g.name]
		n := hist[len(hist)-1].node
		byNode[n] = append(byNode[n], g)
	}
	victim := 0
	for i := range byNode {
		if len(byNode[i]) > len(byNode[victim]) {
			victim = i
		}
	}
	affected := byNode[victim]
	// Its shards, to time their take-over in etcd apart from what
	// follows.
	ids, err := h.nodeIDs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	owners, _, err := shardOwners(ctx, sc.cli)
	if err != nil {
		b.Fatal(err)
	}
	var lost []int
	for s, id := range owners {
		if id == ids[victim] {
			lost = append(lost, s)
		}
	}
	f.outages.reset()
	// The clock starts as the signal goes, not when Kill returns: Kill
	// waits for the process to be gone, which for a node holding 10,000
	// groups took up to a second, while the election TTL runs from the
	// signal (the lease is no longer renewed) and clients may see their
	// connections break at once.
	killed := time.Now()
	h.nodes[victim].Kill()
	exited := time.Since(killed)
	stopProfiles := profileTakeover(b, h, victim, killed)
	to := takeover{victim: victim, killed: killed, exited: exited, shards: len(lost)}
	waited := time.Now()
	testenv.Eventually(b, *benchTTL+5*time.Minute, "every group of the killed node to be served again", func() bool {
		if to.taken == 0 && len(lost) > 0 {
			if owners, _, err := shardOwners(ctx, sc.cli); err == nil && !slices.ContainsFunc(lost, func(s int) bool {
				id, ok := owners[s]
				return !ok || id == ids[victim]
			}) {
				to.taken = time.Since(killed)
			}
		}
		to.back = to.back[:0]
		for _, g := range affected {
			if last, ok := g.last(); ok && last.node != victim {
				to.back = append(to.back, last.at.Sub(killed))
			}
		}
		if testing.Verbose() && time.Since(waited) >= 10*time.Second {
			waited = time.Now()
			fmt.Fprintf(os.Stderr, "%s: %v after the kill, %d of %d groups served again; errors %v, %d requests without an answer\n",
				name, time.Since(killed).Round(time.Second), len(to.back), len(affected), f.errorCodes(), f.transport.Load())
		}
		return len(to.back) == len(affected)
	})
	stopProfiles()
	slices.Sort(to.back)
	moved := 0
	for _, g := range f.groups {
		if was := before[g.name]; was[len(was)-1].node != victim && !slices.Equal(g.history(), was) {
			moved++
		}
	}
	if moved > 0 {
		b.Errorf("the kill moved %d groups whose node lived", moved)
	}
	to.codes, to.unanswer = f.errorCodes(), f.transport.Load()
	to.outages = outageTimesOf(affected, killed)
	to.clients = f.outageReport(to.outages, killed)
	return to
}
