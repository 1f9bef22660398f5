package testenv

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestEtcd starts a server, writes through one client and reads through
// another.
func TestEtcd(t *testing.T) {
	s := EtcdForTest(t)
	if len(s.Endpoints) != 1 || !strings.HasPrefix(s.Endpoints[0], "http://127.0.0.1:") {
		t.Fatalf("endpoints %q, want one loopback URL", s.Endpoints)
	}
	ctx := Context(t)
	if _, err := s.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client(t).Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get k: %v", resp.Kvs)
	}
}

// unreachable is a DSN with a password where no server listens.
const unreachable = "postgres://tenure:secret@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"

// TestPostgresRules checks which DSN is tried, and when a missing server
// skips the tests and when it fails them; no message shows a password.
func TestPostgresRules(t *testing.T) {
	const unset = "(unset)"
	for _, tt := range []struct {
		env, ci      string
		wantDSN      string
		wantRequired bool
	}{
		{env: unset, ci: unset, wantDSN: PostgresDefaultDSN, wantRequired: false},
		{env: "", ci: "", wantDSN: PostgresDefaultDSN, wantRequired: false},
		{env: unreachable, ci: unset, wantDSN: unreachable, wantRequired: true},
		{env: unset, ci: "true", wantDSN: PostgresDefaultDSN, wantRequired: true},
		{env: unreachable, ci: "1", wantDSN: unreachable, wantRequired: true},
	} {
		t.Run(PostgresEnv+"="+tt.env+",CI="+tt.ci, func(t *testing.T) {
			setenv(t, PostgresEnv, tt.env, unset)
			setenv(t, "CI", tt.ci, unset)
			dsn, required := postgresDSN()
			if dsn != tt.wantDSN || required != tt.wantRequired {
				t.Fatalf("postgresDSN() = %q, %v, want %q, %v", dsn, required, tt.wantDSN, tt.wantRequired)
			}
			db, err := connectPostgres(unreachable, required)
			if db != nil || err == nil {
				t.Fatal("connected to nothing")
			}
			var skip *SkipError
			if errors.As(err, &skip) == required {
				t.Fatalf("err %T %v; want a skip: %v", err, err, !required)
			}
			if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Errorf("message %q shows the password or not the server", err)
			}
		})
	}
}

// setenv sets name to value for t, or unsets it if value is unset.
func setenv(t *testing.T, name, value, unset string) {
	if value != unset {
		t.Setenv(name, value)
		return
	}
	t.Setenv(name, "") // restores the old value when t ends
	os.Unsetenv(name)
}

// TestPostgresEnvFails: with PostgresEnv naming a server that is not there,
// Postgres fails rather than skips.
func TestPostgresEnvFails(t *testing.T) {
	t.Setenv(PostgresEnv, unreachable)
	t.Setenv("CI", "")
	dsn, db, err := Postgres()
	var skip *SkipError
	if db != nil || err == nil || errors.As(err, &skip) {
		t.Fatalf("Postgres() = %v, %v, want a failure", db, err)
	}
	if dsn != unreachable {
		t.Errorf("DSN %q, want %q", dsn, unreachable)
	}
}

func TestDescribeDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:pw@h:5/db?sslmode=disable": "postgres://u:xxxxx@h:5/db?sslmode=disable",
		"postgres://u@h/db":                      "postgres://u@h/db",
		"host=h user=u password=pw":              "the DSN in " + PostgresEnv,
	} {
		if got := describeDSN(dsn); got != want {
			t.Errorf("describeDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// TestStartTenure starts a coordinator and pings it with a stock client.
func TestStartTenure(t *testing.T) {
	addr := StartTenure(t, TenureConfig(t, 3*time.Second, 300*time.Millisecond, 8))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(Context(t)); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
}
