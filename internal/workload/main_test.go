package workload_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/tenure-dev/tenure/internal/testenv"
)

var (
	// etcd is the embedded etcd server.
	etcd *testenv.Etcd
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
	var err error
	etcd, err = testenv.StartEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "workload: starting embedded etcd:", err)
		return 1
	}
	_, db, err := testenv.Postgres()
	var skip *testenv.SkipError
	switch {
	case errors.As(err, &skip):
		skipSQL = "workload: " + skip.Reason
	case err != nil:
		fmt.Fprintln(os.Stderr, "workload:", err)
		etcd.Stop()
		return 1
	}
	testDB = db
	code := m.Run()
	if db != nil {
		db.Close()
	}
	etcd.Stop()
	return testenv.CheckLeaks(code)
}

// needDB returns the PostgreSQL pool, or skips t.
func needDB(t testing.TB) *sql.DB {
	t.Helper()
	if testDB == nil {
		t.Skip(skipSQL)
	}
	return testDB
}
