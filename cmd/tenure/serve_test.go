package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/proctest"
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
		"--http", "TENURE_HTTP", "--metrics-listen", "--min-session-timeout", "--max-session-timeout", "--consumer-session-timeout",
		"--consumer-heartbeat-interval", "--consumer-join-coalesce", "--conn-loss-grace", "--initial-rebalance-delay", "--assignors", "--max-group-size",
		"--max-partitions", "--max-topics", "--max-groups", "--max-connections", "--max-frame-size",
		"--idle-timeout", "--write-timeout", "--store", "--log-level", "commit offsets explicitly",
		"--data-dir", "--etcd-endpoints", "TENURE_ETCD_PASSWORD", "--etcd-cacert", "--etcd-cert", "--etcd-key",
		"--etcd-username", "--etcd-prefix", "--max-txn-ops", "--etcd-dial-timeout", "--store-combine-delay",
		"--etcd-name", "--etcd-initial-cluster", "--etcd-initial-cluster-token", "--etcd-initial-cluster-state",
		"--etcd-peer-listen", "--etcd-client-listen", "TENURE_ETCD_INITIAL_CLUSTER",
		"--authorizer", "--super-users", "TENURE_SUPER_USERS", "--quota-request-rate", "--quota-connection-request-rate",
		"--max-connections-per-ip", "--max-parked-per-connection", "--max-parked-per-group",
		"--peer-probe", "--coordinator-wait", "--view-settle", "TENURE_VIEW_SETTLE", "--takeover-grace", "--election-ttl",
		"--enable-pprof", "TENURE_ENABLE_PPROF", "/debug/pprof/",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestServeRejectsBadSettings(t *testing.T) {
	const three = "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:2381,n3=http://127.0.0.1:2382"
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		// want is in the message, when given.
		want string
	}{
		{name: "zero partitions", args: []string{"--partitions", "0"}},
		{name: "partitions above the limit", args: []string{"--partitions", "100", "--max-partitions", "10"}},
		{name: "unknown store", args: []string{"--store", "disk"}},
		{name: "etcd cert without key", args: []string{"--etcd-endpoints", "http://127.0.0.1:1", "--etcd-cert", "c.pem"}},
		{name: "max txn ops below the store's minimum", args: []string{"--max-txn-ops", "2"}},
		{name: "no data dir", args: []string{"--data-dir", ""}},
		{name: "negative combine delay", args: []string{"--store-combine-delay", "-1ms"}, want: "--store-combine-delay -1ms is negative"},
		{name: "unknown assignor", args: []string{"--assignors", "uniform,nope"}},
		{name: "bad log level", args: []string{"--log-level", "loud"}},
		{name: "min session above max", args: []string{"--min-session-timeout", "1h"}},
		{name: "heartbeat above session", args: []string{"--consumer-heartbeat-interval", "1m"}},
		{name: "join coalesce window past the session", args: []string{"--consumer-join-coalesce", "1m"}, want: "join coalesce window"},
		{name: "negative join coalesce window", args: []string{"--consumer-join-coalesce", "-1s"}, want: "join coalesce window"},
		{name: "negative connection loss grace", args: []string{"--conn-loss-grace", "-1s"}, want: "connection loss grace"},
		{name: "negative view settle", args: []string{"--view-settle", "-1s"}, want: "view settle -1s is negative"},
		{name: "view settle not a duration", args: []string{"--view-settle", "10"}, want: "--view-settle"},
		{name: "bad advertised address", args: []string{"--advertise", "nohost"}},
		{name: "stray argument", args: []string{"extra"}},
		{name: "from the environment", env: map[string]string{"TENURE_MAX_CONNECTIONS": "0"}},
		{name: "malformed environment value", env: map[string]string{"TENURE_IDLE_TIMEOUT": "soon"}},
		{name: "initial cluster with endpoints", args: []string{"--etcd-initial-cluster", three, "--etcd-name", "n1", "--etcd-endpoints", "http://127.0.0.1:1"},
			want: "--etcd-initial-cluster configures the embedded etcd"},
		{name: "name not in the initial cluster", args: []string{"--etcd-initial-cluster", three, "--etcd-name", "n4"},
			want: `member name "n4" is not in the initial cluster (members: n1, n2, n3)`},
		{name: "default name not in the initial cluster", args: []string{"--etcd-initial-cluster", three},
			want: `member name "tenure" is not in the initial cluster`},
		{name: "malformed initial cluster", args: []string{"--etcd-initial-cluster", "n1=127.0.0.1:2380", "--etcd-name", "n1"},
			want: `peer URL "127.0.0.1:2380" is not http://host:port`},
		{name: "initial cluster from the environment", args: []string{"--etcd-name", "n1"}, env: map[string]string{"TENURE_ETCD_INITIAL_CLUSTER": "n1=https://127.0.0.1:2380"},
			want: "https needs peer TLS"},
		{name: "peer listen without a cluster", args: []string{"--etcd-peer-listen", "127.0.0.1:2380"}, want: "needs --etcd-initial-cluster"},
		{name: "cluster state without a cluster", args: []string{"--etcd-initial-cluster-state", "existing"}, want: "needs --etcd-initial-cluster"},
		{name: "bad cluster state", args: []string{"--etcd-initial-cluster", three, "--etcd-name", "n1", "--etcd-initial-cluster-state", "old"},
			want: "neither new nor existing"},
		{name: "client listen on a name", args: []string{"--etcd-client-listen", "localhost.example:2379"}, want: "must be an IP address or localhost"},
		{name: "authorizer neither on nor off", args: []string{"--authorizer", "yes"}, want: "on or off"},
		{name: "super users without the authorizer", args: []string{"--super-users", "User:admin"}, want: "--authorizer is off"},
		{name: "super user without a type", args: []string{"--authorizer", "on", "--super-users", "User:admin;root"}, want: `super user "root"`},
		{name: "negative quota", args: []string{"--quota-request-rate", "-1"}, want: "must not be negative"},
		{name: "negative per-IP limit", args: []string{"--max-connections-per-ip", "-1"}},
		{name: "no parked requests", args: []string{"--max-parked-per-connection", "0"}},
		{name: "http and its deprecated name disagree", args: []string{"--http", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:1"},
			want: "--metrics-listen is the deprecated name of --http"},
		{name: "pprof without the http listener", args: []string{"--enable-pprof", "--http", ""}, want: "--enable-pprof serves the profiles on --http, which is off"},
		{name: "pprof neither true nor false", args: []string{"--enable-pprof=maybe"}, want: `invalid value "maybe" for --enable-pprof: a boolean flag is --enable-pprof (true) or --enable-pprof=false`},
		{name: "pprof from the environment neither true nor false", env: map[string]string{"TENURE_ENABLE_PPROF": "yes please"},
			want: `invalid value "yes please" for TENURE_ENABLE_PPROF: a boolean is true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			dir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, tc.args...)
			if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if stderr.Len() == 0 {
				t.Fatal("no message on stderr")
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q: %s", tc.want, stderr.String())
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("a refused start created the data dir")
			}
		})
	}
}

var (
	listenRe  = regexp.MustCompile(`"listen": "([^"]+)"`)
	metricsRe = regexp.MustCompile(`"metrics": "([^"]+)"`)
)

// TestServeStartsAndStops runs `tenure serve` on a free port, talks to it
// with a stock kgo client, scrapes its metrics, reads its status page, and
// stops it by cancelling the context, as SIGINT does. The HTTP listener is
// given by --http, or by its deprecated name --metrics-listen, which
// warns.
func TestServeStartsAndStops(t *testing.T) {
	for _, flag := range []string{"--http", "--metrics-listen"} {
		t.Run(flag, func(t *testing.T) { testServeStartsAndStops(t, flag) })
	}
}

func testServeStartsAndStops(t *testing.T, httpFlag string) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Setenv("TENURE_PARTITIONS", "12") // the environment binding, end to end

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--store", "memory", "--listen", "127.0.0.1:0", httpFlag, "127.0.0.1:0"}, io.Discard, stderr)
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

	body := scrape(t, stderr.String())
	for _, want := range []string{`tenure_requests_total{api="CreateTopics",error="NONE"}`, "tenure_topics 1", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// etcd's metrics, registered process-wide, are a running embedded
	// etcd's to serve; here they would say it has no leader.
	if strings.Contains(body, "etcd_server_has_leader") {
		t.Errorf("metrics of an etcd that does not run, with the memory store")
	}
	if deprecated := strings.Contains(stderr.String(), "--metrics-listen (TENURE_METRICS_LISTEN) is deprecated"); deprecated != (httpFlag == "--metrics-listen") {
		t.Errorf("%s: deprecation warning logged: %v", httpFlag, deprecated)
	}

	// The status page and its API, on the same listener.
	base := strings.TrimSuffix(metricsURL, "/metrics")
	for path, want := range map[string]string{
		"/":            `<script src="/static/app.js"`,
		"/api/groups":  `"leading":true`,
		"/api/groups/": "no such endpoint",
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %s, lacks %q", path, body, want)
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

// scrape returns the body of the /metrics that logs say serve serves.
func scrape(t *testing.T, logs string) string {
	t.Helper()
	m := metricsRe.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("serve logged no metrics address:\n%s", logs)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
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
	if err := tryCommitOffset(addr); err != nil {
		t.Fatal(err)
	}
}

// tryCommitOffset is commitOffset returning its error.
func tryCommitOffset(addr string) error {
	var klog syncBuffer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.WithLogger(kgo.BasicLogger(&klog, kgo.LogLevelDebug, nil)))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "work"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic: %w", err)
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "work", Partition: 0, At: 42, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "g", offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("commit: %w\nCLIENT LOG\n%s", err, klog.String())
	}
	return nil
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
// embedded etcd in --data-dir, finds the etcd's own metrics beside
// tenure's, commits an offset, stops it, and finds the offset in the data
// directory.
func TestServeEmbeddedEtcd(t *testing.T) {
	dir := t.TempDir() + "/data"
	addr, logs, stop := serveUntil(t, "--data-dir", dir, "--metrics-listen", "127.0.0.1:0")
	if !strings.Contains(logs.String(), dir) {
		t.Errorf("the logs do not say where the data lives (%s):\n%s", dir, logs.String())
	}
	if strings.Contains(logs.String(), "in memory only") {
		t.Errorf("the memory store's warning with the etcd store")
	}
	body := scrape(t, logs.String())
	for _, want := range []string{"\netcd_server_has_leader 1\n", "\ntenure_coordinating 1\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", strings.TrimSpace(want))
		}
	}
	commitOffset(t, addr)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, logs.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := embedetcd.Start(ctx, dir, zap.NewNop())
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
	// A lone node, which no older one can share the store with, raised
	// it to the newest format at once.
	if v, err := etcdstore.ReadFormat(ctx, e.Client(), e.StoreOpts()...); err != nil || v != etcdstore.FormatVersion {
		t.Fatalf("the embedded store's format: %d, %v; want %d", v, err, etcdstore.FormatVersion)
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

var etcdEndpointRe = regexp.MustCompile(`embedded etcd started.*"endpoint": "([^"]+)"`)

// servingNode is a `tenure serve` running in this process.
type servingNode struct {
	logs   *syncBuffer
	exited chan int
	cancel context.CancelFunc
	// addr and etcd are where it serves Kafka clients and its etcd
	// member's clients, once it says so.
	addr, etcd string
}

// startNode starts `tenure serve` with args, without waiting for it.
func startNode(args ...string) *servingNode {
	ctx, cancel := context.WithCancel(context.Background())
	n := &servingNode{logs: &syncBuffer{}, exited: make(chan int, 1), cancel: cancel}
	go func() {
		n.exited <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), io.Discard, n.logs)
	}()
	return n
}

// ready reports "" once the node serves, why not otherwise; exited is
// whether it has exited.
func (n *servingNode) ready() (why string, exited bool) {
	select {
	case code := <-n.exited:
		n.exited <- code
		return fmt.Sprintf("exited with %d", code), true
	default:
	}
	logs := n.logs.String()
	if m := etcdEndpointRe.FindStringSubmatch(logs); m != nil {
		n.etcd = m[1]
	}
	if m := listenRe.FindStringSubmatch(logs); m != nil {
		n.addr = m[1]
	}
	if n.addr == "" || n.etcd == "" {
		return "not serving yet", false
	}
	return "", false
}

// stop cancels the node, as SIGINT does, and returns its exit code.
func (n *servingNode) stop(t *testing.T) int {
	t.Helper()
	n.cancel()
	select {
	case code := <-n.exited:
		n.exited <- code
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20s of cancellation")
		return -1
	}
}

var joinedRe = regexp.MustCompile(`joined the HA set\s+\{"node": (\d+)`)

// TestServeEtcdCluster starts three `tenure serve` nodes whose embedded
// etcd members form one cluster: the cluster has the three, and the nodes
// form one HA set, exactly one of them coordinating, numbered as their
// members are named. It stops one (the
// leader or not) and commits through the other two.
func TestServeEtcdCluster(t *testing.T) {
	var nodes []*servingNode
	for attempt := 1; ; attempt++ {
		var entries []string
		for i := range 3 {
			addr, err := proctest.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, fmt.Sprintf("n%d=http://%s", i+1, addr))
		}
		nodes = nil
		for i := range 3 {
			nodes = append(nodes, startNode("--data-dir", t.TempDir(), "--etcd-name", fmt.Sprint("n", i+1),
				"--etcd-initial-cluster", strings.Join(entries, ","), "--election-ttl", "1s"))
		}
		portTaken := false
		pollUntil(t, 30*time.Second, "three nodes serve", func() string {
			for i, n := range nodes {
				why, exited := n.ready()
				if exited && strings.Contains(n.logs.String(), "address already in use") && attempt < 3 {
					portTaken = true
					return ""
				}
				if exited {
					t.Fatalf("n%d %s; logs:\n%s", i+1, why, n.logs.String())
				}
				if why != "" {
					return fmt.Sprintf("n%d %s", i+1, why)
				}
			}
			return ""
		})
		if !portTaken {
			break
		}
		for _, n := range nodes {
			n.stop(t)
		}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop(t)
		}
	})

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{nodes[0].etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	members, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range members.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"n1", "n2", "n3"}) {
		t.Fatalf("members %q, want n1, n2, n3", names)
	}

	// Node IDs follow the members' names: n1 is node 1.
	for i, n := range nodes {
		m := joinedRe.FindStringSubmatch(n.logs.String())
		if m == nil || m[1] != fmt.Sprint(i+1) {
			t.Errorf("n%d joined the HA set as %q, want node %d", i+1, m, i+1)
		}
	}

	// The three form one HA set: exactly one coordinates the groups.
	pollUntil(t, 10*time.Second, "one node to lead", func() string {
		leading := 0
		for _, n := range nodes {
			leading += strings.Count(n.logs.String(), "leading: coordinating every group")
		}
		if leading != 1 {
			return fmt.Sprintf("%d nodes lead", leading)
		}
		return ""
	})
	commitThrough := func(n *servingNode) {
		t.Helper()
		if err := tryCommitOffset(n.addr); err != nil {
			for i, n := range nodes {
				t.Logf("n%d logs:\n%s", i+1, n.logs.String())
			}
			t.Fatal(err)
		}
	}
	commitThrough(nodes[2])
	if code := nodes[2].stop(t); code != 0 {
		t.Fatalf("n3 exited with %d; logs:\n%s", code, nodes[2].logs.String())
	}
	for i, n := range nodes[:2] {
		commitThrough(n)
		if why, exited := n.ready(); exited {
			t.Fatalf("n%d %s after n3 stopped; logs:\n%s", i+1, why, n.logs.String())
		}
	}
	for i, n := range nodes[:2] {
		if code := n.stop(t); code != 0 {
			t.Errorf("n%d exited with %d; logs:\n%s", i+1, code, n.logs.String())
		}
	}
}

// TestServeUnsafeTiming: a KIP-848 heartbeat and session that members
// would call unsafe are refused at start-up with the members' reason, not
// at a member's join; --allow-unsafe-timing starts anyway, with a warning.
func TestServeUnsafeTiming(t *testing.T) {
	unsafe := []string{"--store", "memory", "--consumer-heartbeat-interval", "10s", "--consumer-session-timeout", "20s"}
	var stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"serve", "--listen", "127.0.0.1:0"}, unsafe...), io.Discard, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"a session must survive two lost heartbeats", "--allow-unsafe-timing"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	_, logs, stop := serveUntil(t, append(unsafe, "--allow-unsafe-timing")...)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d with --allow-unsafe-timing; logs:\n%s", code, logs.String())
	}
	if !strings.Contains(logs.String(), "unsafe KIP-848 timing") {
		t.Errorf("no warning with --allow-unsafe-timing:\n%s", logs.String())
	}
}

// TestServeDeclaredTopics: --topic creates topics at start-up (repeatable,
// comma-separated, partitions defaulting to --partitions), so that clients
// that never create topics find them.
func TestServeDeclaredTopics(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--store", "memory", "--topic", "work:0"}, io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "positive integer") {
		t.Fatalf("--topic work:0: exit %d, stderr:\n%s", code, stderr.String())
	}
	addr, logs, stop := serveUntil(t, "--store", "memory", "--partitions", "4", "--auto-create-topics=false", "--topic", "work:8,jobs", "--topic", "more:2")
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"work": 8, "jobs": 4, "more": 2} {
		if got := len(details[name].Partitions); got != want {
			t.Errorf("topic %s: %d partitions, want %d; logs:\n%s", name, got, want, logs.String())
		}
	}
}

// TestNodeIDFromEtcdName: an embedded member's name asks for the node ID
// it ends in.
func TestNodeIDFromEtcdName(t *testing.T) {
	for name, want := range map[string]int32{"n1": 1, "n3": 3, "tenure-12": 12, "node07": 7, "0": 0,
		"tenure": -1, "n": -1, "": -1, "n99999999999": -1} {
		f := storeFlags{name: name}
		if got := f.nodeID(); got != want {
			t.Errorf("--etcd-name %q: node %d, want %d", name, got, want)
		}
	}
	if got := (&storeFlags{name: "n1", endpoints: "http://etcd:2379"}).nodeID(); got != -1 {
		t.Errorf("with --etcd-endpoints: node %d, want none (-1)", got)
	}
}

// TestServeMemoryWarnsOfTokens: a coordinator without a durable store
// says at start what its restart does to fencing: tokens start again
// below the owners' old ones, and fences refuse the new owners' writes
// meanwhile, and what to use instead.
func TestServeMemoryWarnsOfTokens(t *testing.T) {
	_, logs, stop := serveUntil(t, "--store", "memory", "--http", "")
	defer stop()
	for _, want := range []string{"tokens start again from 1", "fences downstream", "refuse the new owners' writes", "use --store etcd"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start-up logs lack %q:\n%s", want, logs.String())
		}
	}
}
