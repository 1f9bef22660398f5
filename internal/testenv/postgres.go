package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	// The "pgx" driver of database/sql.
	_ "github.com/jackc/pgx/v5/stdlib"
)

// PostgresEnv names the environment variable that holds the DSN of the
// test PostgreSQL server. CI sets it (.ci/postgres.sh); setting it, or CI,
// makes the tests fail rather than skip when the server cannot be reached.
const PostgresEnv = "TENURE_TEST_POSTGRES"

// PostgresDefaultDSN is the address .ci/postgres.sh starts its server on,
// tried when PostgresEnv is unset or empty, so that a developer who started
// the server need not export anything.
const PostgresDefaultDSN = "postgres://tenure@127.0.0.1:55432/tenure_test?sslmode=disable"

// SkipError is the error of a test service that could not be reached
// where the tests may go on without it: they skip, giving Error() as the
// reason. Any other error from this package means they must fail.
type SkipError struct {
	// Reason says what was missing and how to provide it.
	Reason string
}

func (e *SkipError) Error() string { return e.Reason }

// Postgres connects to the test PostgreSQL server: the one PostgresEnv
// names, or else PostgresDefaultDSN. It returns the DSN it used and a pool
// of that server, which the caller closes.
//
// If no server answers within 5 s, the error is a [*SkipError] when neither
// PostgresEnv nor CI is set (a developer without a server), and a plain
// error otherwise (CI, or a developer who asked for a server, must not pass
// by skipping). It names the server by its DSN without the password.
func Postgres() (dsn string, db *sql.DB, err error) {
	dsn, required := postgresDSN()
	db, err = connectPostgres(dsn, required)
	return dsn, db, err
}

// postgresDSN returns the DSN to try, and whether the tests require a
// server there: PostgresEnv or CI is set (an empty value is unset).
func postgresDSN() (dsn string, required bool) {
	dsn = os.Getenv(PostgresEnv)
	required = dsn != "" || os.Getenv("CI") != ""
	if dsn == "" {
		dsn = PostgresDefaultDSN
	}
	return dsn, required
}

// PostgresForTest is [Postgres] for t alone: the pool is closed when t
// ends, and t skips or fails when there is no server, as Postgres's error
// says.
func PostgresForTest(t testing.TB) (dsn string, db *sql.DB) {
	t.Helper()
	dsn, db, err := Postgres()
	var skip *SkipError
	if errors.As(err, &skip) {
		t.Skip(skip.Reason)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

// connectPostgres opens and pings dsn. required decides whether failing to
// is an error or a [*SkipError].
func connectPostgres(dsn string, required bool) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err != nil {
			db.Close()
		}
	}
	if err == nil {
		return db, nil
	}
	where := describeDSN(dsn)
	if required {
		return nil, fmt.Errorf("no PostgreSQL server at %s (%s or CI is set, so the tests need it): %w", where, PostgresEnv, err)
	}
	return nil, &SkipError{Reason: fmt.Sprintf("no PostgreSQL server at %s: %v; start one with `. .ci/postgres.sh; start_postgres`, or set %s", where, err, PostgresEnv)}
}

// describeDSN renders a URL DSN without its password. Other forms are not
// echoed, since they may hold one; only PostgresEnv can hold them.
func describeDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "the DSN in " + PostgresEnv
	}
	return u.Redacted()
}
