package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
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
		// The demo and the approximation of the pause are explained.
		"write rejected: stale token", "higher", "SIGSTOP", "consumer-session-timeout",
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
		rebalanceTimeout: time.Minute, logLevel: "info", resource: "postgres", etcdEndpoints: "127.0.0.1:2379",
		postgresTable: "tenure_records", workInterval: 200 * time.Millisecond, commitEvery: 3,
		pauseAfter: 5 * time.Second, pauseFor: 15 * time.Second,
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
		{"postgres without dsn", []string{"--resource", "postgres"}, nil, "--postgres-dsn"},
		{"bad table", []string{"--resource", "postgres", "--postgres-dsn", "postgres://x", "--postgres-table", "a-b"}, nil, "invalid table name"},
		{"no endpoints", []string{"--etcd-endpoints", " , "}, nil, "--etcd-endpoints"},
		{"no brokers", []string{"--brokers", ""}, nil, "--brokers"},
		{"zero interval", []string{"--work-interval", "0s"}, nil, "--work-interval"},
		{"negative commits", nil, map[string]string{"TENURE_COMMIT_EVERY": "-1"}, "--commit-every"},
		{"zero session", []string{"--session-timeout", "0s"}, nil, "--session-timeout"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "log level"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
		{"malformed flag", []string{"--pause-for", "soon"}, nil, "invalid value"},
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
// by the resource; A rejoins and works again.
func TestWorkerPause(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		etcd := testenv.EtcdForTest(t)
		prefix := "pause-test"
		testPause(t, []string{"--resource", "etcd", "--etcd-endpoints", etcd.Endpoints[0], "--etcd-prefix", prefix},
			workload.NewEtcdResource(etcd.Client(t), prefix))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn, db := testenv.PostgresForTest(t)
		table := fmt.Sprintf("worker_pause_test_%d", os.Getpid())
		t.Cleanup(func() {
			for _, tb := range []string{table, table + "_tokens"} {
				if _, err := db.ExecContext(context.Background(), `DROP TABLE IF EXISTS "`+tb+`"`); err != nil {
					t.Errorf("drop %s: %v", tb, err)
				}
			}
		})
		reader, err := workload.NewSQLResource(db, table)
		if err != nil {
			t.Fatal(err)
		}
		testPause(t, []string{"--resource", "postgres", "--postgres-dsn", dsn, "--postgres-table", table}, reader)
	})
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
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	o := addWorkerFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
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

func testPause(t *testing.T, resourceArgs []string, reader workload.Resource) {
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, pauseSession, pauseInterval, pauseParts))
	common := append([]string{
		"--brokers", broker, "--group", "pause", "--topic", "work",
		"--session-timeout", pauseSession.String(), "--rebalance-timeout", "2s",
		"--work-interval", "50ms", "--commit-every", "5",
	}, resourceArgs...)
	a := startWorker(t, "a", append(common, "--instance-id", "a",
		"--pause-after", pauseAfter.String(), "--pause-for", pauseFor.String()))
	b := startWorker(t, "b", append(common, "--instance-id", "b"))

	// Run until A has woken, been fenced, rejoined and written again.
	pollUntil(t, pauseAfter+pauseFor+15*time.Second, "A working again after its pause", func() string {
		var wokeAt time.Time
		for _, wr := range a.outcomes() {
			switch {
			case wr.Held && wokeAt.IsZero():
				wokeAt = wr.At
			case !wokeAt.IsZero() && !wr.Held && wr.Err == nil && wr.At.After(wokeAt):
				return ""
			}
		}
		if wokeAt.IsZero() {
			return "A has made no write held by its pause"
		}
		return "A has not written since it woke"
	})
	b.stop(t)
	a.stop(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored, err := reader.Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkPause(t, a.outcomes(), b.outcomes(), stored)
	for _, want := range []string{"pause begins", "pause ends", "write rejected: stale token", "claim started", "claim stopped"} {
		if !strings.Contains(a.logs.String(), want) {
			t.Errorf("A's log lacks %q", want)
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
