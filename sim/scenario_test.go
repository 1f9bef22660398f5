package sim_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tenure-dev/tenure/internal/ddtest"
	"github.com/tenure-dev/tenure/sim"
)

// TestScenarios runs the scripts in testdata/, in the spirit of CockroachDB's
// asim tests: a script loads a scenario, changes it, runs it over several
// seeds and asserts that figures of the reports lie in expected ranges.
// Each assertion prints "ok" when it holds and the reason when it does not,
// so a failing assertion shows as a diff; the ranges are the spec, so
// rewrite (-rewrite) only after reading what changed.
//
// Commands:
//
//	builtin name=<scenario>
//	    Loads a built-in scenario.
//	scenario name=<name>
//	<source>
//	    Parses the input as a scenario.
//	set <command.argument>=<value> ...
//	    Changes the loaded scenario as `tenure sim --set` does.
//	run seeds=<n> [first=<seed>]
//	    Runs the scenario once per seed (first, first+1, ...) and keeps the
//	    reports. Prints how many runs it made.
//	assert metric=<name> [stat=mean|min|max|sum|each] [lt=x] [le=x] [gt=x] [ge=x] [eq=x]
//	    Checks a figure (see sim.Report.Metrics) over the runs: the mean,
//	    min, max or sum of the seeds' values, or each value (the default).
//	    Prints "ok" or why it does not hold, naming the seeds.
//	print metric=<name>
//	    Prints the figure of each run; for exploring, not for committed
//	    scripts, whose figures may change with the cores.
func TestScenarios(t *testing.T) {
	ddtest.Walk(t, func(t *testing.T, path string) {
		var sc *sim.Scenario
		var reports []*sim.Report
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "builtin":
				var name string
				td.ScanArgs(t, "name", &name)
				var err error
				if sc, err = sim.Builtin(name); err != nil {
					return err.Error()
				}
				return ""
			case "scenario":
				var name string
				td.ScanArgs(t, "name", &name)
				var err error
				if sc, err = sim.ParseScenario(name, td.Input); err != nil {
					return err.Error()
				}
				return ""
			case "set":
				for _, a := range td.CmdArgs {
					if err := sc.Set(a.Key, strings.Join(a.Vals, ",")); err != nil {
						return err.Error()
					}
				}
				return ""
			case "run":
				var seeds int
				first := 1
				td.ScanArgs(t, "seeds", &seeds)
				td.MaybeScanArgs(t, "first", &first)
				reports = reports[:0]
				for s := first; s < first+seeds; s++ {
					rep, err := sim.Run(sc, sim.Options{Seed: uint64(s), CheckAliasing: true, TimelinePartition: -1})
					if err != nil {
						t.Fatalf("%s: seed %d: %v", td.Pos, s, err)
					}
					reports = append(reports, rep)
				}
				return fmt.Sprintf("%d runs", len(reports))
			case "assert":
				holds, reason := assertMetric(t, td, reports)
				if holds {
					return "ok"
				}
				return reason
			case "print":
				var name string
				td.ScanArgs(t, "metric", &name)
				var b strings.Builder
				for _, r := range reports {
					v, _ := r.Metric(name)
					fmt.Fprintf(&b, "seed %d: %s = %g\n", r.Seed, name, v)
				}
				return b.String()
			}
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			return ""
		})
	})
}

// assertMetric evaluates an assert command: (holds, reason), as asim's
// assertions do.
func assertMetric(t *testing.T, td *datadriven.TestData, reports []*sim.Report) (bool, string) {
	if len(reports) == 0 {
		t.Fatalf("%s: assert before run", td.Pos)
	}
	var name, stat string
	td.ScanArgs(t, "metric", &name)
	stat = "each"
	td.MaybeScanArgs(t, "stat", &stat)
	values := make([]float64, len(reports))
	for i, r := range reports {
		v, ok := r.Metric(name)
		if !ok {
			t.Fatalf("%s: no metric %q", td.Pos, name)
		}
		values[i] = v
	}
	type check struct {
		op   string
		bad  func(v, x float64) bool
		text string
	}
	checks := []check{
		{"lt", func(v, x float64) bool { return !(v < x) }, "<"},
		{"le", func(v, x float64) bool { return !(v <= x) }, "<="},
		{"gt", func(v, x float64) bool { return !(v > x) }, ">"},
		{"ge", func(v, x float64) bool { return !(v >= x) }, ">="},
		{"eq", func(v, x float64) bool { return v != x }, "="},
	}
	var agg float64
	switch stat {
	case "each":
	case "mean", "sum":
		for _, v := range values {
			agg += v
		}
		if stat == "mean" {
			agg /= float64(len(values))
		}
	case "min":
		agg = math.Inf(1)
		for _, v := range values {
			agg = math.Min(agg, v)
		}
	case "max":
		agg = math.Inf(-1)
		for _, v := range values {
			agg = math.Max(agg, v)
		}
	default:
		t.Fatalf("%s: unknown stat %q", td.Pos, stat)
	}
	var reasons []string
	for _, c := range checks {
		var s string
		if !td.MaybeScanArgs(t, c.op, &s) {
			continue
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", td.Pos, c.op, s, err)
		}
		if stat != "each" {
			if c.bad(agg, x) {
				reasons = append(reasons, fmt.Sprintf("%s of %s over %d seeds is %g, want %s %g", stat, name, len(values), agg, c.text, x))
			}
			continue
		}
		for i, v := range values {
			if c.bad(v, x) {
				reasons = append(reasons, fmt.Sprintf("seed %d: %s is %g, want %s %g", reports[i].Seed, name, v, c.text, x))
			}
		}
	}
	if len(reasons) > 0 {
		return false, "failed: " + strings.Join(reasons, "; ")
	}
	return true, ""
}
