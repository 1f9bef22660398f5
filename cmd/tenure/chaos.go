//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/internal/chaos"
)

func chaosCommands() []*command { return []*command{chaosCommand(), chaosCommitterCommand()} }

// chaosCommand is `tenure chaos`: the chaos suite.
func chaosCommand() *command {
	return &command{
		name:    "chaos",
		summary: "run seeded chaos runs of real processes on loopback and check them",
		help:    chaosHelp,
		setup:   setupChaos,
	}
}

const chaosHelp = `Each run starts, on loopback, a three-member etcd cluster (--etcd-bin), three
tenure nodes (this binary, or --tenure-bin) forming an HA set on it, --workers
tenure worker processes writing fenced records to PostgreSQL and etcd, and
--committers stock kgo KIP-848 consumers committing offsets. Every client
reaches every server through a fault-injecting proxy of its own (toxiproxy).
A schedule drawn from the seed then kills (SIGKILL) and pauses (SIGSTOP)
workers, the leading tenure node, etcd members and committers, and slows,
cuts (both ways or one way), resets and partitions the network around a
worker, the leader or an etcd minority, up to a loss of etcd's quorum; the
run ends after a quiet --settle.

An independent checker then reads what the resources hold, the clients'
logs and the coordinator's history in etcd, and fails the run on any stale
write accepted, write owned by no one, acknowledged write or commit lost,
gap in a sequence, offsets history not linearizable, epoch or offset going
back, or partition left without an owner after the faults healed.

--runs N carries out seeds --seed, --seed+1, ...; --controls K runs the first
K of them again unfenced (the resources check no token): the checker must
catch every control run. A failing run keeps its folder under --dir (the
seed, schedule, histories, every process's log, report.txt) and prints the
command that replays its schedule; the timing inside the processes differs
from run to run. The table at the end aggregates the runs.

--forge runs the forging variant: the nodes sign their grants, every worker
verifies each token with the keys the nodes publish before its resources
write it, and one worker also writes under a forged token every
--work-interval (another partition's, a raised one, another member's, a
tampered signature, a key of its own, an invented unsigned one). The
checker fails the run on any forgery accepted and on any honest write
refused as unverified. Its control runs (--controls) verify nothing, so
the forger's invented tokens land and refuse the honest owners: the
checker must catch that.

--failover runs the fail-over variant, what stock clients must not notice:
the node coordinating a consumers' group killed and never restarted (its
port refuses from then on), another frozen (SIGSTOP) and never resumed, and
a fresh node joining on a new address. --classic-committers adds stock kgo
consumers of the classic protocol in a group of their own, --shards spreads
the groups over shards. The checker then also holds the stock consumers to
their own callbacks: no OnPartitionsRevoked or OnPartitionsLost after the
first fault, no partition held by two of them at once, no member expelled.

Needs PostgreSQL (--postgres-dsn) and an etcd server binary: in a checkout,
go build -o bin/etcd go.etcd.io/etcd/server/v3 (make chaos does).`

// chaosOptions are the flags of `tenure chaos`.
type chaosOptions struct {
	seed          uint64
	runs          int
	controls      int
	dir           string
	keep          bool
	tenureBin     string
	etcdBin       string
	postgresDSN   string
	duration      time.Duration
	warmup        time.Duration
	settle        time.Duration
	workers       int
	committers    int
	classic       int
	shards        int
	failover      bool
	session       time.Duration
	rebalance     time.Duration
	electionTTL   time.Duration
	workInterval  time.Duration
	forge         bool
	quiet         bool
	stdout        io.Writer
	replayCommand func(seed uint64, control bool) string
}

func setupChaos(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	d := chaos.DefaultConfig()
	o := &chaosOptions{}
	fs.Uint64Var(&o.seed, "seed", 0, "`seed` of the first run (default: drawn at random, and printed)")
	fs.IntVar(&o.runs, "runs", 1, "number of runs, with seeds --seed, --seed+1, ...")
	fs.IntVar(&o.controls, "controls", 1, "run the first `k` seeds again as control runs, unfenced: the checker must catch them")
	fs.StringVar(&o.dir, "dir", "chaos-runs", "`directory` of the runs' folders (seed-<n>, seed-<n>-control); a passing run's is removed unless --keep")
	fs.BoolVar(&o.keep, "keep", false, "keep the folders of passing runs too")
	fs.StringVar(&o.tenureBin, "tenure-bin", "", "tenure `binary` to test (default: this one)")
	fs.StringVar(&o.etcdBin, "etcd-bin", "etcd", "etcd server `binary` (a name is looked up in PATH)")
	fs.StringVar(&o.postgresDSN, "postgres-dsn", "", "PostgreSQL `dsn` URL the workers write to: postgres://user@host:port/db?sslmode=disable (required)")
	fs.DurationVar(&o.duration, "duration", d.Duration, "length of a run once its processes are up")
	fs.DurationVar(&o.warmup, "warmup", d.Warmup, "time without faults at the start of a run")
	fs.DurationVar(&o.settle, "settle", d.Settle, "time without faults at the end of a run; at least the session timeout + the rebalance timeout")
	fs.IntVar(&o.workers, "workers", d.Workers, "tenure worker processes")
	fs.IntVar(&o.committers, "committers", d.Committers, "kgo consumer processes committing offsets")
	fs.DurationVar(&o.session, "session-timeout", d.SessionTimeout, "the coordinator's KIP-848 session timeout")
	fs.DurationVar(&o.rebalance, "rebalance-timeout", d.RebalanceTimeout, "the workers' rebalance timeout")
	fs.DurationVar(&o.electionTTL, "election-ttl", d.ElectionTTL, "the HA set's election TTL, whole seconds")
	fs.DurationVar(&o.workInterval, "work-interval", d.WorkInterval, "time between two records of a partition")
	fs.BoolVar(&o.forge, "forge", false, "the forging variant: signed grants, verifying workers, and one worker forging tokens; its controls verify nothing")
	fs.IntVar(&o.classic, "classic-committers", 0, "kgo consumer processes of the classic protocol (cooperative-sticky) committing offsets in a group of their own")
	fs.IntVar(&o.shards, "shards", 1, "the tenure nodes' --shards (above 1: groups spread over shards, no leader)")
	fs.BoolVar(&o.failover, "failover", false, "the fail-over variant: the coordinator of a consumers' group killed for good, another frozen for good, a fresh node joining; the stock consumers must notice nothing (no revoke, no loss, no member expelled); no control runs")
	fs.BoolVar(&o.quiet, "quiet", false, "print only each run's verdict and the table, not every fault")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		if o.postgresDSN == "" {
			return usagef("--postgres-dsn is required")
		}
		if o.runs < 1 || o.controls < 0 {
			return usagef("--runs must be positive and --controls not negative")
		}
		if o.failover && (o.forge || isSet(fs, "controls") && o.controls > 0) {
			return usagef("--failover has no control runs (--controls 0) and no forging")
		}
		if o.failover {
			o.controls = 0
		}
		if !isSet(fs, "seed") {
			o.seed = rand.Uint64N(1 << 31)
		}
		o.stdout = os.Stdout
		o.replayCommand = func(seed uint64, control bool) string { return replayCommand(fs, seed, control) }
		return runChaos(ctx, o)
	}
}

// isSet reports whether the flag was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// replayCommand is the command line that replays one run: the flags given,
// with the run's seed.
func replayCommand(fs *flag.FlagSet, seed uint64, control bool) string {
	parts := []string{"tenure", "chaos", "--seed", strconv.FormatUint(seed, 10), "--runs", "1"}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "seed", "runs", "controls", "quiet":
			return
		}
		parts = append(parts, "--"+f.Name, f.Value.String())
	})
	if control {
		parts = append(parts, "--controls", "1")
	} else {
		parts = append(parts, "--controls", "0")
	}
	return strings.Join(parts, " ")
}

func runChaos(ctx context.Context, o *chaosOptions) error {
	tenureBin := o.tenureBin
	if tenureBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		tenureBin = exe
	}
	etcdBin, err := exec.LookPath(o.etcdBin)
	if err != nil {
		return fmt.Errorf("etcd server binary: %w (build one with: go build -o bin/etcd go.etcd.io/etcd/server/v3)", err)
	}
	dsn := o.postgresDSN
	var results []*chaos.Result
	failed := 0
	for i := range o.runs + o.controls {
		control := i >= o.runs
		seed := o.seed + uint64(i)
		if control {
			seed = o.seed + uint64(i-o.runs)
		}
		name := fmt.Sprintf("seed-%d", seed)
		if control {
			name += "-control"
		}
		dir, err := filepath.Abs(filepath.Join(o.dir, name))
		if err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		cfg := chaos.Config{
			Seed: seed, Dir: dir, Tenure: tenureBin, Etcd: etcdBin, PostgresDSN: dsn,
			Duration: o.duration, Warmup: o.warmup, Settle: o.settle,
			Workers: o.workers, Committers: o.committers, ClassicCommitters: o.classic, Shards: o.shards, Failover: o.failover,
			SessionTimeout: o.session, RebalanceTimeout: o.rebalance, ElectionTTL: o.electionTTL,
			WorkInterval: o.workInterval, Forge: o.forge,
			Unfenced: control && !o.forge, Unverified: control && o.forge,
		}
		if !o.quiet {
			cfg.Progress = o.stdout
		}
		kind := map[bool]string{true: " (control: unfenced)"}[control]
		if o.forge {
			kind = map[bool]string{true: " (forging; control: unverified)", false: " (forging)"}[control]
		}
		fmt.Fprintf(o.stdout, "== run %d/%d: seed %d%s\n", i+1, o.runs+o.controls, seed, kind)
		res, err := chaos.Run(ctx, cfg)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if res == nil {
			res = &chaos.Result{Seed: seed, Control: control, Dir: dir}
		}
		results = append(results, res)
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(o.stdout, "seed %d: the run could not be carried out: %v\n  folder: %s\n  replay: %s\n", seed, err, dir, o.replayCommand(seed, control))
		case !res.Passed():
			failed++
			what := "FAILED"
			if control {
				what = "control run NOT CAUGHT: the checker missed the unfenced writes"
				if o.forge {
					what = "control run NOT CAUGHT: the checker missed the forged writes"
				}
			}
			fmt.Fprintf(o.stdout, "seed %d: %s, %d violations (report.txt)\n  folder: %s\n  replay: %s\n", seed, what, len(res.Report.Violations), dir, o.replayCommand(seed, control))
			for j, v := range res.Report.Violations {
				if j == 5 {
					fmt.Fprintf(o.stdout, "  ...\n")
					break
				}
				fmt.Fprintf(o.stdout, "  %s\n", v)
			}
		default:
			verdict := "passed"
			if control {
				verdict = fmt.Sprintf("control run caught (%d violations: %s)", len(res.Report.Violations), chaos.ViolationKinds(res.Report.Violations))
			}
			fmt.Fprintf(o.stdout, "seed %d: %s in %v\n", seed, verdict, res.Elapsed.Round(time.Second))
			if !o.keep {
				os.RemoveAll(dir)
			}
		}
	}
	fmt.Fprintln(o.stdout)
	if err := chaos.WriteTable(o.stdout, results); err != nil {
		return err
	}
	if failed > 0 {
		return errors.New(strconv.Itoa(failed) + " of " + strconv.Itoa(len(results)) + " runs failed")
	}
	return nil
}
