package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for the server's logger and the test
// to use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	help := stdout.String()
	for _, want := range []string{
		"--listen", "TENURE_LISTEN", "--advertise", "--partitions", "TENURE_AUTO_CREATE_TOPICS",
		"--metrics-listen", "--min-session-timeout", "--max-session-timeout", "--consumer-session-timeout",
		"--consumer-heartbeat-interval", "--initial-rebalance-delay", "--assignors", "--max-group-size",
		"--max-partitions", "--max-topics", "--max-groups", "--max-connections", "--max-frame-size",
		"--idle-timeout", "--write-timeout", "--store", "--log-level", "commit offsets explicitly",
		"--data-dir", "--etcd-endpoints", "TENURE_ETCD_PASSWORD", "--etcd-cacert", "--etcd-cert", "--etcd-key",
		"--etcd-username", "--etcd-prefix", "--max-txn-ops", "--etcd-dial-timeout",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestServeRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "zero partitions", args: []string{"--partitions", "0"}},
		{name: "partitions above the limit", args: []string{"--partitions", "100", "--max-partitions", "10"}},
		{name: "unknown store", args: []string{"--store", "disk"}},
		{name: "etcd cert without key", args: []string{"--etcd-endpoints", "http://127.0.0.1:1", "--etcd-cert", "c.pem"}},
		{name: "max txn ops below the store's minimum", args: []string{"--max-txn-ops", "2"}},
		{name: "no data dir", args: []string{"--data-dir", ""}},
		{name: "unknown assignor", args: []string{"--assignors", "uniform,nope"}},
		{name: "bad log level", args: []string{"--log-level", "loud"}},
		{name: "min session above max", args: []string{"--min-session-timeout", "1h"}},
		{name: "heartbeat above session", args: []string{"--consumer-heartbeat-interval", "1m"}},
		{name: "bad advertised address", args: []string{"--advertise", "nohost"}},
		{name: "stray argument", args: []string{"extra"}},
		{name: "from the environment", env: map[string]string{"TENURE_MAX_CONNECTIONS": "0"}},
		{name: "malformed environment value", env: map[string]string{"TENURE_IDLE_TIMEOUT": "soon"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--listen", "127.0.0.1:0"}, tc.args...)
			if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if stderr.Len() == 0 {
				t.Fatal("no message on stderr")
			}
		})
	}
}

var (
	listenRe  = regexp.MustCompile(`"listen": "([^"]+)"`)
	metricsRe = regexp.MustCompile(`"metrics": "([^"]+)"`)
)

// TestServeStartsAndStops runs `tenure serve` on a free port, talks to it
// with a stock kgo client, scrapes its metrics, and stops it by cancelling
// the context, as SIGINT does.
func TestServeStartsAndStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Setenv("TENURE_PARTITIONS", "12") // the environment binding, end to end

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--store", "memory", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, io.Discard, stderr)
	}()

	var addr, metricsURL string
	deadline := time.Now().Add(10 * time.Second)
	for addr == "" || metricsURL == "" {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not report its addresses; stderr:\n%s", stderr.String())
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited with %d; stderr:\n%s", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		logs := stderr.String()
		if m := listenRe.FindStringSubmatch(logs); m != nil {
			addr = m[1]
		}
		if m := metricsRe.FindStringSubmatch(logs); m != nil {
			metricsURL = m[1]
		}
	}
	if !strings.Contains(stderr.String(), "in memory only") {
		t.Errorf("no warning that the memory store is not durable")
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, reqCancel := context.WithTimeout(ctx, 10*time.Second)
	// -1 partitions: the server's default, set from the environment.
	created, err := kadm.NewClient(cl).CreateTopics(reqCtx, -1, -1, nil, "work")
	reqCancel()
	cl.Close()
	if err != nil || created["work"].Err != nil || created["work"].NumPartitions != 12 {
		t.Fatalf("create topic: %v; %+v", err, created["work"])
	}

	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tenure_requests_total{api="CreateTopics",error="NONE"}`, "tenure_topics 1", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d after cancellation; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10s of cancellation")
	}
}

// serveUntil runs `tenure serve` with args until the returned stop is
// called, which returns its exit code; addr is where it listens.
func serveUntil(t *testing.T, args ...string) (addr string, logs *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), io.Discard, logs)
	}()
	stop = func() int {
		cancel()
		select {
		case code := <-exited:
			return code
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not stop within 20s of cancellation")
			return -1
		}
	}
	pollUntil(t, 30*time.Second, "serve reports its address", func() string {
		select {
		case code := <-exited:
			exited <- code
			t.Fatalf("serve exited with %d; stderr:\n%s", code, logs.String())
		default:
		}
		if m := listenRe.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
			return ""
		}
		return "no address logged yet"
	})
	return addr, logs, stop
}

// commitOffset commits offset 42 of work[0] for group g through the
// server, creating the topic first: an admin commit, which the server
// persists.
func commitOffset(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "work"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "work", Partition: 0, At: 42, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "g", offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// storedOffset finds the offset of g work[0] among recs.
func storedOffset(recs []coordinator.Record) (int64, bool) {
	for _, r := range recs {
		if o, ok := r.(*coordinator.OffsetRecord); ok && o.Group == "g" && o.Topic == "work" && o.Partition == 0 {
			return o.Offset, true
		}
	}
	return 0, false
}

// TestServeEmbeddedEtcd runs `tenure serve` with its default store, an
// embedded etcd in --data-dir, commits an offset, stops it, and finds the
// offset in the data directory.
func TestServeEmbeddedEtcd(t *testing.T) {
	dir := t.TempDir() + "/data"
	addr, logs, stop := serveUntil(t, "--data-dir", dir)
	if !strings.Contains(logs.String(), dir) {
		t.Errorf("the logs do not say where the data lives (%s):\n%s", dir, logs.String())
	}
	if strings.Contains(logs.String(), "in memory only") {
		t.Errorf("the memory store's warning with the etcd store")
	}
	commitOffset(t, addr)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, logs.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := etcdstore.StartEmbedded(ctx, dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := etcdstore.New(ctx, e.Client(), e.StoreOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := storedOffset(recs); !ok || o != 42 {
		t.Fatalf("stored offset %d, %v; want 42", o, ok)
	}
}

// TestServeExternalEtcd runs `tenure serve` against an etcd cluster given
// by --etcd-endpoints, under its own prefix.
func TestServeExternalEtcd(t *testing.T) {
	etcd := testenv.EtcdForTest(t)
	addr, logs, stop := serveUntil(t, "--etcd-endpoints", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", "/tenure-test/",
		"--data-dir", t.TempDir()+"/unused")
	commitOffset(t, addr)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, logs.String())
	}
	if strings.Contains(logs.String(), "embedded etcd started") {
		t.Errorf("an embedded etcd started though endpoints were given")
	}
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := etcdstore.New(ctx, cli, etcdstore.Prefix("/tenure-test/"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := storedOffset(recs); !ok || o != 42 {
		t.Fatalf("stored offset %d, %v; want 42", o, ok)
	}
}
