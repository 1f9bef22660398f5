package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tenure-dev/tenure/sim"
)

// simCommand is `tenure sim`: one deterministic simulation of a scenario.
func simCommand() *command {
	return &command{
		name:    "sim",
		summary: "simulate a scenario (pauses, crashes, deploys, a bad network) against the real coordinator and member cores",
		help: `A scenario is a text file, one command per line (see --show for a built-in one):

  members n=16 static=false start=uniform(min=0s,max=2s)
  topic name=work partitions=64
  timing heartbeat=1s session=10s rebalance=30s initial-delay=3s margin=200ms drift=0.01
  network delay=lognormal(median=2ms,p99=20ms) loss=0.001 dup=0.0001 reorder=0.01
  pauses every=exp(mean=10m) length=pareto(p99=2s,max=20s)
  crash member=3 at=60s restart=5s
  rolling-restart at=2m surge=1 every=10s restart=5s
  scale-out at=5m n=4
  cut at=3m nodes=(m1,m2) heal=20s
  work every=100ms
  run for=10m

The same scenario and seed give the same run, event for event (the report's
trace hash). The report shows availability, safety (stale writes with and
without fencing), churn and cost; a fence that accepts a stale write is a
bug, and the command then fails.`,
		setup: setupSim,
	}
}

// reportOutput is where sim and tune write their reports (tests replace
// it); progress and errors go to the flag set's output, stderr.
var reportOutput io.Writer = os.Stdout

// setFlag collects repeated --set key=value flags.
type setFlag []string

func (s *setFlag) String() string { return strings.Join(*s, " ") }

func (s *setFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want command.argument=value, as in timing.session=10s")
	}
	*s = append(*s, v)
	return nil
}

// applySets applies --set flags to a scenario.
func applySets(sc *sim.Scenario, sets []string) error {
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		if err := sc.Set(k, v); err != nil {
			return usageError{err.Error()}
		}
	}
	return nil
}

func setupSim(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	var sets setFlag
	var (
		scenario  = fs.String("scenario", "steady", "built-in scenario `name` ("+strings.Join(sim.Builtins(), ", ")+") or scenario file")
		seed      = fs.Uint64("seed", 1, "`seed` of the run: the same scenario and seed give the same run")
		duration  = fs.Duration("duration", 0, "simulated time to run (overrides the scenario's run for=)")
		partition = fs.Int("partition", 0, "partition whose ownership timeline the report shows, counting all topics' partitions in order (-1: none)")
		out       = fs.String("out", "", "write the report to `prefix`.json and prefix.csv, and the timeline to prefix-timeline.csv")
		trace     = fs.String("trace", "", "write the event trace, one line per event, to `file` (- for stdout)")
		show      = fs.Bool("show", false, "print the scenario (after --set) instead of running it")
		list      = fs.Bool("list", false, "list the built-in scenarios and exit")
		cpu       = fs.Bool("measure-cpu", false, "measure the CPU time of the coordinator core's calls (does not change the run)")
		profile   = fs.String("cpuprofile", "", "write a CPU profile of the run to `file` (go tool pprof reads it; does not change the run)")
	)
	fs.Var(&sets, "set", "change a scenario argument, as `command.argument=value` (timing.session=20s, members.n=32, network.loss=0.01); repeatable")
	return func(ctx context.Context, args []string) error {
		simulatorGC()
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		stdout := reportOutput
		if *list {
			for _, name := range sim.Builtins() {
				src, _ := sim.BuiltinSource(name)
				fmt.Fprintf(stdout, "%-16s %s\n", name, summaryOf(src))
			}
			return nil
		}
		sc, err := sim.LoadScenario(*scenario)
		if err != nil {
			return usageError{err.Error()}
		}
		if *duration > 0 {
			sets = append(sets, "run.for="+duration.String())
		}
		if err := applySets(sc, sets); err != nil {
			return err
		}
		if *show {
			_, err := io.WriteString(stdout, sc.Source())
			return err
		}
		total := 0
		for _, t := range sc.Topics {
			total += int(t.Partitions)
		}
		if *partition < -1 || *partition >= total {
			return usagef("--partition %d: the scenario has partitions 0 to %d", *partition, total-1)
		}
		opts := sim.Options{Seed: *seed, TimelinePartition: *partition, MeasureCPU: *cpu}
		if *trace != "" {
			w := stdout
			if *trace != "-" {
				f, err := os.Create(*trace)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			opts.Trace = w
		}
		stopProfile, err := startCPUProfile(*profile)
		if err != nil {
			return err
		}
		rep, err := sim.Run(sc, opts)
		stopProfile()
		if err != nil {
			return err
		}
		if err := rep.WriteText(stdout); err != nil {
			return err
		}
		if *out != "" {
			if err := writeSimOut(*out, rep); err != nil {
				return err
			}
		}
		if n := rep.Safety.FencedAcceptedStale; n > 0 {
			return fmt.Errorf("safety violated: the fence accepted %d stale writes (scenario %s, seed %d)", n, sc.Name, *seed)
		}
		return nil
	}
}

// summaryOf returns the first sentence of a scenario's leading comment,
// without its "name:" prefix.
func summaryOf(src string) string {
	var words []string
	for _, line := range strings.Split(src, "\n") {
		s, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
		if !ok {
			break
		}
		words = append(words, strings.Fields(s)...)
	}
	s := strings.Join(words, " ")
	if _, rest, ok := strings.Cut(s, ": "); ok {
		s = rest
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return s
}

// writeSimOut writes the report as JSON and CSV and the timeline as CSV.
func writeSimOut(prefix string, rep *sim.Report) error {
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{prefix + ".json", rep.WriteJSON},
		{prefix + ".csv", rep.WriteCSV},
		{prefix + "-timeline.csv", rep.WriteTimelineCSV},
	}
	for _, f := range files {
		if err := writeFile(f.name, f.write); err != nil {
			return err
		}
	}
	return nil
}

// writeFile creates path and writes it with write, reporting the first
// error, the close's included.
func writeFile(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, f.Close())
	}()
	return write(f)
}
