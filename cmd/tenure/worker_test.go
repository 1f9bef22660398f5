package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/workload"
	"github.com/tenure-dev/tenure/member"
)

func TestWorkerHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"worker", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	help := stdout.String()
	for _, want := range []string{
		"--brokers", "TENURE_BROKERS", "--group", "--topic", "--instance-id", "--session-timeout",
		"TENURE_SESSION_TIMEOUT", "--rebalance-timeout", "--suspect-margin", "--log-level", "--resource",
		"--etcd-endpoints", "--etcd-prefix", "--postgres-dsn", "--postgres-table", "--work-interval",
		"--commit-every", "TENURE_COMMIT_EVERY", "--pause-after", "--pause-for", "TENURE_PAUSE_FOR",
		"--write-timeout", "--attempt-log", "TENURE_ATTEMPT_LOG", "--unfenced", "TEST/DEMO ONLY",
		// The demo and the approximation of the pause are explained.
		"write rejected: stale token", "higher", "SIGSTOP", "consumer-session-timeout",
		"postgres,etcd", "internal/workload", "status 0",
		// One meaning per variable: the worker's topic is its own.
		"[TENURE_WORKER_TOPIC]", "TENURE_TOPIC is tenure serve's",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	var list bytes.Buffer
	run(context.Background(), []string{"help"}, &list, &stderr)
	if !strings.Contains(list.String(), "worker ") || !strings.Contains(list.String(), "groups ") {
		t.Errorf("tenure help does not list worker and groups:\n%s", list.String())
	}
}

// TestWorkerFlags checks the defaults and the precedence of the command
// line over the environment over the defaults.
func TestWorkerFlags(t *testing.T) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	o := addWorkerFlags(fs)
	if err := fs.Parse([]string{"--group", "g", "--pause-after", "5s", "--pause-for", "15s"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TENURE_GROUP": "ignored", "TENURE_COMMIT_EVERY": "3", "TENURE_RESOURCE": "postgres"}
	if err := applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	want := workerOptions{
		brokers: "127.0.0.1:9092", group: "g", topic: "work", sessionTimeout: 20 * time.Second,
		rebalanceTimeout: time.Minute, logLevel: "info", resource: "postgres", admin: "http://127.0.0.1:9644",
		postgresTable: "tenure_records", workInterval: 200 * time.Millisecond, commitEvery: 3,
		writeTimeout: 5 * time.Second, pauseAfter: 5 * time.Second, pauseFor: 15 * time.Second, joinTimeout: 30 * time.Second,
		verifyRefresh: 30 * time.Second,
		security:      o.security, // TestClientSecurityFlags checks them
	}
	if fmt.Sprintf("%+v", *o) != fmt.Sprintf("%+v", want) {
		t.Errorf("options\n%+v\nwant\n%+v", *o, want)
	}
}

func TestWorkerRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"pause without length", []string{"--pause-after", "5s"}, nil, "go together"},
		{"length without pause", []string{"--pause-for", "5s"}, nil, "go together"},
		{"unknown resource", []string{"--resource", "redis"}, nil, "unknown resource"},
		{"unknown resource in a list", []string{"--resource", "etcd,redis"}, nil, "unknown resource \"redis\""},
		{"resource twice", []string{"--resource", "etcd, etcd"}, nil, "names etcd twice"},
		{"no resource", []string{"--resource", ","}, nil, "--resource is empty"},
		{"postgres without dsn in a list", []string{"--resource", "etcd,postgres"}, nil, "--postgres-dsn"},
		{"zero write timeout", []string{"--write-timeout", "0s"}, nil, "--write-timeout"},
		{"SASL without a user", []string{"--sasl-mechanism", "SCRAM-SHA-512"}, nil, "needs --sasl-user"},
		{"postgres without dsn", []string{"--resource", "postgres"}, nil, "--postgres-dsn"},
		{"bad table", []string{"--resource", "postgres", "--postgres-dsn", "postgres://x", "--postgres-table", "a-b"}, nil, "invalid table name"},
		{"no endpoints", []string{"--etcd-endpoints", " , ", "--admin", ""}, nil, "--etcd-endpoints"},
		{"serve's topic form", []string{"--topic", "work:64"}, nil, `--topic "work:64" is not a topic name`},
		{"no brokers", []string{"--brokers", ""}, nil, "--brokers"},
		{"zero interval", []string{"--work-interval", "0s"}, nil, "--work-interval"},
		{"negative commits", nil, map[string]string{"TENURE_COMMIT_EVERY": "-1"}, "--commit-every"},
		{"zero session", []string{"--session-timeout", "0s"}, nil, "--session-timeout"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "log level"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
		{"malformed flag", []string{"--pause-for", "soon"}, nil, "invalid value"},
		{"verify unfenced", []string{"--verify-keys", "http://x", "--unfenced"}, nil, "do not go together"},
		{"zero key refresh", []string{"--verify-keys", "http://x", "--verify-keys-refresh", "0s"}, nil, "--verify-keys-refresh"},
		{"negative forging", []string{"--forge-every", "-1s"}, nil, "--forge-every"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"worker"}, tc.args...), &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}

// The pause test's timing: the coordinator's session and heartbeat
// interval, when A pauses and for how long. The pause outlives A's session
// by 4 s: B needs a heartbeat interval after the expiry to get A's
// partitions and admit its tokens, which it does well within that.
const (
	pauseSession  = 2 * time.Second
	pauseInterval = 300 * time.Millisecond
	pauseAfter    = 2 * time.Second
	pauseFor      = 6 * time.Second
	pauseParts    = 8
)

// TestWorkerPause is the pause scenario end to end, in-process, against
// real resources: two workers share 8 partitions; A freezes for longer
// than its session; B takes A's partitions over with higher tokens; A
// wakes and the writes it had decided on before the pause are rejected
// by the resource; A rejoins and works again. Each worker keeps an
// attempt log, which is checked against what the resources hold, as the
// chaos suite's checker does.
//
// The unfenced run is the control: the same scenario without fencing,
// where A's late writes land after B's and the resource shows a
// partition's tokens going down.
func TestWorkerPause(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		etcd := testenv.EtcdForTest(t)
		prefix := "pause-test"
		testPause(t, false, []string{"--resource", "etcd", "--etcd-endpoints", etcd.Endpoints[0], "--etcd-prefix", prefix},
			[]namedResource{{"etcd", workload.NewEtcdResource(etcd.Client(t), prefix)}})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn, db := testenv.PostgresForTest(t)
		table := pauseTable(t, db, "single")
		reader, err := workload.NewSQLResource(db, table)
		if err != nil {
			t.Fatal(err)
		}
		testPause(t, false, []string{"--resource", "postgres", "--postgres-dsn", dsn, "--postgres-table", table},
			[]namedResource{{"postgres", reader}})
	})
	t.Run("postgres,etcd", func(t *testing.T) {
		t.Parallel()
		dsn, db := testenv.PostgresForTest(t)
		table := pauseTable(t, db, "fanout")
		etcd := testenv.EtcdForTest(t)
		prefix := "pause-test-fanout"
		pg, err := workload.NewSQLResource(db, table)
		if err != nil {
			t.Fatal(err)
		}
		testPause(t, false, []string{"--resource", "postgres,etcd", "--postgres-dsn", dsn, "--postgres-table", table,
			"--etcd-endpoints", etcd.Endpoints[0], "--etcd-prefix", prefix},
			[]namedResource{{"postgres", pg}, {"etcd", workload.NewEtcdResource(etcd.Client(t), prefix)}})
	})
	t.Run("unfenced", func(t *testing.T) {
		t.Parallel()
		etcd := testenv.EtcdForTest(t)
		prefix := "pause-test-unfenced"
		testPause(t, true, []string{"--resource", "etcd", "--etcd-endpoints", etcd.Endpoints[0], "--etcd-prefix", prefix, "--unfenced"},
			[]namedResource{{"etcd", workload.NewEtcdResource(etcd.Client(t), prefix)}})
	})
}

// pauseCommitEvery is the pause test's --commit-every.
const pauseCommitEvery = 5

// committed reports whether a worker that made writes has committed: one
// of its claims had a write accepted after the pauseCommitEvery-th, which
// comes after the commit that write started.
func committed(writes []workload.Write) bool {
	type claim struct {
		p     epoch.Partition
		token epoch.Token
	}
	accepted := make(map[claim]int)
	for _, wr := range writes {
		if wr.Err != nil {
			continue
		}
		c := claim{wr.Partition, wr.Token}
		if accepted[c]++; accepted[c] > pauseCommitEvery {
			return true
		}
	}
	return false
}

// namedResource is a reader of one resource the workers write to, under
// the name the attempt log gives it.
type namedResource struct {
	name string
	r    workload.Resource
}

// pauseTable names a records table for one pause test, dropped (with its
// tokens table) when the test ends.
func pauseTable(t *testing.T, db *sql.DB, which string) string {
	table := fmt.Sprintf("worker_pause_test_%s_%d", which, os.Getpid())
	t.Cleanup(func() {
		for _, tb := range []string{table, table + "_tokens"} {
			if _, err := db.ExecContext(context.Background(), `DROP TABLE IF EXISTS "`+tb+`"`); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return table
}

// testWorker is one in-process `tenure worker`.
type testWorker struct {
	name   string
	logs   syncBuffer
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	writes  []workload.Write
	session *member.Session
}

// startWorker runs `tenure worker` with args (after the flags common to
// the test) until stop, and returns once it joined.
func startWorker(t *testing.T, name string, args []string) *testWorker {
	t.Helper()
	w := &testWorker{name: name, done: make(chan error, 1)}
	o := newWorkerFlags(t, args)
	joined := make(chan struct{})
	o.joined = func(s *member.Session) {
		w.mu.Lock()
		w.session = s
		w.mu.Unlock()
		close(joined)
	}
	o.observe = func(wr workload.Write) {
		w.mu.Lock()
		w.writes = append(w.writes, wr)
		w.mu.Unlock()
	}
	log, err := newLogger(&w.logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- runWorker(ctx, o, log) }()
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			t.Logf("worker %s's log:\n%s", name, w.logs.String())
		}
	})
	select {
	case <-joined:
	case err := <-w.done:
		w.done <- err
		t.Fatalf("worker %s ended before joining: %v", name, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("worker %s did not join", name)
	}
	return w
}

// stop stops the worker (as SIGTERM does) and checks it drained cleanly.
// Calling it again does nothing.
func (w *testWorker) stop(t *testing.T) {
	w.cancel()
	select {
	case err, ok := <-w.done:
		if ok {
			close(w.done)
			if err != nil {
				t.Errorf("worker %s: %v", w.name, err)
			}
		}
	case <-time.After(20 * time.Second):
		t.Errorf("worker %s did not stop", w.name)
	}
}

func (w *testWorker) outcomes() []workload.Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]workload.Write(nil), w.writes...)
}

func (w *testWorker) memberID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.session.MemberID()
}

func testPause(t *testing.T, unfenced bool, resourceArgs []string, readers []namedResource) {
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, pauseSession, pauseInterval, pauseParts))
	dir := t.TempDir()
	common := append([]string{
		"--brokers", broker, "--group", "pause", "--topic", "work",
		"--session-timeout", pauseSession.String(), "--rebalance-timeout", "2s",
		"--work-interval", "50ms", "--commit-every", strconv.Itoa(pauseCommitEvery),
	}, resourceArgs...)
	a := startWorker(t, "a", append(common, "--instance-id", "a", "--attempt-log", filepath.Join(dir, "a.jsonl"),
		"--pause-after", pauseAfter.String(), "--pause-for", pauseFor.String()))
	b := startWorker(t, "b", append(common, "--instance-id", "b", "--attempt-log", filepath.Join(dir, "b.jsonl")))

	// Run until A has woken, been fenced, rejoined and written again, and
	// each worker has committed (checkAttempts wants a commit line of
	// each; a starved worker may not have reached one by then).
	pollUntil(t, pauseAfter+pauseFor+15*time.Second, "A working again after its pause", func() string {
		var wokeAt time.Time
		woke := false
		for _, wr := range a.outcomes() {
			switch {
			case wr.Held && wokeAt.IsZero():
				wokeAt = wr.At
			case !wokeAt.IsZero() && !wr.Held && wr.Err == nil && wr.At.After(wokeAt):
				woke = true
			}
		}
		switch {
		case wokeAt.IsZero():
			return "A has made no write held by its pause"
		case !woke:
			return "A has not written since it woke"
		case !committed(a.outcomes()):
			return "A has not committed"
		case !committed(b.outcomes()):
			return "B has not committed"
		}
		return ""
	})
	b.stop(t)
	a.stop(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored := make(map[string][]workload.Stored)
	for _, nr := range readers {
		recs, err := nr.r.Records(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stored[nr.name] = recs
	}
	// The last resource of a fan-out holds exactly the records the
	// fan-out accepted: it is written last, and only if all before it
	// accepted.
	last := stored[readers[len(readers)-1].name]
	wantLogs := []string{"pause begins", "pause ends", "claim started", "claim stopped"}
	if unfenced {
		checkUnfenced(t, a.outcomes(), b.outcomes(), last)
		wantLogs = append(wantLogs, "UNFENCED")
	} else {
		checkPause(t, a.outcomes(), b.outcomes(), last)
		wantLogs = append(wantLogs, "write rejected: stale token")
	}
	for _, want := range wantLogs {
		if !strings.Contains(a.logs.String(), want) {
			t.Errorf("A's log lacks %q", want)
		}
	}
	checkAttempts(t, unfenced, stored, map[*testWorker]string{
		a: filepath.Join(dir, "a.jsonl"),
		b: filepath.Join(dir, "b.jsonl"),
	})
}

// checkUnfenced checks the control run: A's writes held by the pause were
// accepted and stored after B's newer ones, so that the resource shows a
// partition's token going down, which is what a checker must catch.
func checkUnfenced(t *testing.T, aWrites, bWrites []workload.Write, stored []workload.Stored) {
	zombies := 0
	for _, wr := range aWrites {
		if wr.Held {
			zombies++
			if wr.Err != nil {
				t.Errorf("A's write %+v, held by the pause, got %v; unfenced, it must land", wr.Record, wr.Err)
			}
		}
	}
	if zombies == 0 {
		t.Fatal("A made no write held by its pause: the scenario did not happen")
	}
	inStore := make(map[workload.Record]bool, len(stored))
	for _, s := range stored {
		inStore[s.Record] = true
	}
	for _, wr := range append(append([]workload.Write(nil), aWrites...), bWrites...) {
		if wr.Err == nil && !inStore[wr.Record] {
			t.Errorf("accepted record %+v is not in the resource", wr.Record)
		}
		if errors.Is(wr.Err, epoch.ErrStale) {
			t.Errorf("record %+v rejected as stale by an unfenced resource", wr.Record)
		}
	}
	downs := 0
	for i := 1; i < len(stored); i++ {
		if prev, cur := stored[i-1], stored[i]; cur.Partition == prev.Partition && cur.Token < prev.Token {
			downs++
		}
	}
	if downs == 0 {
		t.Error("no partition's token went down in the unfenced resource: the control shows nothing")
	}
	t.Logf("unfenced: %d records stored, %d writes held by the pause, %d token decreases", len(stored), zombies, downs)
}

// checkAttempts checks each worker's attempt log against itself and
// against the resources (stored, by the attempt log's resource names), as
// an independent checker would:
//   - every line names the worker and its member ID;
//   - the claim lines pair up (a start, Pending or Suspect -> Owned, then
//     a stop, Owned -> Revoking, Suspect or Lost), and every attempt of a
//     claim lies between its start and its stop;
//   - an append accepted by a resource is in it; one rejected as stale is
//     not; every stored record was attempted;
//   - each write held by the pause was rejected by a resource (fenced), or
//     accepted everywhere (unfenced);
//   - A stopped a claim Suspect or Lost: the pause.
func checkAttempts(t *testing.T, unfenced bool, stored map[string][]workload.Stored, logs map[*testWorker]string) {
	t.Helper()
	type key struct {
		resource string
		rec      workload.Record
	}
	inStore := make(map[key]bool)
	for name, recs := range stored {
		for _, s := range recs {
			inStore[key{name, s.Record}] = true
		}
	}
	attempted := make(map[key]bool)
	for w, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := workload.ReadAttempts(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s's attempt log: %v", w.name, err)
		}
		member := w.memberID()
		type claim struct {
			partition epoch.Partition
			token     epoch.Token
		}
		type span struct{ start, stop time.Time }
		spans := make(map[claim][]span)
		open := make(map[claim]time.Time)
		ops := make(map[workload.Op]int)
		heldStale := make(map[workload.Record]bool)
		heldRecs := make(map[workload.Record]bool)
		stoppedByPause := false
		type pendingKey struct {
			partition epoch.Partition
			offset    int64
			t0        int64
		}
		pending := map[pendingKey]int{}
		for i, l := range lines {
			ops[l.Op]++
			if l.Worker != w.name || l.Member != member {
				t.Errorf("%s line %d: worker %q member %q, want %q %q", w.name, i, l.Worker, l.Member, w.name, member)
			}
			c := claim{l.Partition, l.Token}
			if l.Op == workload.OpClaim {
				switch {
				case l.To == "Owned":
					if _, ok := open[c]; ok {
						t.Errorf("%s line %d: claim %v started twice", w.name, i, c)
					}
					if !(l.From == "Pending" && l.Cause == "started" || l.From == "Suspect" && l.Cause == "confirmed") {
						t.Errorf("%s line %d: start %+v", w.name, i, l)
					}
					open[c] = l.T
				case l.From == "Owned" && (l.To == "Revoking" || l.To == "Suspect" || l.To == "Lost"):
					start, ok := open[c]
					if !ok {
						t.Errorf("%s line %d: claim %v stopped but not started", w.name, i, c)
					}
					delete(open, c)
					spans[c] = append(spans[c], span{start, l.T})
					if l.To != "Revoking" && l.Cause == "" {
						t.Errorf("%s line %d: stop without a cause", w.name, i)
					}
					if l.To != "Revoking" {
						stoppedByPause = true
					}
				default:
					t.Errorf("%s line %d: claim line %+v", w.name, i, l)
				}
				continue
			}
			pk := pendingKey{l.Partition, l.Offset, l.T0.UnixNano()}
			if l.Outcome == workload.OutcomePending {
				// Logged before the commit is sent; its outcome follows.
				if l.Op != workload.OpCommit || !l.T1.IsZero() || l.Err != "" {
					t.Errorf("%s line %d: pending line %+v", w.name, i, l)
				}
				pending[pk] = i
				continue
			}
			if l.Op == workload.OpCommit {
				if _, ok := pending[pk]; !ok {
					t.Errorf("%s line %d: commit without its pending line", w.name, i)
				}
				delete(pending, pk)
			}
			if l.T1.Before(l.T0) {
				t.Errorf("%s line %d: ends before it starts", w.name, i)
			}
			if _, ok := open[c]; !ok {
				t.Errorf("%s line %d: %s outside a claim of partition %d token %v", w.name, i, l.Op, l.Partition, l.Token)
			} else if l.T0.Before(open[c]) {
				t.Errorf("%s line %d: %s begins before its claim started", w.name, i, l.Op)
			}
			if (l.Outcome == workload.OutcomeOK) != (l.Err == "") {
				t.Errorf("%s line %d: outcome %s with err %q", w.name, i, l.Outcome, l.Err)
			}
			if l.Op != workload.OpAppend {
				continue
			}
			rec := workload.Record{Partition: l.Partition, Seq: l.Seq, Token: l.Token, Worker: l.Worker, Member: l.Member}
			k := key{l.Resource, rec}
			attempted[k] = attempted[k] || l.Outcome != workload.OutcomeStale
			switch l.Outcome {
			case workload.OutcomeOK:
				if !inStore[k] {
					t.Errorf("%s line %d: append accepted by %s is not in it: %+v", w.name, i, l.Resource, rec)
				}
			case workload.OutcomeStale:
				if unfenced {
					t.Errorf("%s line %d: stale append at an unfenced resource", w.name, i)
				}
				if inStore[k] {
					t.Errorf("%s line %d: append rejected by %s is in it: %+v", w.name, i, l.Resource, rec)
				}
			}
			if l.Held {
				heldRecs[rec] = true
				if l.Outcome == workload.OutcomeStale {
					heldStale[rec] = true
				}
			}
		}
		if len(open) > 0 {
			t.Errorf("%s: claims never stopped after a clean stop: %v", w.name, open)
		}
		if len(pending) > 0 {
			t.Errorf("%s: commits whose outcome was never logged after a clean stop: lines %v", w.name, slices.Collect(maps.Values(pending)))
		}
		for _, op := range []workload.Op{workload.OpClaim, workload.OpAdmit, workload.OpFetch, workload.OpAppend, workload.OpCommit} {
			if ops[op] == 0 {
				t.Errorf("%s's attempt log has no %s line", w.name, op)
			}
		}
		if w.name == "a" {
			if len(heldRecs) == 0 {
				t.Error("A's attempt log has no held append")
			}
			for rec := range heldRecs {
				if !unfenced && !heldStale[rec] {
					t.Errorf("A's held append of %+v was rejected by no resource", rec)
				}
				if unfenced && heldStale[rec] {
					t.Errorf("A's held append of %+v was rejected, unfenced", rec)
				}
			}
			if !stoppedByPause {
				t.Error("A stopped no claim Suspect or Lost")
			}
		}
		for c, ss := range spans {
			for _, s := range ss {
				if s.stop.Before(s.start) {
					t.Errorf("%s: claim %v stopped before it started", w.name, c)
				}
			}
		}
	}
	for k := range inStore {
		if !attempted[k] {
			t.Errorf("%s holds %+v, which no attempt line wrote", k.resource, k.rec)
		}
	}
}

// checkPause checks the resource's contents and the workers' outcomes
// after the pause scenario.
func checkPause(t *testing.T, aWrites, bWrites []workload.Write, stored []workload.Stored) {
	// The zombie: A's writes held by the pause were all rejected, each by
	// a newer token. There must be some, or the test proves nothing.
	zombies := 0
	for _, wr := range aWrites {
		if !wr.Held {
			continue
		}
		zombies++
		var se *epoch.StaleError
		if !errors.As(wr.Err, &se) {
			t.Errorf("A's write %+v, held by the pause, got %v; want a stale-token rejection", wr.Record, wr.Err)
		} else if se.Current <= wr.Token {
			t.Errorf("A's write %+v rejected with current token %v, not newer", wr.Record, se.Current)
		}
	}
	if zombies == 0 {
		t.Fatal("A made no write held by its pause: the scenario did not happen")
	}

	// In the order the resource accepted them, each partition's tokens
	// never go down.
	for i := 1; i < len(stored); i++ {
		prev, cur := stored[i-1], stored[i]
		if cur.Partition == prev.Partition && cur.Token < prev.Token {
			t.Errorf("partition %d: token %v accepted after %v (records %+v then %+v)", cur.Partition, cur.Token, prev.Token, prev.Record, cur.Record)
		}
	}

	// Nothing accepted is lost, and nothing rejected is stored.
	inStore := make(map[workload.Record]bool, len(stored))
	for _, s := range stored {
		inStore[s.Record] = true
	}
	accepted, rejected := 0, map[workload.Record]bool{}
	for _, wr := range append(append([]workload.Write(nil), aWrites...), bWrites...) {
		switch {
		case wr.Err == nil:
			accepted++
			if !inStore[wr.Record] {
				t.Errorf("accepted record %+v is not in the resource", wr.Record)
			}
		case errors.Is(wr.Err, epoch.ErrStale):
			rejected[wr.Record] = true
		}
	}
	for _, s := range stored {
		if rejected[s.Record] {
			t.Errorf("rejected record %+v is in the resource", s.Record)
		}
	}
	if len(stored) < accepted {
		t.Errorf("%d records stored, %d accepted", len(stored), accepted)
	}

	// B took A's partitions over during the pause: it wrote under tokens
	// newer than those A's zombie writes carried.
	tookOver := false
	for _, zw := range aWrites {
		for _, bw := range bWrites {
			if zw.Held && bw.Err == nil && bw.Partition == zw.Partition && bw.Token > zw.Token && bw.At.Before(zw.At) {
				tookOver = true
			}
		}
	}
	if !tookOver {
		t.Error("B wrote nothing on A's partitions before A's zombie writes")
	}
	t.Logf("%d records stored, %d accepted writes, %d rejected, %d held by the pause", len(stored), accepted, len(rejected), zombies)
}

// TestWorkerJoinTimeout: a worker whose --brokers nobody answers says what
// it waits for, and gives up after --join-timeout with an error that says
// why, instead of waiting silently.
func TestWorkerJoinTimeout(t *testing.T) {
	etcd := testenv.EtcdForTest(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close() // nothing listens there now
	var stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"worker", "--brokers", nowhere, "--group", "g", "--topic", "jobs",
		"--resource", "etcd", "--etcd-endpoints", etcd.Endpoints[0], "--etcd-prefix", "/join-timeout/",
		"--join-timeout", "2s"}, io.Discard, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("gave up after %v with --join-timeout 2s", took)
	}
	for _, want := range []string{"joining: the brokers do not answer Metadata", "not joined within --join-timeout 2s", nowhere} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestWorkerDeadBrokers: a worker whose --brokers refuse connections fails
// once they have refused for seedsRefusedFor (5 s), saying nothing listens
// there, instead of after --join-timeout (30 s by default).
func TestWorkerDeadBrokers(t *testing.T) {
	etcd := testenv.EtcdForTest(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close() // nothing listens there now
	var stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"worker", "--brokers", nowhere, "--group", "g", "--topic", "jobs",
		"--resource", "etcd", "--etcd-endpoints", etcd.Endpoints[0], "--etcd-prefix", "/dead-brokers/",
		"--join-timeout", "60s"}, io.Discard, &stderr)
	took := time.Since(start)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"nothing listens at --brokers " + nowhere + " (connection refused for 5s)", "is the coordinator running"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "not joined within --join-timeout") {
		t.Errorf("the worker waited for its join timeout:\n%s", stderr.String())
	}
	t.Logf("gave up after %v", took.Round(time.Millisecond))
}

// TestWatchSeeds: the seeds' watch ends a join only when every seed has
// refused for the whole window; a seed that listens, even one of several,
// leaves the join alone.
func TestWatchSeeds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := dead.Addr().String()
	dead.Close()
	for _, tc := range []struct {
		seeds   []string
		refused bool
	}{
		{[]string{nowhere}, true},
		{[]string{nowhere, ln.Addr().String()}, false},
		{[]string{ln.Addr().String()}, false},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		// every is also each dial's timeout, and a dial that times out
		// (not refused) ends the watch: 10 ms was within a loaded
		// machine's scheduling delay of a loopback dial.
		watchSeeds(ctx, tc.seeds, 300*time.Millisecond, 100*time.Millisecond, cancel)
		if got := errors.Is(context.Cause(ctx), errSeedsRefuse); got != tc.refused {
			t.Errorf("seeds %v: refused %v, want %v (cause %v)", tc.seeds, got, tc.refused, context.Cause(ctx))
		}
		cancel(nil)
	}
}
