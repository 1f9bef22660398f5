//go:build unix

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/chaos/check"
)

// The names a run gives what it creates.
const (
	group        = "chaos"         // the workers' group
	offsetGroup  = "chaos-offsets" // the committers' group
	classicGroup = "chaos-classic" // the classic committers' group
	topic        = "work"
	storePrefix  = "/tenure/"     // tenure's default etcd store prefix
	fencePrefix  = "/chaos/fence" // the workers' etcd resource
)

// Result is what one run found.
type Result struct {
	Seed    uint64
	Control bool
	Dir     string
	// Schedule is the fault schedule drawn from the seed; Faults the
	// faults as carried out, with their real start and heal times.
	Schedule []Fault
	Faults   []check.Fault
	Report   *check.Report
	// Elapsed is the run's wall time, set-up and checking included.
	Elapsed time.Duration
}

// Passed reports whether the run kept every guarantee: for a control run,
// whether the checker caught it.
func (r *Result) Passed() bool {
	if r.Report == nil {
		return false
	}
	return r.Report.OK() != r.Control
}

// run is one run in progress.
type run struct {
	cfg      Config
	schedule []Fault
	fab      *fabric
	procs    map[string]*proc // by name: e0.., n0.., w0.., c0..
	etcd     []*proc
	nodes    []*proc
	workers  []*proc
	commits  []*proc
	// httpAddrs are the nodes' --http listeners (the forging variant).
	httpAddrs []string
	direct    *clientv3.Client // the runner's own etcd client, bypassing the fabric
	table     string           // the workers' PostgreSQL table
	events    *os.File

	mu         sync.Mutex
	done       []check.Fault
	healErr    error
	lastLeader string
	// gone are the nodes lost or frozen for good (the fail-over
	// variant), by name: true if frozen.
	gone map[string]bool
}

// Run carries out one seeded run in cfg.Dir and checks it. The error is
// about the run itself (a process that would not start, a folder that could
// not be written); what the checker found is in the Result's Report.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	began := time.Now()
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	// A folder left by another run would mix its logs into this one's
	// checks: its attempts against this run's rows.
	if ents, err := os.ReadDir(cfg.Dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("chaos: %s is not empty: a run needs a folder of its own", cfg.Dir)
	}
	for _, d := range []string{"logs", check.AttemptsDir, "offsets", "etcd"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	r := &run{
		cfg:      cfg,
		schedule: Schedule(cfg.Seed, cfg.shape()),
		fab:      newFabric(),
		procs:    map[string]*proc{},
		gone:     map[string]bool{},
		table:    fmt.Sprintf("chaos_%d_%d", cfg.Seed, time.Now().UnixNano()%1e9),
	}
	if err := writeJSON(filepath.Join(cfg.Dir, "schedule.json"), r.schedule); err != nil {
		return nil, err
	}
	var err error
	if r.events, err = os.Create(filepath.Join(cfg.Dir, "events.jsonl")); err != nil {
		return nil, err
	}
	defer r.events.Close()
	res := &Result{Seed: cfg.Seed, Control: cfg.control(), Dir: cfg.Dir, Schedule: r.schedule}
	in, err := r.execute(ctx)
	res.Faults = r.done
	// etcd's data (about 200 MB a run) is in history.jsonl by now, or
	// the run failed before: the folder keeps what a reader needs.
	os.RemoveAll(filepath.Join(cfg.Dir, "etcd"))
	if err != nil {
		return res, err
	}
	r.logf("checking")
	// A partition whose offsets porcupine cannot decide within 10 s (many
	// commits of unknown outcome, each open to the end of the run) is
	// reported undecided rather than holding the batch for minutes.
	opts := check.Options{OutDir: cfg.Dir, Slack: cfg.ElectionTTL + 2*cfg.HeartbeatInterval + time.Second,
		LinearizabilityTimeout: 10 * time.Second}
	rep, err := check.Check(in, opts)
	if err != nil {
		return res, fmt.Errorf("chaos: check: %w", err)
	}
	res.Report = rep
	f, err := os.Create(filepath.Join(cfg.Dir, "report.txt"))
	if err != nil {
		return res, err
	}
	defer f.Close()
	fmt.Fprintf(f, "seed %d%s: the fault schedule replays exactly from the seed; the timing inside the processes does not.\n\n", cfg.Seed, cfg.describe())
	if err := rep.WriteText(f); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// execute starts the processes, injects the schedule, stops everything and
// collects the checker's input.
func (r *run) execute(ctx context.Context) (*check.Input, error) {
	defer r.fab.close()
	defer r.stopAll()
	if err := r.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := r.startNodes(ctx); err != nil {
		return nil, err
	}
	if err := r.createTables(ctx); err != nil {
		return nil, err
	}
	defer r.dropTables()

	sctx, stopSampling := context.WithCancel(ctx)
	samples := make(chan []check.RevTime, 1)
	go func() { samples <- r.sampleRevisions(sctx) }()
	stopped := false
	stopSamples := func() []check.RevTime {
		if stopped {
			return nil
		}
		stopped = true
		stopSampling()
		return <-samples
	}
	defer stopSamples()

	if err := r.startClients(ctx); err != nil {
		return nil, err
	}
	// A fault that lands on a group still forming tests its joining: a
	// zombie that has not joined holds no write for the control run to
	// land, and check 10 judges every callback after the first fault.
	// The groups should have settled before it, whatever the warm-up;
	// the fail-over variant, which judges the consumers by their
	// callbacks, must have them settled. The others go on after a
	// minute, as runs did before they waited, and say so.
	if err := r.waitSettled(ctx, time.Minute); err != nil {
		if r.cfg.Failover || ctx.Err() != nil {
			return nil, err
		}
		r.logf("%v: going on", err)
		r.event(map[string]any{"unsettled": err.Error()})
	}
	start := time.Now()
	r.logf("seed %d: %d processes up; %d faults from %v to %v", r.cfg.Seed, len(r.procs), len(r.schedule), r.cfg.Warmup, r.cfg.Duration-r.cfg.Settle)

	fctx, cancelFaults := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, f := range r.schedule {
		wg.Go(func() {
			t := time.NewTimer(time.Until(start.Add(f.At)))
			defer t.Stop()
			select {
			case <-t.C:
				r.inject(fctx, i, f)
			case <-fctx.Done():
			}
		})
	}
	end := time.NewTimer(time.Until(start.Add(r.cfg.Duration)))
	select {
	case <-end.C:
	case <-ctx.Done():
	}
	end.Stop()
	cancelFaults()
	wg.Wait()
	r.fab.healAll()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	healErr := r.healErr
	r.mu.Unlock()
	if healErr != nil {
		return nil, healErr
	}

	// The observation ends here: what follows is the shutdown.
	revTimes := stopSamples()
	r.logf("stopping the clients")
	r.stopClients()
	r.logf("collecting the histories")
	in := &check.Input{RevTimes: revTimes}
	var err error
	t0 := time.Now()
	if in.History, err = r.dumpHistory(ctx); err != nil {
		return nil, err
	}
	r.logf("history: %d revisions in %v", len(in.History), time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if in.Rows, err = r.dumpRows(ctx); err != nil {
		return nil, err
	}
	r.logf("rows: %d in %v", len(in.Rows), time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if in.Offsets, in.Callbacks, err = r.mergeOffsets(); err != nil {
		return nil, err
	}
	r.logf("offsets: %d in %v", len(in.Offsets), time.Since(t0).Round(time.Millisecond))
	r.mu.Lock()
	faults := append([]check.Fault(nil), r.done...)
	r.mu.Unlock()
	in.Run = check.Run{
		Seed: int64(r.cfg.Seed), Group: group, Topic: topic, Partitions: r.cfg.Partitions, Prefix: storePrefix,
		SessionTimeout: r.cfg.SessionTimeout, RebalanceTimeout: r.cfg.RebalanceTimeout, Faults: faults,
		Unnoticed: r.cfg.Failover,
	}
	if r.cfg.Committers > 0 {
		in.Run.ConsumerGroups = append(in.Run.ConsumerGroups, offsetGroup)
	}
	if r.cfg.ClassicCommitters > 0 {
		in.Run.ConsumerGroups = append(in.Run.ConsumerGroups, classicGroup)
	}
	// Everything but the attempt logs, which the workers wrote there
	// themselves; then the folder is read back as the checker's input,
	// so that a kept folder checks the same way again.
	if err := writeJSON(filepath.Join(r.cfg.Dir, check.RunFile), in.Run); err != nil {
		return nil, err
	}
	for name, write := range map[string]func(io.Writer) error{
		check.RowsFile:      func(w io.Writer) error { return check.WriteJSONL(w, in.Rows) },
		check.HistoryFile:   func(w io.Writer) error { return check.WriteJSONL(w, in.History) },
		check.RevTimesFile:  func(w io.Writer) error { return check.WriteJSONL(w, in.RevTimes) },
		check.OffsetsFile:   func(w io.Writer) error { return check.WriteJSONL(w, in.Offsets) },
		check.CallbacksFile: func(w io.Writer) error { return check.WriteJSONL(w, in.Callbacks) },
	} {
		if err := writeFile(filepath.Join(r.cfg.Dir, name), write); err != nil {
			return nil, err
		}
	}
	return check.Load(r.cfg.Dir)
}

// failHeal records that a fault could not be healed: the run is void.
func (r *run) failHeal(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.healErr = errors.Join(r.healErr, err)
}

// logf writes a progress line.
func (r *run) logf(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "%s chaos: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// event appends a line to events.jsonl.
func (r *run) event(fields map[string]any) {
	fields["t"] = time.Now()
	b, _ := json.Marshal(fields)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events.Write(append(b, '\n'))
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeFile creates path and writes it with write, buffered.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	return errors.Join(err, f.Close())
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proxiedDSN is dsn with its host:port replaced by addr.
func proxiedDSN(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("chaos: the PostgreSQL DSN must be a URL (postgres://user@host:port/db): %q", dsn)
	}
	u.Host = addr
	return u.String(), nil
}

// pgHost is the host:port of a URL DSN.
func pgHost(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("chaos: the PostgreSQL DSN must be a URL (postgres://user@host:port/db)")
	}
	if !strings.Contains(u.Host, ":") {
		return u.Host + ":5432", nil
	}
	return u.Host, nil
}

var nopLogger = zap.NewNop()
