package tune

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/sim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestCandidatesPruneUnsafeTimings(t *testing.T) {
	valid, pruned := DefaultSpace().Candidates()
	if len(valid) == 0 || len(pruned) == 0 {
		t.Fatalf("%d valid, %d pruned; want some of both", len(valid), len(pruned))
	}
	for _, c := range valid {
		if err := c.Timing.Epoch().Validate(); err != nil {
			t.Fatalf("%s is a candidate but unsafe: %v", c, err)
		}
	}
	byMember := 0
	for _, p := range pruned {
		if !strings.Contains(p.Reason, epoch.ErrUnsafeTiming.Error()) {
			t.Fatalf("%s was pruned for %q", p.Candidate, p.Reason)
		}
		if p.Candidate.Timing.Epoch().Validate() == nil {
			// Not an epoch rule: member.Join's, with the interval.
			byMember++
			mc := p.Candidate.machineConfig()
			if mc.ValidateInterval(p.Candidate.Timing.HeartbeatInterval) == nil {
				t.Fatalf("%s was pruned for %q, but both rules accept it", p.Candidate, p.Reason)
			}
		}
	}
	if byMember == 0 {
		t.Fatal("member.Join's interval rule pruned nothing in the default space")
	}
	// 1 s heartbeats with a 3 s session leave a suspect deadline of 1.97 s
	// with a 1 s margin: below two heartbeats.
	bad := Candidate{Timing: sim.Timing{HeartbeatInterval: time.Second, SessionTimeout: 3 * time.Second,
		RebalanceTimeout: 15 * time.Second, InitialRebalanceDelay: 3 * time.Second, Margin: time.Second, MaxDrift: 0.01}}
	if slices.Contains(valid, bad) {
		t.Fatalf("%s should have been pruned", bad)
	}
}

func TestEstimate(t *testing.T) {
	e := estimate([]float64{1, 2, 3, 4})
	// mean 2.5, sd 1.29099, t(3) = 3.182: half-width 2.054
	if e.Mean != 2.5 || e.N != 4 || e.Hi-e.Mean < 2.05 || e.Hi-e.Mean > 2.06 || e.Mean-e.Lo < 2.05 {
		t.Fatalf("estimate = %+v", e)
	}
	if one := estimate([]float64{7}); one.Lo != 7 || one.Hi != 7 {
		t.Fatalf("one seed: %+v", one)
	}
	if got := estimate(nil).String(); got != "-" {
		t.Fatalf("no data renders %q", got)
	}
}

func res(unowned, fe, hb float64) *Result {
	return &Result{Unowned: Estimate{Mean: unowned, N: 1}, FalseExpulsions: Estimate{Mean: fe, N: 1}, Heartbeats: Estimate{Mean: hb, N: 1}}
}

func TestParetoFront(t *testing.T) {
	a := res(100, 0, 10) // on the front
	b := res(50, 2, 10)  // on the front: better availability
	c := res(120, 0, 10) // dominated by a
	d := res(100, 0, 5)  // dominates a
	e := res(40, 5, 100) // on the front: best availability
	f := res(50, 2, 10)  // equal to b: neither dominates
	g := res(100, 0, 5)  // equal to d
	bad := res(1, 0, 1)  // failed runs never count
	bad.Errors = []string{"x"}
	front := paretoFront([]*Result{a, b, c, d, e, f, g, bad})
	want := []*Result{e, b, f, d, g}
	if len(front) != len(want) {
		t.Fatalf("front has %d results, want %d", len(front), len(want))
	}
	for _, r := range want {
		if !slices.Contains(front, r) {
			t.Fatalf("front lacks %+v", r)
		}
	}
	for i := 1; i < len(front); i++ {
		if front[i-1].Unowned.Mean > front[i].Unowned.Mean {
			t.Fatal("front not sorted by unowned")
		}
	}
}

// smallMix is a fast mix for tests: short runs of a few members.
func smallMix(t *testing.T) []*sim.Scenario {
	var mix []*sim.Scenario
	for _, name := range []string{"crash", "gc-pauses"} {
		sc, err := sim.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range [][2]string{{"members.n", "4"}, {"topic.partitions", "8"}, {"run.for", "3m"}, {"work.every", "500ms"}} {
			if err := sc.Set(kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
		mix = append(mix, sc)
	}
	// crash names m7, which a 4-member fleet lacks: it crashes nobody.
	return mix
}

func smallSpace() Space {
	return Space{
		Heartbeat:    []time.Duration{500 * time.Millisecond, 2 * time.Second},
		Session:      []time.Duration{3 * time.Second, 10 * time.Second},
		Rebalance:    []time.Duration{30 * time.Second},
		InitialDelay: []time.Duration{0, 3 * time.Second},
		Margin:       []time.Duration{200 * time.Millisecond},
		Static:       []bool{false},
		MaxDrift:     0.01,
	}
}

// TestRunIsIndependentOfParallelism: the outcome is the same whatever the
// number of goroutines, and progress is reported in order.
func TestRunIsIndependentOfParallelism(t *testing.T) {
	var texts [2]string
	for i, par := range []int{1, 3} {
		var calls []int
		total := 0
		out, err := Run(context.Background(), Options{
			Scenarios: smallMix(t), Space: smallSpace(), Seeds: 3, Finalists: 2, Parallel: par,
			Progress: func(done, tot int) { calls = append(calls, done); total = tot },
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(calls) || calls[len(calls)-1] != total || total != out.Runs {
			t.Fatalf("progress went %v of %d for %d runs", calls, total, out.Runs)
		}
		var buf bytes.Buffer
		if err := out.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		texts[i] = buf.String()
	}
	if texts[0] != texts[1] {
		t.Fatalf("1 and 3 goroutines disagree:\n%s\n---\n%s", texts[0], texts[1])
	}
}

func TestRunOutcome(t *testing.T) {
	out, err := Run(context.Background(), Options{Scenarios: smallMix(t), Space: smallSpace(), Seeds: 3, Finalists: 2, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	// 2 heartbeats × 2 sessions × 2 delays, less 2 s heartbeats with a
	// 3 s session: 6 candidates, plus the two baselines.
	if len(out.Results) != 8 || len(out.Pruned) != 2 {
		t.Fatalf("%d results, %d pruned; want 8 and 2", len(out.Results), len(out.Pruned))
	}
	if out.Kafka == nil || out.Default == nil || !out.Kafka.Finalist || out.Kafka.Unowned.N != 3 {
		t.Fatalf("baselines: kafka %+v default %+v", out.Kafka, out.Default)
	}
	if out.Best == nil || !out.Best.Feasible || !out.Best.OnFront {
		t.Fatalf("best %+v", out.Best)
	}
	// The initial rebalance delay does not touch KIP-848 groups: each
	// candidate with a 3 s delay gives exactly the figures of its twin
	// with none, so both belong to the same group.
	byCand := map[Candidate]*Result{}
	for _, r := range out.Results {
		byCand[r.Candidate] = r
	}
	rep := func(r *Result) *Result {
		if r.SameAs != nil {
			return r.SameAs
		}
		return r
	}
	twins := 0
	for c, r := range byCand {
		if c.Timing.InitialRebalanceDelay != 3*time.Second || r.Baseline != "" {
			continue
		}
		c.Timing.InitialRebalanceDelay = 0
		twin, ok := byCand[c]
		if !ok {
			continue
		}
		twins++
		if rep(r) != rep(twin) || r.Unowned != twin.Unowned {
			t.Fatalf("%s and %s differ only in the initial delay but not in figures", r.Candidate, twin.Candidate)
		}
	}
	if twins != 3 {
		t.Fatalf("checked %d twins, want 3", twins)
	}
	for _, r := range out.Results {
		if r.FencedAcceptedStale != 0 || len(r.Errors) > 0 {
			t.Fatalf("%s: %d stale writes accepted by the fence, errors %v", r.Candidate, r.FencedAcceptedStale, r.Errors)
		}
	}
	var text, csv bytes.Buffer
	if err := out.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PARETO FRONT", "tenure serve --consumer-session-timeout=", "member.Config{", "kafka defaults"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text lacks %q:\n%s", want, text.String())
		}
	}
	if err := out.WriteCSV(&csv); err != nil || strings.Count(csv.String(), "\n") != 9 {
		t.Fatalf("CSV (%v):\n%s", err, csv.String())
	}
	path := filepath.Join(t.TempDir(), "front.svg")
	if err := out.Plot(path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Fatalf("plot: %v", err)
	}
	if err := out.Plot(filepath.Join(t.TempDir(), "front.gif")); err == nil {
		t.Fatal("a .gif plot was accepted")
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{Scenarios: smallMix(t), Space: smallSpace(), Seeds: 2}); err == nil {
		t.Fatal("a cancelled search succeeded")
	}
}

func TestFlags(t *testing.T) {
	c := Candidate{Static: true, Timing: sim.Timing{HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 20 * time.Second,
		RebalanceTimeout: time.Minute, InitialRebalanceDelay: 3 * time.Second, Margin: 1500 * time.Millisecond, MaxDrift: 0.01}}
	if got, want := Flags(c), "--consumer-session-timeout=20s --consumer-heartbeat-interval=500ms --initial-rebalance-delay=3s --conn-loss-grace=0s"; got != want {
		t.Fatalf("Flags = %q, want %q", got, want)
	}
	m := MemberOptions(c)
	for _, want := range []string{"SessionTimeout:   20 * time.Second", "RebalanceTimeout: 1 * time.Minute",
		"SuspectMargin:    1500 * time.Millisecond", "RequestTimeout:   500 * time.Millisecond", "InstanceID:"} {
		if !strings.Contains(m, want) {
			t.Fatalf("member options lack %q:\n%s", want, m)
		}
	}
}

// TestKeepAliveCandidates checks that the keepalive is tried only where it
// can act: with a grace, dynamic members, and below the session less the
// grace; and that Flags names it.
func TestKeepAliveCandidates(t *testing.T) {
	s := Space{
		Heartbeat: []time.Duration{time.Second}, Session: []time.Duration{10 * time.Second, 30 * time.Second},
		Rebalance: []time.Duration{time.Minute}, InitialDelay: []time.Duration{3 * time.Second}, Margin: []time.Duration{time.Second},
		Grace: []time.Duration{0, time.Second}, KeepAlive: []time.Duration{0, 5 * time.Second, 20 * time.Second},
		Static: []bool{false, true}, MaxDrift: 0.01,
	}
	valid, _ := s.Candidates()
	var got []string
	for _, c := range valid {
		if c.Timing.KeepAlive > 0 {
			got = append(got, c.String())
		}
	}
	want := []string{
		"hb=1s session=10s rebalance=1m0s delay=3s margin=1s grace=1s keepalive=5s dynamic",
		"hb=1s session=30s rebalance=1m0s delay=3s margin=1s grace=1s keepalive=5s dynamic",
		"hb=1s session=30s rebalance=1m0s delay=3s margin=1s grace=1s keepalive=20s dynamic",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("candidates with a keepalive:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c := valid[slices.IndexFunc(valid, func(c Candidate) bool { return c.Timing.KeepAlive == 20*time.Second })]
	if f := Flags(c); !strings.HasSuffix(f, " --conn-loss-grace=1s --conn-keepalive=20s") {
		t.Fatalf("Flags = %q", f)
	}
}

// TestObjectiveLimits checks the constraints: 0 allows none, a negative
// limit none at all, a positive one up to it.
func TestObjectiveLimits(t *testing.T) {
	mix := []string{"a"}
	r := func(falseExp, double float64) []run {
		return []run{{perHour: 1, falseExp: falseExp, memberDays: 1, double: double}}
	}
	for _, tc := range []struct {
		name          string
		obj           Objective
		falseExp, dbl float64
		feasible      bool
	}{
		{"default, clean", DefaultObjective(), 0, 0, true},
		{"default, a false expulsion", DefaultObjective(), 1, 0, false},
		{"default, double ownership", DefaultObjective(), 0, 0.01, false},
		{"no limits", Objective{Minimise: GoalUnowned, MaxFalseExpulsions: -1, MaxDoubleOwned: -1}, 5, 3, true},
		{"at most 1", Objective{Minimise: GoalUnowned, MaxFalseExpulsions: 1, MaxDoubleOwned: -1}, 1, 3, true},
		{"over 1", Objective{Minimise: GoalUnowned, MaxFalseExpulsions: 1, MaxDoubleOwned: -1}, 2, 0, false},
	} {
		got := summarize(Candidate{}, r(tc.falseExp, tc.dbl), mix, tc.obj).Feasible
		if got != tc.feasible {
			t.Errorf("%s: feasible = %v, want %v", tc.name, got, tc.feasible)
		}
	}
	if s := DefaultObjective().String(); s != "minimise unowned with no false expulsions, no double ownership" {
		t.Errorf("DefaultObjective = %q", s)
	}
}
