package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/sim"
	"github.com/tenure-dev/tenure/sim/tune"
)

// tuneCommand is `tenure tune`: search timing settings by simulation.
func tuneCommand() *command {
	return &command{
		name:    "tune",
		summary: "recommend timing settings (session, heartbeat, margin, static membership) by simulating a scenario mix",
		help: `Every combination of the listed settings that the epoch timing rules accept
runs on each scenario of the mix; the most promising then run more seeds, for
95 % confidence intervals. The output is the Pareto front (unowned
partition-seconds, false expulsions per member-day, heartbeats per second),
the recommended settings as tenure serve flags and member.Config fields, and
a comparison with Kafka's and tenure's defaults on the same runs. The same
flags give the same report, whatever --parallel is.

The tables have a row per setting (* marks the recommendation, kafka and
tenure the baselines; a|b lists values that gave identical figures) and a
column per figure, each a mean over seeds of the mean over the scenarios,
± its 95 % confidence interval:

  heartbeat, session, rebalance, margin, grace, keepalive, membership
      the setting: heartbeat interval, session timeout, rebalance timeout,
      suspect margin (how long before its session could expire a member
      stops its claims), connection-loss grace (how long after a member's
      connection closes the coordinator expels it unless it hears from it;
      0: at the session timeout, as Kafka does), the coordinator's TCP
      keepalive timeout (tenure serve --conn-keepalive: a crashed or cut-off
      host's connection counts as closed once it has answered nothing for
      this long; 0: off), dynamic or static membership
  unowned p-s/h
      partition-seconds per hour of simulated time during which a partition
      had no owner (no live member held it in the Owned state): a partition
      without one for 3 s counts 3
  unowned+stalled p-s/h
      the same, plus the time during which every owner of a partition was
      paused (owned, but not worked on)
  false exp./member-day
      live members the coordinator expelled (paused or cut off for longer
      than the session, or silent for the grace after their connection
      dropped under them), per member and day of simulated time
  heartbeats/s
      heartbeats the coordinator handled per second: its load
  crash→reassigned s
      seconds from a crash until every partition the crashed member held
      had a working owner again (the worst crash of each scenario that
      has crashes)
  double-owned p-s/h
      partition-seconds per hour during which two members believed they
      owned the same partition: a member expelled during a long pause
      believes it until it wakes. The fence makes this harmless; without
      one, stale writes could land meanwhile.`,
		setup: setupTune,
	}
}

func setupTune(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	space, full := tune.QuickSpace(), tune.DefaultSpace()
	obj := tune.DefaultObjective()
	var sets setFlag
	var (
		scenarios = fs.String("scenarios", strings.Join(sim.TuningMix(), ","), "comma-separated scenario `list`: built-in names or files")
		duration  = fs.Duration("duration", 0, "simulated time of every run (overrides each scenario's run for=)")
		wide      = fs.Bool("full", false, fmt.Sprintf("search the full space (heartbeats %s; sessions %s; rebalance timeouts %s; margins %s; keepalives %s) with %d seeds and %d finalists, unless the flags for them say otherwise: about %s the runs of the default search",
			durations(full.Heartbeat), durations(full.Session), durations(full.Rebalance), durations(full.Margin), durations(full.KeepAlive), fullSeeds, fullFinalists, "ten times"))
		seeds       = fs.Int("seeds", 5, "seeds the finalists run, for confidence intervals")
		screen      = fs.Int("screen-seeds", 1, "seeds every candidate runs in the first stage")
		finalists   = fs.Int("finalists", 6, "candidates that go to the second stage besides the baselines (and up to as many more from the Pareto front)")
		parallel    = fs.Int("parallel", runtime.GOMAXPROCS(0), "runs at once (each is single-threaded; the outcome does not depend on it)")
		heartbeats  = fs.String("heartbeats", durations(space.Heartbeat), "heartbeat intervals to try (comma-separated `durations`)")
		sessions    = fs.String("sessions", durations(space.Session), "session timeouts to try")
		rebalances  = fs.String("rebalances", durations(space.Rebalance), "rebalance timeouts to try")
		delays      = fs.String("initial-delays", durations(space.InitialDelay), "initial rebalance delays to try (classic groups only: no effect on the simulated KIP-848 groups)")
		margins     = fs.String("margins", durations(space.Margin), "suspect margins to try")
		graces      = fs.String("graces", durations(space.Grace), "connection-loss graces to try (0: off, as in Kafka); dynamic members only")
		keepalives  = fs.String("keepalives", durations(space.KeepAlive), "coordinator TCP keepalive timeouts to try (0: off); with a grace only")
		static      = fs.String("static", "both", "static membership to try: both, true or false")
		drift       = fs.Float64("drift", space.MaxDrift, "clock drift members assume (fixed, not searched)")
		minimise    = fs.String("minimise", obj.Minimise.String(), "`goal` to minimise: unowned (partition-seconds), unavailable (unowned + stalled by pauses), reassign (crash to reassignment) or heartbeats")
		maxFalseExp = fs.Float64("max-false-expulsions", obj.MaxFalseExpulsions, "most false expulsions per member-day a recommendation may cause (0: none in any run, as with Kafka's defaults; negative: no limit)")
		maxDouble   = fs.Float64("max-double-owned", obj.MaxDoubleOwned, "most double-owned partition-seconds per hour a recommendation may cause (0: none in any run; negative: no limit)")
		maxHB       = fs.Float64("max-heartbeats", 0, "most heartbeats per second a recommendation may cost the coordinator (0: no limit)")
		plotPath    = fs.String("plot", "tune.svg", "draw the candidates and the Pareto front to `file` (.svg, .png or .pdf; empty: no plot)")
		out         = fs.String("out", "", "write every candidate's figures to `file` as CSV")
		progress    = fs.Bool("progress", true, "show a progress bar with an ETA on stderr")
	)
	fs.Var(&sets, "set", "change an argument of every scenario, as `command.argument=value` (members.n=32, network.loss=0.01); repeatable")
	return func(ctx context.Context, args []string) error {
		simulatorGC()
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		var err error
		if *wide {
			set := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			for name, val := range map[string]string{
				"heartbeats": durations(full.Heartbeat), "sessions": durations(full.Session), "rebalances": durations(full.Rebalance),
				"initial-delays": durations(full.InitialDelay), "margins": durations(full.Margin), "graces": durations(full.Grace),
				"keepalives": durations(full.KeepAlive), "seeds": strconv.Itoa(fullSeeds), "finalists": strconv.Itoa(fullFinalists),
			} {
				if !set[name] {
					_ = fs.Set(name, val)
				}
			}
		}
		for _, l := range []struct {
			into *[]time.Duration
			flag string
			val  string
		}{{&space.Heartbeat, "heartbeats", *heartbeats}, {&space.Session, "sessions", *sessions},
			{&space.Rebalance, "rebalances", *rebalances}, {&space.InitialDelay, "initial-delays", *delays},
			{&space.Margin, "margins", *margins}, {&space.Grace, "graces", *graces},
			{&space.KeepAlive, "keepalives", *keepalives}} {
			if *l.into, err = tune.ParseDurations(l.val); err != nil {
				return usagef("--%s: %s", l.flag, strings.TrimPrefix(err.Error(), "tune: "))
			}
		}
		switch *static {
		case "both":
			space.Static = []bool{false, true}
		case "true":
			space.Static = []bool{true}
		case "false":
			space.Static = []bool{false}
		default:
			return usagef("--static %q: want both, true or false", *static)
		}
		space.MaxDrift = *drift
		if obj.Minimise, err = tune.ParseGoal(*minimise); err != nil {
			return usagef("--minimise: %s", strings.TrimPrefix(err.Error(), "tune: "))
		}
		obj.MaxFalseExpulsions, obj.MaxDoubleOwned, obj.MaxHeartbeats = *maxFalseExp, *maxDouble, *maxHB
		if *seeds < 1 || *screen < 1 || *finalists < 1 || *parallel < 1 {
			return usagef("--seeds, --screen-seeds, --finalists and --parallel must be positive")
		}
		if *duration > 0 {
			sets = append(sets, "run.for="+duration.String())
		}
		var mix []*sim.Scenario
		for _, name := range strings.Split(*scenarios, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			sc, err := sim.LoadScenario(name)
			if err != nil {
				return usageError{err.Error()}
			}
			if err := applySets(sc, sets); err != nil {
				return err
			}
			mix = append(mix, sc)
		}
		if len(mix) == 0 {
			return usagef("--scenarios: no scenario")
		}

		opts := tune.Options{
			Scenarios: mix, Space: space, Objective: obj,
			Seeds: *seeds, ScreenSeeds: *screen, Finalists: *finalists, Parallel: *parallel,
		}
		var bar *progressBar
		if *progress {
			bar = newProgressBar(fs.Output())
			opts.Progress = bar.update
		}
		start := time.Now()
		outcome, err := tune.Run(ctx, opts)
		if bar != nil {
			bar.finish()
		}
		if err != nil {
			return err
		}
		// The report depends only on the flags; how long it took goes
		// with the progress bar, so that two reports can be compared.
		fmt.Fprintf(fs.Output(), "%d runs in %v.\n", outcome.Runs, time.Since(start).Round(100*time.Millisecond))
		w := reportOutput
		if err := outcome.WriteText(w); err != nil {
			return err
		}
		if *plotPath != "" {
			if err := outcome.Plot(*plotPath); err != nil {
				return err
			}
			fmt.Fprintf(w, "\nPlot written to %s.\n", *plotPath)
		}
		if *out != "" {
			if err := writeFile(*out, outcome.WriteCSV); err != nil {
				return err
			}
		}
		return nil
	}
}

// The seeds and finalists of a --full search.
const fullSeeds, fullFinalists = 8, 12

func durations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, ",")
}

// progressBar draws "[=====>    ] 1234/3456 runs  36%  ETA 1m10s" on a
// terminal, redrawn in place at most ten times a second; to anything else
// it writes a plain line every ten seconds.
type progressBar struct {
	w     io.Writer
	tty   bool
	start time.Time
	last  time.Time
	drawn bool
}

func newProgressBar(w io.Writer) *progressBar {
	b := &progressBar{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

func (b *progressBar) update(done, total int) {
	now := time.Now()
	every := 10 * time.Second
	if b.tty {
		every = 100 * time.Millisecond
	}
	if done < total && now.Sub(b.last) < every {
		return
	}
	b.last = now
	elapsed := now.Sub(b.start)
	eta := "?"
	if done > 0 {
		eta = (time.Duration(float64(elapsed) / float64(done) * float64(total-done))).Round(time.Second).String()
	}
	const width = 30
	filled := width * done / max(total, 1)
	bar := strings.Repeat("=", filled)
	if filled < width {
		bar += ">" + strings.Repeat(" ", width-filled-1)
	}
	line := fmt.Sprintf("[%s] %d/%d runs %3d%%  elapsed %v  ETA %s", bar, done, total, 100*done/max(total, 1),
		elapsed.Round(time.Second), eta)
	if b.tty {
		fmt.Fprintf(b.w, "\r%s\x1b[K", line)
		b.drawn = true
	} else {
		fmt.Fprintln(b.w, line)
	}
}

func (b *progressBar) finish() {
	if b.tty && b.drawn {
		fmt.Fprintln(b.w)
	}
}
