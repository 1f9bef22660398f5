package sqlfence_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/epoch/sqlfence"
)

// dsnEnv names the environment variable holding the test server's DSN. CI
// sets it (.ci/postgres.sh); without it the tests try defaultDSN, the address
// that script uses, so a developer who started the server need not export
// anything.
const (
	dsnEnv     = "TENURE_TEST_POSTGRES"
	defaultDSN = "postgres://tenure@127.0.0.1:55432/tenure_test?sslmode=disable"
)

var (
	// testDB is the shared pool of the package's tests; nil when no server
	// could be reached and the tests skip.
	testDB *sql.DB
	// skipReason says why testDB is nil.
	skipReason string
)

// TestMain connects to a real PostgreSQL server. If none can be reached,
// the package fails when CI or TENURE_TEST_POSTGRES is set, and otherwise
// skips every test (and its Example, which cannot skip itself) with a
// message saying how to start one.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dsn, explicit := os.LookupEnv(dsnEnv)
	if dsn == "" {
		dsn, explicit = defaultDSN, false
	}
	db, err := connect(dsn)
	if err != nil {
		msg := fmt.Sprintf("sqlfence: no PostgreSQL server at %s: %v", describeDSN(dsn), err)
		if explicit || os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "%s\n(%s or CI is set, so the tests need it)\n", msg, dsnEnv)
			return 1
		}
		skipReason = msg + "; start one with `. .ci/postgres.sh; start_postgres`, or set " + dsnEnv
		fmt.Fprintln(os.Stderr, skipReason)
		skipExamples()
		return m.Run()
	}
	// The example reads the DSN from the environment, like a program would.
	os.Setenv(dsnEnv, dsn)
	testDB = db
	code := m.Run()
	db.Close()
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "sqlfence: leaked goroutines:", err)
		return 1
	}
	return 0
}

func connect(dsn string) (*sql.DB, error) {
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

// describeDSN renders a URL DSN without its password; other forms are not
// echoed, since they may hold one.
func describeDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "the configured DSN"
	}
	return u.Redacted()
}

// skipExamples adds Examples to -test.skip: they have no way to skip.
func skipExamples() {
	f := flag.Lookup("test.skip")
	if f == nil {
		return
	}
	pattern := "^Example"
	if old := f.Value.String(); old != "" {
		pattern = old + "|" + pattern
	}
	f.Value.Set(pattern)
}

// needDB returns the shared pool, or skips t when there is no server.
func needDB(t testing.TB) *sql.DB {
	t.Helper()
	if testDB == nil {
		t.Skip(skipReason)
	}
	return testDB
}

var tableSeq atomic.Int64

// newFence creates a fence on a table no other test, nor any other test
// process sharing the server, uses, and drops it when t ends.
func newFence(t testing.TB, name string) (*sqlfence.Fence, string) {
	t.Helper()
	db := needDB(t)
	table := fmt.Sprintf("sqlfence_%s_%d_%d", name, os.Getpid(), tableSeq.Add(1))
	f, err := sqlfence.New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTable(t, table) })
	return f, table
}

// newEffects creates a table for the effects of guarded writes, in commit
// order for each partition (see TestConcurrentWriters), dropped when t ends.
func newEffects(t testing.TB, name string) string {
	t.Helper()
	db := needDB(t)
	table := fmt.Sprintf("sqlfence_%s_effects_%d_%d", name, os.Getpid(), tableSeq.Add(1))
	if _, err := db.ExecContext(testContext(t), `CREATE TABLE `+table+
		` (seq bigserial PRIMARY KEY, part integer NOT NULL, token bigint NOT NULL, label text NOT NULL UNIQUE)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTable(t, table) })
	return table
}

func dropTable(t testing.TB, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := testDB.ExecContext(ctx, `DROP TABLE IF EXISTS "`+table+`"`); err != nil {
		t.Errorf("drop %s: %v", table, err)
	}
}

// testContext returns a context that ends with the test, or after 20s so a
// wedged server fails the test instead of hanging it.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// itoa is strconv.Itoa for the test's int-like types.
func itoa[T ~int32 | ~int64 | ~int](v T) string { return strconv.FormatInt(int64(v), 10) }
