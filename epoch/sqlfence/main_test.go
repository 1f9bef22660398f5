package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/epoch/sqlfence"
	"github.com/tenure-dev/tenure/internal/testenv"
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
	dsn, db, err := testenv.Postgres()
	var skip *testenv.SkipError
	switch {
	case errors.As(err, &skip):
		skipReason = "sqlfence: " + skip.Reason
		fmt.Fprintln(os.Stderr, skipReason)
		skipExamples()
		return m.Run()
	case err != nil:
		fmt.Fprintln(os.Stderr, "sqlfence:", err)
		return 1
	}
	// The example reads the DSN from the environment, like a program would.
	os.Setenv(testenv.PostgresEnv, dsn)
	testDB = db
	code := m.Run()
	db.Close()
	return testenv.CheckLeaks(code)
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
	ctx := testenv.Context(t)
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
	if _, err := db.ExecContext(testenv.Context(t), `CREATE TABLE `+table+
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

// itoa is strconv.Itoa for the test's int-like types.
func itoa[T ~int32 | ~int64 | ~int](v T) string { return strconv.FormatInt(int64(v), 10) }
