package main

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// startTestTenure runs the coordinator in-process, with an in-memory store, on
// a loopback port, with the given KIP-848 session timeout and heartbeat
// interval; topics are created on first use with the given partition
// count. It stops when the test ends. It returns the address to dial.
func startTestTenure(t *testing.T, session, interval time.Duration, partitions int32) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Store = store.NewMemory()
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("tenure")
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.DefaultPartitions = partitions
	cfg.Core.ConsumerSessionTimeout = session
	cfg.Core.ConsumerHeartbeatInterval = interval
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("tenure: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tenure: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("tenure did not stop")
		}
	})
	return ln.Addr().String()
}

// startTestEtcd runs a single-member etcd server in-process, on loopback ports,
// tuned for tests (short raft timings, no fsync), until the test ends. It
// returns the client URL.
func startTestEtcd(t *testing.T) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "worker-test"
	cfg.Dir = t.TempDir()
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready after 30s")
	}
	return "http://" + e.Clients[0].Addr().String()
}

// The test PostgreSQL server: TENURE_TEST_POSTGRES (set by CI through
// .ci/postgres.sh), or else the address that script uses.
const (
	postgresEnv        = "TENURE_TEST_POSTGRES"
	postgresDefaultDSN = "postgres://tenure@127.0.0.1:55432/tenure_test?sslmode=disable"
)

// testPostgres returns the DSN of the test PostgreSQL server and a pool of
// it, closed when the test ends. Without a reachable server it skips the
// test, unless TENURE_TEST_POSTGRES or CI is set: then it fails it.
func testPostgres(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn, explicit := os.LookupEnv(postgresEnv)
	if dsn == "" {
		dsn, explicit = postgresDefaultDSN, false
	}
	db, err := sql.Open("pgx", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		where := "the DSN in " + postgresEnv
		if u, perr := url.Parse(dsn); perr == nil && u.Scheme != "" {
			where = u.Redacted()
		}
		if explicit || os.Getenv("CI") != "" {
			t.Fatalf("no PostgreSQL server at %s: %v (%s or CI is set, so the test needs it)", where, err, postgresEnv)
		}
		t.Skipf("no PostgreSQL server at %s: %v; start one with `. .ci/postgres.sh; start_postgres`, or set %s", where, err, postgresEnv)
	}
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

// logBuffer collects a worker's log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pollUntil polls cond until it returns "" or the timeout passes, and then
// fails the test with cond's last answer.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
