package tune

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/tenure-dev/tenure/sim"
)

// Goal is the figure the tuner minimises. The zero Goal is invalid.
type Goal uint8

// The goals.
const (
	_ Goal = iota
	// GoalUnowned minimises unowned partition-seconds per hour.
	GoalUnowned
	// GoalReassign minimises the time from a crash to full reassignment.
	GoalReassign
	// GoalHeartbeats minimises heartbeats per second (the coordinator's
	// load).
	GoalHeartbeats
	// GoalUnavailable minimises unowned plus stalled partition-seconds
	// per hour: the time partitions were not worked on, whether nobody
	// owned them or their owners were paused.
	GoalUnavailable
	goals
)

var goalNames = [...]string{GoalUnowned: "unowned", GoalReassign: "reassign", GoalHeartbeats: "heartbeats", GoalUnavailable: "unavailable"}

func (g Goal) String() string {
	if g > 0 && g < goals {
		return goalNames[g]
	}
	return fmt.Sprintf("Goal(%d)", uint8(g))
}

// ParseGoal parses a goal's name: unowned, unavailable, reassign or
// heartbeats.
func ParseGoal(s string) (Goal, error) {
	for g := GoalUnowned; g < goals; g++ {
		if goalNames[g] == s {
			return g, nil
		}
	}
	return 0, fmt.Errorf("tune: unknown goal %q (want unowned, unavailable, reassign or heartbeats)", s)
}

// Objective is what the tuner looks for: the candidate with the least
// Minimise among those that meet the constraints.
type Objective struct {
	Minimise Goal
	// MaxFalseExpulsions is the most false expulsions per member-day a
	// candidate may cause (mean over seeds); negative means no limit. At 0
	// (the default) no run may expel a live member, as with Kafka's
	// defaults.
	MaxFalseExpulsions float64
	// MaxDoubleOwned is the most double-owned partition-seconds per hour
	// a candidate may cause (mean over seeds); negative means no limit. At
	// 0 (the default) no run may let two members believe they own a
	// partition at once.
	MaxDoubleOwned float64
	// MaxHeartbeats is the most heartbeats per second the coordinator
	// may receive; 0 means no limit.
	MaxHeartbeats float64
}

// DefaultObjective minimises unowned partition-seconds with no false
// expulsion and no double ownership in any run: no worse than Kafka's
// defaults on either.
func DefaultObjective() Objective {
	return Objective{Minimise: GoalUnowned}
}

func (o Objective) String() string {
	s := "minimise " + o.Minimise.String()
	var with []string
	switch {
	case o.MaxFalseExpulsions == 0:
		with = append(with, "no false expulsions")
	case o.MaxFalseExpulsions > 0:
		with = append(with, fmt.Sprintf("at most %g false expulsions per member-day", o.MaxFalseExpulsions))
	}
	switch {
	case o.MaxDoubleOwned == 0:
		with = append(with, "no double ownership")
	case o.MaxDoubleOwned > 0:
		with = append(with, fmt.Sprintf("at most %g double-owned partition-seconds per hour", o.MaxDoubleOwned))
	}
	if o.MaxHeartbeats > 0 {
		with = append(with, fmt.Sprintf("at most %g heartbeats/s", o.MaxHeartbeats))
	}
	if len(with) > 0 {
		s += " with " + strings.Join(with, ", ")
	}
	return s
}

// Options configure a search.
type Options struct {
	// Scenarios is the mix every candidate runs; each counts equally.
	Scenarios []*sim.Scenario
	// Space is the grid to search (DefaultSpace if zero).
	Space Space
	// Objective is what to look for (DefaultObjective if zero).
	Objective Objective
	// ScreenSeeds is how many seeds every candidate runs in the first
	// stage (default 1); Seeds how many the finalists run in all (default
	// 8), for their confidence intervals.
	ScreenSeeds int
	Seeds       int
	// Finalists is how many candidates go to the second stage besides
	// the baselines (default 12): the best by the objective, then members
	// of the Pareto front up to twice as many.
	Finalists int
	// FirstSeed is the first seed (default 1); runs use consecutive
	// seeds, the same for every candidate.
	FirstSeed uint64
	// Parallel is how many runs go at once (default GOMAXPROCS). Each run
	// is single-threaded and deterministic, so the outcome does not
	// depend on it.
	Parallel int
	// Progress, if not nil, is called after every run with the runs done
	// and the runs planned so far (the total grows once, when the second
	// stage is planned). It is called from one goroutine at a time.
	Progress func(done, total int)
}

// Result is what a candidate achieved over the scenario mix. Each figure is
// a mean over seeds (of the mean over scenarios) with its 95 % confidence
// interval.
type Result struct {
	Candidate Candidate
	// Unowned is unowned partition-seconds per hour.
	Unowned Estimate
	// Unavailable is unowned plus stalled partition-seconds per hour
	// (stalled: every owner paused).
	Unavailable Estimate
	// FalseExpulsions is false expulsions per member-day (over all
	// scenarios of a seed).
	FalseExpulsions Estimate
	// Heartbeats is heartbeats per second.
	Heartbeats Estimate
	// Reassign is the time from a crash to full reassignment, in seconds
	// (the worst crash of each scenario that has crashes).
	Reassign Estimate
	// DoubleOwned is partition-seconds per hour during which two members
	// believed they owned a partition.
	DoubleOwned Estimate
	// UnfencedStale is stale writes per hour an unfenced resource would
	// have accepted.
	UnfencedStale Estimate
	// FencedAcceptedStale counts stale writes the fence accepted in any
	// run: it must be zero.
	FencedAcceptedStale int64
	// PerScenario breaks the main figures down by scenario.
	PerScenario []ScenarioResult
	Runs        int
	Errors      []string

	Feasible bool // meets the objective's constraints, and no run failed
	Finalist bool // ran every seed
	OnFront  bool // on the Pareto front of the finalists
	Baseline string
	// Equivalent lists the other candidates whose screening runs gave
	// exactly this one's figures: the settings in which they differ made
	// no difference to these scenarios, so they share this result. Set on the candidate that
	// represents them, the most conservative of the group (the largest
	// margin, then the longest rebalance timeout, then the shortest
	// initial delay).
	Equivalent []Candidate
	// SameAs is the representative of this candidate's group, or nil if
	// it is one.
	SameAs *Result
}

// ScenarioResult is a candidate's figures in one scenario.
type ScenarioResult struct {
	Scenario        string
	Unowned         Estimate
	FalseExpulsions Estimate
	Heartbeats      Estimate
}

// Outcome is the result of a search.
type Outcome struct {
	Scenarios []string
	Objective Objective
	Seeds     int
	// Results holds every candidate searched, in the order of the space,
	// then the baselines that are not in it.
	Results []*Result
	// Front is the Pareto front of the finalists (unowned, false
	// expulsions and heartbeats, all minimised), by unowned.
	Front []*Result
	// Best is the recommended candidate: the feasible finalist with the
	// least objective; nil if no finalist is feasible.
	Best *Result
	// Kafka and Default are the baselines: Kafka's and tenure's defaults.
	Kafka, Default *Result
	Pruned         []Pruned
	Runs           int
}

// run is one simulation's summary.
type run struct {
	perHour    float64 // unowned partition-s per hour
	stalled    float64 // stalled partition-s per hour
	falseExp   float64
	memberDays float64
	heartbeats float64
	reassign   float64
	crashes    bool
	double     float64
	unfenced   float64
	fencedBad  int64
	err        error
}

type job struct {
	cand, scen int
	seed       uint64
}

// Run searches opts.Space for the best settings for opts.Scenarios. It
// returns an error if the options are unusable or ctx is cancelled; runs
// that fail (a broken invariant in a core) are reported in the results,
// with their scenario and seed, not as an error.
func Run(ctx context.Context, opts Options) (*Outcome, error) {
	if len(opts.Scenarios) == 0 {
		return nil, errors.New("tune: no scenarios")
	}
	if opts.Space.Heartbeat == nil {
		opts.Space = DefaultSpace()
	}
	if err := opts.Space.Validate(); err != nil {
		return nil, err
	}
	if opts.Objective.Minimise == 0 {
		opts.Objective.Minimise = GoalUnowned
	}
	opts.ScreenSeeds = cmp.Or(opts.ScreenSeeds, 1)
	opts.Seeds = max(cmp.Or(opts.Seeds, 8), opts.ScreenSeeds)
	opts.Finalists = cmp.Or(opts.Finalists, 12)
	opts.FirstSeed = cmp.Or(opts.FirstSeed, 1)
	opts.Parallel = cmp.Or(opts.Parallel, runtime.GOMAXPROCS(0))

	valid, pruned := opts.Space.Candidates()
	out := &Outcome{Objective: opts.Objective, Seeds: opts.Seeds, Pruned: pruned}
	for _, sc := range opts.Scenarios {
		out.Scenarios = append(out.Scenarios, sc.Name)
	}
	cands := slices.Clone(valid)
	baseline := func(c Candidate) int {
		i := slices.Index(cands, c)
		if i < 0 {
			cands = append(cands, c)
			i = len(cands) - 1
		}
		return i
	}
	kafka := baseline(KafkaDefaults())
	tenure := baseline(TenureDefaults())

	nScen := len(opts.Scenarios)
	runs := make([][]run, len(cands)) // [cand][seed*nScen+scen]
	for i := range runs {
		runs[i] = make([]run, opts.Seeds*nScen)
	}
	ex := &executor{opts: opts, ctx: ctx}

	// Stage 1: every candidate on the screening seeds.
	var jobs []job
	for c := range cands {
		for s := range opts.ScreenSeeds {
			for sc := range nScen {
				jobs = append(jobs, job{c, sc, uint64(s)})
			}
		}
	}
	ex.total = len(jobs)
	if err := ex.run(jobs, cands, runs); err != nil {
		return nil, err
	}
	screened := opts.ScreenSeeds * nScen
	rep := groups(cands, runs, screened)
	results := make([]*Result, len(cands))
	for c := range cands {
		if rep[c] == c {
			results[c] = summarize(cands[c], runs[c][:screened], out.Scenarios, opts.Objective)
		}
	}

	// Stage 2: the finalists (one per group) on the remaining seeds.
	final := finalists(results, opts.Finalists, opts.Objective.Minimise, rep[kafka], rep[tenure])
	jobs = jobs[:0]
	for _, c := range final {
		for s := opts.ScreenSeeds; s < opts.Seeds; s++ {
			for sc := range nScen {
				jobs = append(jobs, job{c, sc, uint64(s)})
			}
		}
	}
	ex.total += len(jobs)
	if err := ex.run(jobs, cands, runs); err != nil {
		return nil, err
	}
	isFinal := map[int]bool{}
	for _, c := range final {
		isFinal[c] = true
		results[c] = summarize(cands[c], runs[c], out.Scenarios, opts.Objective)
		results[c].Finalist = true
	}
	// The members of a group share their representative's runs.
	for c := range cands {
		r := rep[c]
		if r == c {
			continue
		}
		n := screened
		if isFinal[r] {
			n = len(runs[r])
		}
		results[c] = summarize(cands[c], runs[r][:n], out.Scenarios, opts.Objective)
		results[c].Finalist = isFinal[r]
		results[c].SameAs = results[r]
		results[r].Equivalent = append(results[r].Equivalent, cands[c])
	}
	results[kafka].Baseline = "kafka"
	results[tenure].Baseline = "tenure"
	out.Results = results
	out.Kafka, out.Default = results[kafka], results[tenure]
	out.Runs = ex.done
	var fin []*Result
	for _, c := range final {
		fin = append(fin, results[c])
	}
	out.Front = paretoFront(fin)
	for _, r := range out.Front {
		r.OnFront = true
	}
	out.Best = best(fin, opts.Objective.Minimise)
	return out, nil
}

// groups finds the candidates whose screening runs gave identical figures
// (to the last bit, in every run) and returns, for each candidate, the index
// of its group's representative: the most conservative member (largest
// margin, then longest rebalance timeout, then shortest initial delay,
// then the first in the space). A candidate whose runs failed is its own
// group.
func groups(cands []Candidate, runs [][]run, screened int) []int {
	rep := make([]int, len(cands))
	bySig := map[string]int{}
	for c := range cands {
		rep[c] = c
		var sig strings.Builder
		failed := false
		for _, x := range runs[c][:screened] {
			if x.err != nil {
				failed = true
			}
			sig.WriteString(x.signature())
		}
		if failed {
			continue
		}
		r, ok := bySig[sig.String()]
		if !ok {
			bySig[sig.String()] = c
			continue
		}
		if conservative(cands[c], cands[r]) {
			bySig[sig.String()] = c
		}
	}
	for c := range cands {
		var sig strings.Builder
		for _, x := range runs[c][:screened] {
			sig.WriteString(x.signature())
		}
		if r, ok := bySig[sig.String()]; ok {
			rep[c] = r
		}
	}
	return rep
}

// conservative reports whether a is a more conservative choice than b
// among settings the simulation cannot tell apart.
func conservative(a, b Candidate) bool {
	ta, tb := a.Timing, b.Timing
	switch {
	case ta.KeepAlive != tb.KeepAlive:
		// A keepalive timeout off, or longer, is kinder to a live member
		// cut off for a while.
		return ta.KeepAlive == 0 || (tb.KeepAlive != 0 && ta.KeepAlive > tb.KeepAlive)
	case ta.ConnLossGrace != tb.ConnLossGrace:
		// A longer grace is kinder to a live member whose connection
		// dropped under it.
		return ta.ConnLossGrace > tb.ConnLossGrace
	case ta.Margin != tb.Margin:
		return ta.Margin > tb.Margin
	case ta.RebalanceTimeout != tb.RebalanceTimeout:
		return ta.RebalanceTimeout > tb.RebalanceTimeout
	case ta.InitialRebalanceDelay != tb.InitialRebalanceDelay:
		return ta.InitialRebalanceDelay < tb.InitialRebalanceDelay
	}
	return false
}

// executor runs jobs on a pool of goroutines and reports progress from the
// calling goroutine.
type executor struct {
	opts        Options
	ctx         context.Context
	done, total int
}

func (ex *executor) run(jobs []job, cands []Candidate, runs [][]run) error {
	if len(jobs) == 0 {
		return nil
	}
	nScen := len(ex.opts.Scenarios)
	next := make(chan int)
	finished := make(chan struct{}, len(jobs))
	var wg sync.WaitGroup
	for range min(ex.opts.Parallel, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				sc := ex.opts.Scenarios[j.scen].Clone()
				sc.Timing = cands[j.cand].Timing
				sc.Static = cands[j.cand].Static
				seed := ex.opts.FirstSeed + j.seed
				runs[j.cand][int(j.seed)*nScen+j.scen] = simulate(sc, seed)
				finished <- struct{}{}
			}
		}()
	}
	var err error
	go func() {
		defer close(next)
		for i := range jobs {
			select {
			case next <- i:
			case <-ex.ctx.Done():
				return
			}
		}
	}()
	for range jobs {
		select {
		case <-finished:
			ex.done++
			if ex.opts.Progress != nil {
				ex.opts.Progress(ex.done, ex.total)
			}
			continue
		case <-ex.ctx.Done():
			err = ex.ctx.Err()
		}
		break
	}
	wg.Wait()
	return err
}

// simulate runs one scenario and keeps what the tuner needs.
func simulate(sc *sim.Scenario, seed uint64) run {
	rep, err := sim.Run(sc, sim.Options{Seed: seed, TimelinePartition: -1})
	if err != nil {
		return run{err: fmt.Errorf("scenario %s seed %d: %w", sc.Name, seed, err)}
	}
	hours := rep.Duration / 3600
	return run{
		perHour:    rep.Availability.UnownedPartitionSeconds / hours,
		stalled:    rep.Availability.StalledPartitionSeconds / hours,
		falseExp:   float64(rep.Churn.FalseExpulsions),
		memberDays: rep.Churn.MemberDays,
		heartbeats: rep.Cost.HeartbeatsPerSecond,
		reassign:   rep.Availability.ReassignMax,
		crashes:    rep.Availability.Crashes > 0,
		double:     rep.Safety.DoubleOwnedPartitionSeconds / hours,
		unfenced:   float64(rep.Safety.UnfencedAcceptedStale) / hours,
		fencedBad:  rep.Safety.FencedAcceptedStale,
	}
}

// signature renders the run's figures exactly, to find candidates that
// made no difference.
func (x run) signature() string {
	return fmt.Sprintf("%x/%x/%x/%x/%x/%x/%x/%x/%d;", math.Float64bits(x.perHour), math.Float64bits(x.stalled), math.Float64bits(x.falseExp),
		math.Float64bits(x.memberDays), math.Float64bits(x.heartbeats), math.Float64bits(x.reassign),
		math.Float64bits(x.double), math.Float64bits(x.unfenced), x.fencedBad)
}

// summarize turns a candidate's runs (seed-major) into its result.
func summarize(c Candidate, runs []run, scenarios []string, obj Objective) *Result {
	nScen := len(scenarios)
	seeds := len(runs) / nScen
	r := &Result{Candidate: c, Runs: len(runs)}
	var unowned, unavail, fe, hb, reassign, double, unfenced []float64
	per := make([][3][]float64, nScen)
	for s := range seeds {
		var u, st, h, dbl, unf, feSum, days, re float64
		crashes, failed := 0, false
		for k := range nScen {
			x := runs[s*nScen+k]
			if x.err != nil {
				r.Errors = append(r.Errors, x.err.Error())
				failed = true
				continue
			}
			r.FencedAcceptedStale += x.fencedBad
			u += x.perHour
			st += x.stalled
			h += x.heartbeats
			dbl += x.double
			unf += x.unfenced
			feSum += x.falseExp
			days += x.memberDays
			if x.crashes {
				re += x.reassign
				crashes++
			}
			per[k][0] = append(per[k][0], x.perHour)
			if x.memberDays > 0 {
				per[k][1] = append(per[k][1], x.falseExp/x.memberDays)
			}
			per[k][2] = append(per[k][2], x.heartbeats)
		}
		if failed {
			continue
		}
		n := float64(nScen)
		unowned = append(unowned, u/n)
		unavail = append(unavail, (u+st)/n)
		hb = append(hb, h/n)
		double = append(double, dbl/n)
		unfenced = append(unfenced, unf/n)
		if days > 0 {
			fe = append(fe, feSum/days)
		}
		if crashes > 0 {
			reassign = append(reassign, re/float64(crashes))
		}
	}
	r.Unowned, r.Unavailable = estimate(unowned), estimate(unavail)
	r.FalseExpulsions, r.Heartbeats = estimate(fe), estimate(hb)
	r.Reassign, r.DoubleOwned, r.UnfencedStale = estimate(reassign), estimate(double), estimate(unfenced)
	for k, name := range scenarios {
		r.PerScenario = append(r.PerScenario, ScenarioResult{
			Scenario: name, Unowned: estimate(per[k][0]), FalseExpulsions: estimate(per[k][1]), Heartbeats: estimate(per[k][2]),
		})
	}
	r.Feasible = len(r.Errors) == 0 && r.FencedAcceptedStale == 0 && r.Unowned.N > 0 &&
		(obj.MaxFalseExpulsions < 0 || r.FalseExpulsions.Mean <= obj.MaxFalseExpulsions) &&
		(obj.MaxDoubleOwned < 0 || r.DoubleOwned.Mean <= obj.MaxDoubleOwned) &&
		(obj.MaxHeartbeats <= 0 || r.Heartbeats.Mean <= obj.MaxHeartbeats)
	return r
}

// score is the figure a goal minimises.
func score(r *Result, g Goal) float64 {
	switch g {
	case GoalReassign:
		if r.Reassign.N == 0 {
			return r.Unowned.Mean // no crash in the mix: fall back
		}
		return r.Reassign.Mean
	case GoalHeartbeats:
		return r.Heartbeats.Mean
	case GoalUnavailable:
		return r.Unavailable.Mean
	}
	return r.Unowned.Mean
}

// rank orders results by the goal, then by fewer heartbeats, then fewer
// false expulsions, then by the candidate's text (a total order).
func rank(g Goal) func(a, b *Result) int {
	return func(a, b *Result) int {
		return cmp.Or(
			cmp.Compare(score(a, g), score(b, g)),
			cmp.Compare(a.Heartbeats.Mean, b.Heartbeats.Mean),
			cmp.Compare(a.FalseExpulsions.Mean, b.FalseExpulsions.Mean),
			cmp.Compare(a.Candidate.String(), b.Candidate.String()),
		)
	}
}

// finalists picks the candidates for the second stage: the n best feasible
// ones by the goal, then members of the Pareto front up to 2n, and the
// baselines. It returns their indices in ascending order.
func finalists(results []*Result, n int, g Goal, baselines ...int) []int {
	index := make(map[*Result]int, len(results))
	var feasible, all []*Result
	for i, r := range results {
		if r == nil {
			continue // not a group's representative
		}
		index[r] = i
		all = append(all, r)
		if r.Feasible {
			feasible = append(feasible, r)
		}
	}
	slices.SortFunc(feasible, rank(g))
	pick := map[int]bool{}
	for _, r := range feasible[:min(n, len(feasible))] {
		pick[index[r]] = true
	}
	front := paretoFront(all)
	slices.SortFunc(front, rank(g))
	for _, r := range front {
		if len(pick) >= 2*n {
			break
		}
		pick[index[r]] = true
	}
	for _, b := range baselines {
		pick[b] = true
	}
	var out []int
	for i := range pick {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// dominates reports whether a is no worse than b in unowned, false
// expulsions and heartbeats, and better in one.
func dominates(a, b *Result) bool {
	x := [3]float64{a.Unowned.Mean, a.FalseExpulsions.Mean, a.Heartbeats.Mean}
	y := [3]float64{b.Unowned.Mean, b.FalseExpulsions.Mean, b.Heartbeats.Mean}
	better := false
	for i := range x {
		if x[i] > y[i] {
			return false
		}
		if x[i] < y[i] {
			better = true
		}
	}
	return better
}

// paretoFront returns the results that no other result dominates (among
// those whose runs all succeeded), sorted by unowned.
func paretoFront(rs []*Result) []*Result {
	var front []*Result
	for _, a := range rs {
		if len(a.Errors) > 0 || a.Unowned.N == 0 {
			continue
		}
		dominated := false
		for _, b := range rs {
			if b != a && len(b.Errors) == 0 && b.Unowned.N > 0 && dominates(b, a) {
				dominated = true
				break
			}
		}
		if !dominated {
			front = append(front, a)
		}
	}
	slices.SortFunc(front, rank(GoalUnowned))
	return front
}

// best returns the feasible result with the least goal, or nil.
func best(rs []*Result, g Goal) *Result {
	var feasible []*Result
	for _, r := range rs {
		if r.Feasible {
			feasible = append(feasible, r)
		}
	}
	if len(feasible) == 0 {
		return nil
	}
	slices.SortFunc(feasible, rank(g))
	return feasible[0]
}
