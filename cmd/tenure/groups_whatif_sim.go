package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/sim"
	"github.com/tenure-dev/tenure/sim/tune"
)

// whatIfAt is when the simulated change happens: long after the simulated
// group, whose members all start within its first heartbeat interval, has
// settled.
const whatIfAt = time.Minute

// simGroup is the group as the simulator runs it: its live member count,
// topics and assignor, with static membership if every member has an
// instance ID. Every simulated member subscribes to every topic.
type simGroup struct {
	members  int
	static   bool
	assignor string
	topics   []assignor.Topic
}

// source renders the group, the timing, the actions and the run's end in
// the scenario language (sim.ParseScenario). Nothing goes wrong in it but
// the actions: no pauses, no loss, no work (availability follows the
// members' claims, so work would change nothing but the run's cost).
func (g simGroup) source(t sim.Timing, actions []string, end time.Duration) string {
	var b strings.Builder
	// Members start within one heartbeat interval, so that their
	// heartbeats are not in step: a change then meets them at a random
	// phase, as it meets a live group, and the seeds average over it.
	fmt.Fprintf(&b, "members n=%d static=%v assignor=%s start=uniform(min=0s,max=%v)\n", g.members, g.static, g.assignor, t.HeartbeatInterval)
	for _, tp := range g.topics {
		fmt.Fprintf(&b, "topic name=%s partitions=%d\n", tp.Name, tp.Partitions)
	}
	fmt.Fprintf(&b, "timing %s\n", t)
	for _, a := range actions {
		b.WriteString(a + "\n")
	}
	fmt.Fprintf(&b, "run for=%v\n", end)
	return b.String()
}

// end is how long a run lasts: past the change, a session timeout (twice,
// for a crash noticed late), a rebalance timeout for revocations, and a
// few heartbeats for the new owners to hear of their partitions.
func whatIfEnd(t sim.Timing) time.Duration {
	return whatIfAt + 2*t.SessionTimeout + t.RebalanceTimeout + 10*t.HeartbeatInterval + 10*time.Second
}

// simOutcome is what one change cost in the simulation: on each seed, the
// run with the change less the same run (same seed) without it.
type simOutcome struct {
	// Event is "leave", "crash" or "join".
	Event string `json:"event"`
	// Timing is "current" or "proposed".
	Timing string `json:"timing"`
	// Actions are the scenario lines that make the change.
	Actions []string `json:"actions"`
	// The figures' mean, least and greatest value over the seeds.
	UnownedPartitionSeconds spread `json:"unowned_partition_s"`
	AffectedPartitions      spread `json:"affected_partitions"`
	Moves                   spread `json:"moves"`
	// ReassignSeconds is null but for crashes.
	ReassignSeconds *spread  `json:"reassign_s"`
	Runs            []simRun `json:"runs"`
}

// simRun is what the change cost in the run of one seed.
type simRun struct {
	Seed uint64 `json:"seed"`
	// UnownedPartitionSeconds is the time, summed over partitions, during
	// which a partition that had an owner had no working owner.
	UnownedPartitionSeconds float64 `json:"unowned_partition_s"`
	// AffectedPartitions counts the partitions that went without an owner
	// for a while (the simulator's incidents).
	AffectedPartitions int `json:"affected_partitions"`
	// Moves counts the partitions the coordinator moved.
	Moves int `json:"moves"`
	// ReassignSeconds is the time from a crash until every partition it
	// left without an owner had one again; null but for crashes.
	ReassignSeconds *float64 `json:"reassign_s"`
}

// spread is a figure's mean, least and greatest value over seeds.
type spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	s := spread{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		s.Mean += x / float64(len(xs))
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	return s
}

// simRunner runs a group's scenarios and keeps the runs without a change,
// which every change of the same timing and seed is compared with.
type simRunner struct {
	group     simGroup
	baselines map[sim.Timing]map[uint64]*sim.Report
}

func newSimRunner(g simGroup) *simRunner {
	return &simRunner{group: g, baselines: map[sim.Timing]map[uint64]*sim.Report{}}
}

func (r *simRunner) run(name string, t sim.Timing, actions []string, end time.Duration, seed uint64) (*sim.Report, error) {
	sc, err := sim.ParseScenario(name, r.group.source(t, actions, end))
	if err != nil {
		return nil, err
	}
	return sim.Run(sc, sim.Options{Seed: seed, TimelinePartition: -1})
}

// baseline returns the run of the group without a change, after checking
// that the simulated group had settled before the change would happen:
// the run stopped at the change measures what the whole run measures.
func (r *simRunner) baseline(t sim.Timing, seed uint64) (*sim.Report, error) {
	if rep, ok := r.baselines[t][seed]; ok {
		return rep, nil
	}
	rep, err := r.run("what-if-baseline", t, nil, whatIfEnd(t), seed)
	if err != nil {
		return nil, err
	}
	early, err := r.run("what-if-baseline", t, nil, whatIfAt, seed)
	if err != nil {
		return nil, err
	}
	if a, b := early.Availability, rep.Availability; a.UnownedPartitionSeconds != b.UnownedPartitionSeconds || a.Incidents != b.Incidents {
		return nil, fmt.Errorf("the simulated group had not settled %v after it started (seed %d): %d incidents then, %d at the end",
			whatIfAt, seed, a.Incidents, b.Incidents)
	}
	if r.baselines[t] == nil {
		r.baselines[t] = map[uint64]*sim.Report{}
	}
	r.baselines[t][seed] = rep
	return rep, nil
}

// newest returns the names of the k newest simulated members, the ones
// the scenario language's scale-in takes: m(n-k+1) to mn.
func (g simGroup) newest(k int) []string {
	var names []string
	for i := g.members - k + 1; i <= g.members; i++ {
		names = append(names, "m"+strconv.Itoa(i))
	}
	return names
}

// matchSeeds returns the first n seeds from first on in whose runs the k
// newest members hold want partitions between them when the change
// happens, trying at most maxTried seeds; it returns fewer if fewer match.
//
// A seed decides when each simulated member starts, so who joins when,
// and so who holds how many partitions. The members that leave in the
// simulation must hold what the live ones hold, or the simulation answers
// another question; and scale-in, the scenario language's graceful leave,
// takes the newest members. A run that crashes them at the change and ends
// right after counts their partitions as the incidents still open.
func (r *simRunner) matchSeeds(t sim.Timing, first uint64, n, k, want, maxTried int) (seeds []uint64, tried int, err error) {
	var crashes []string
	for _, m := range r.group.newest(k) {
		crashes = append(crashes, fmt.Sprintf("crash member=%s at=%v host=true", m, whatIfAt))
	}
	for seed := first; len(seeds) < n && tried < maxTried; seed++ {
		tried++
		rep, err := r.run("what-if-probe", t, crashes, whatIfAt+time.Millisecond, seed)
		if err != nil {
			return nil, tried, err
		}
		if rep.Availability.OpenAtEnd == want {
			seeds = append(seeds, seed)
		}
	}
	return seeds, tried, nil
}

// measure runs the change on each seed and returns its cost.
func (r *simRunner) measure(event, timing string, t sim.Timing, actions []string, seeds []uint64) (simOutcome, error) {
	out := simOutcome{Event: event, Timing: timing, Actions: actions, Runs: []simRun{}}
	var unowned, affected, moves, reassign []float64
	for _, seed := range seeds {
		base, err := r.baseline(t, seed)
		if err != nil {
			return simOutcome{}, err
		}
		rep, err := r.run("what-if-"+event, t, actions, whatIfEnd(t), seed)
		if err != nil {
			return simOutcome{}, err
		}
		a, b := rep.Availability, base.Availability
		if a.OpenAtEnd > b.OpenAtEnd || a.NotReassigned > 0 {
			return simOutcome{}, fmt.Errorf("simulated %s (seed %d): %d partitions still had no owner when the run ended, %v after the change",
				event, seed, a.OpenAtEnd-b.OpenAtEnd, whatIfEnd(t)-whatIfAt)
		}
		run := simRun{
			Seed:                    seed,
			UnownedPartitionSeconds: a.UnownedPartitionSeconds - b.UnownedPartitionSeconds,
			AffectedPartitions:      a.Incidents - b.Incidents,
			Moves:                   int(rep.Churn.Moves - base.Churn.Moves),
		}
		unowned = append(unowned, run.UnownedPartitionSeconds)
		affected = append(affected, float64(run.AffectedPartitions))
		moves = append(moves, float64(run.Moves))
		if a.Crashes > 0 {
			s := a.ReassignMax
			run.ReassignSeconds = &s
			reassign = append(reassign, s)
		}
		out.Runs = append(out.Runs, run)
	}
	out.UnownedPartitionSeconds, out.AffectedPartitions, out.Moves = spreadOf(unowned), spreadOf(affected), spreadOf(moves)
	if len(reassign) > 0 {
		s := spreadOf(reassign)
		out.ReassignSeconds = &s
	}
	return out, nil
}

// riskReport is what `tenure tune` reports of the current and the proposed
// timing, on its scenario mix resized to the group.
type riskReport struct {
	// Scenarios are tune's scenario mix, each with the group's member
	// count, partition count and assignor.
	Scenarios []string    `json:"scenarios"`
	Seeds     []uint64    `json:"seeds"`
	Current   riskFigures `json:"current"`
	Proposed  riskFigures `json:"proposed"`
}

// riskFigures are a tune.Result's figures.
type riskFigures struct {
	UnownedPerHour     estimate `json:"unowned_partition_s_per_hour"`
	UnavailablePerHour estimate `json:"unavailable_partition_s_per_hour"`
	FalseExpulsions    estimate `json:"false_expulsions_per_member_day"`
	HeartbeatsPerSec   estimate `json:"heartbeats_per_s"`
	// ReassignSeconds is null if no scenario crashed a member (a group
	// smaller than the crash scenario's crashed members).
	ReassignSeconds      *estimate `json:"reassign_s"`
	DoubleOwnedPerHour   estimate  `json:"double_owned_partition_s_per_hour"`
	UnfencedStalePerHour estimate  `json:"unfenced_stale_writes_per_hour"`
	// MeetsObjective says whether tune's default objective accepts the
	// timing: no run failed, expelled a live member or let two members
	// own a partition at once.
	MeetsObjective bool     `json:"meets_tune_objective"`
	Errors         []string `json:"errors"`
}

// estimate is a tune.Estimate: a mean over seeds with its 95 % confidence
// interval.
type estimate struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"ci_low"`
	Hi   float64 `json:"ci_high"`
	N    int     `json:"n"`
}

func estimateOf(e tune.Estimate) estimate { return estimate{e.Mean, e.Lo, e.Hi, e.N} }

func figuresOf(r *tune.Result) riskFigures {
	f := riskFigures{
		UnownedPerHour: estimateOf(r.Unowned), UnavailablePerHour: estimateOf(r.Unavailable),
		FalseExpulsions: estimateOf(r.FalseExpulsions), HeartbeatsPerSec: estimateOf(r.Heartbeats),
		DoubleOwnedPerHour: estimateOf(r.DoubleOwned), UnfencedStalePerHour: estimateOf(r.UnfencedStale),
		MeetsObjective: r.Feasible, Errors: slices.Clone(r.Errors),
	}
	if f.Errors == nil {
		f.Errors = []string{}
	}
	if r.Reassign.N > 0 {
		e := estimateOf(r.Reassign)
		f.ReassignSeconds = &e
	}
	return f
}

// risk runs tune's scenario mix, resized to the group (and to duration,
// unless zero), with the current and the proposed timing, through tune.Run
// (which adds its baselines, Kafka's and tenure's defaults, to the same
// runs).
func (g simGroup) risk(ctx context.Context, current, proposed sim.Timing, seeds []uint64, duration time.Duration) (*riskReport, error) {
	total := 0
	for _, t := range g.topics {
		total += int(t.Partitions)
	}
	var mix []*sim.Scenario
	for _, name := range sim.TuningMix() {
		sc, err := sim.Builtin(name)
		if err != nil {
			return nil, err
		}
		sets := [][2]string{{"members.n", fmt.Sprint(g.members)}, {"topic.partitions", fmt.Sprint(total)}, {"members.assignor", g.assignor}}
		if duration > 0 {
			sets = append(sets, [2]string{"run.for", duration.String()})
		}
		for _, kv := range sets {
			if err := sc.Set(kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
		mix = append(mix, sc)
	}
	space := timingSpace(current, g.static)
	for _, t := range []sim.Timing{proposed} {
		space.Heartbeat = sortedUnique(append(space.Heartbeat, t.HeartbeatInterval))
		space.Session = sortedUnique(append(space.Session, t.SessionTimeout))
	}
	out, err := tune.Run(ctx, tune.Options{
		Scenarios: mix, Space: space,
		Seeds: len(seeds), ScreenSeeds: len(seeds), FirstSeed: seeds[0],
		Parallel: runtime.GOMAXPROCS(0),
	})
	if err != nil {
		return nil, err
	}
	find := func(t sim.Timing) (*tune.Result, error) {
		c := tune.Candidate{Timing: t, Static: g.static}
		for _, r := range out.Results {
			if r.Candidate == c {
				return r, nil
			}
		}
		return nil, fmt.Errorf("tune did not run %s", c)
	}
	rep := &riskReport{Scenarios: out.Scenarios, Seeds: seeds}
	cur, err := find(current)
	if err != nil {
		return nil, err
	}
	prop, err := find(proposed)
	if err != nil {
		return nil, err
	}
	rep.Current, rep.Proposed = figuresOf(cur), figuresOf(prop)
	return rep, nil
}

// timingSpace is the tune space of the one timing t.
func timingSpace(t sim.Timing, static bool) tune.Space {
	return tune.Space{
		Heartbeat:    []time.Duration{t.HeartbeatInterval},
		Session:      []time.Duration{t.SessionTimeout},
		Rebalance:    []time.Duration{t.RebalanceTimeout},
		InitialDelay: []time.Duration{t.InitialRebalanceDelay},
		Margin:       []time.Duration{t.Margin},
		Grace:        []time.Duration{t.ConnLossGrace},
		KeepAlive:    []time.Duration{t.KeepAlive},
		Static:       []bool{static},
		MaxDrift:     t.MaxDrift,
	}
}

// checkTiming applies the rules tune prunes its candidates with (package
// epoch's, then member.Join's): nil if t is safe.
func checkTiming(t sim.Timing, static bool) error {
	if _, pruned := timingSpace(t, static).Candidates(); len(pruned) > 0 {
		return fmt.Errorf("%s", pruned[0].Reason)
	}
	return nil
}

func sortedUnique(ds []time.Duration) []time.Duration {
	slices.Sort(ds)
	return slices.Compact(ds)
}
