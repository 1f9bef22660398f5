package workload_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// The test PostgreSQL server: TENURE_TEST_POSTGRES (set by CI through
// .ci/postgres.sh), or else the address that script uses.
const (
	dsnEnv     = "TENURE_TEST_POSTGRES"
	defaultDSN = "postgres://tenure@127.0.0.1:55432/tenure_test?sslmode=disable"
)

var (
	// etcdEndpoints are the client URLs of the embedded etcd server.
	etcdEndpoints []string
	// testDB is the PostgreSQL pool; nil when none could be reached and
	// the SQL tests skip, saying why in skipSQL.
	testDB  *sql.DB
	skipSQL string
)

// TestMain runs the package's tests against a real, embedded etcd server
// and a real PostgreSQL server (skipped, when none is reachable, unless
// TENURE_TEST_POSTGRES or CI is set), then checks for leaked goroutines.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	e, dir, err := startEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "workload: starting embedded etcd:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	dsn, explicit := os.LookupEnv(dsnEnv)
	if dsn == "" {
		dsn, explicit = defaultDSN, false
	}
	db, err := connectSQL(dsn)
	if err != nil {
		msg := fmt.Sprintf("workload: no PostgreSQL server at %s: %v", redact(dsn), err)
		if explicit || os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "%s\n(%s or CI is set, so the tests need it)\n", msg, dsnEnv)
			e.Close()
			return 1
		}
		skipSQL = msg + "; start one with `. .ci/postgres.sh; start_postgres`, or set " + dsnEnv
	}
	testDB = db
	code := m.Run()
	if db != nil {
		db.Close()
	}
	e.Close()
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "workload: leaked goroutines:", err)
		return 1
	}
	return 0
}

func startEtcd() (*embed.Etcd, string, error) {
	dir, err := os.MkdirTemp("", "workload-test-")
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "workload-test"
	cfg.Dir = dir
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
		os.RemoveAll(dir)
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		os.RemoveAll(dir)
		return nil, "", err
	case <-time.After(30 * time.Second):
		e.Close()
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("not ready after 30s")
	}
	etcdEndpoints = []string{"http://" + e.Clients[0].Addr().String()}
	return e, dir, nil
}

func connectSQL(dsn string) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// redact renders a URL DSN without its password; other forms are not
// echoed, since they may hold one.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "the configured DSN"
	}
	return u.Redacted()
}

// newEtcdClient returns a client of the embedded server, closed when t
// ends.
func newEtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdEndpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// needDB returns the PostgreSQL pool, or skips t.
func needDB(t testing.TB) *sql.DB {
	t.Helper()
	if testDB == nil {
		t.Skip(skipSQL)
	}
	return testDB
}

// testContext ends with the test, or after 20 s.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
