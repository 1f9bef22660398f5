package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// runKeys runs `tenure keys args...` and returns its output.
func runKeys(t *testing.T, args ...string) (string, error) {
	t.Helper()
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var out bytes.Buffer
	runIt := setupKeysOut(fs, &out)
	pos, err := parseCommandLine(fs, keysCommand().subs, args, noEnv)
	if err != nil {
		return "", err
	}
	err = runIt(context.Background(), pos)
	return out.String(), err
}

// TestKeysCommand: list, rotate and revoke through a coordinator's admin
// API, as a table and as the JSON a resource loads; and the mistakes a
// user makes, each a usage error that says what is wrong.
func TestKeysCommand(t *testing.T) {
	cfg := testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 4)
	cfg.SignGrants = true
	srv, _ := testenv.StartTenureServer(t, cfg)
	mux := http.NewServeMux()
	adminapi.Register(mux, srv)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	admin := []string{"--admin", hs.URL}

	var first string
	pollUntil(t, 5*time.Second, "a key listed", func() string {
		out, err := runKeys(t, append([]string{"list"}, admin...)...)
		if err != nil {
			return err.Error()
		}
		m := regexp.MustCompile(`(?m)^([0-9a-f]{16})\s+active\s`).FindStringSubmatch(out)
		if m == nil {
			return "no active key in:\n" + out
		}
		first = m[1]
		return ""
	})
	out, err := runKeys(t, append([]string{"rotate"}, admin...)...)
	if err != nil || !regexp.MustCompile(`(?m)^`+first+`\s+retired\s`).MatchString(out) {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	out, err = runKeys(t, append([]string{"revoke", first, "-o", "json"}, admin...)...)
	if err != nil {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	ks, err := epoch.ParseKeySet([]byte(out))
	if err != nil {
		t.Fatalf("the JSON of revoke does not load as a key set: %v\n%s", err, out)
	}
	if k, _ := ks.Lookup(epoch.KeyID(first)); k.State != epoch.KeyRevoked || len(ks.Keys()) != 2 {
		t.Fatalf("after revoke: %+v", ks.Keys())
	}
	if _, err := runKeys(t, append([]string{"revoke", first}, admin...)...); err != nil {
		t.Fatalf("revoking a revoked key again: %v", err)
	}
	active, _ := ks.Active()
	if _, err := runKeys(t, append([]string{"revoke", string(active.ID)}, admin...)...); err == nil || !strings.Contains(err.Error(), "rotate first") {
		t.Fatalf("revoking the active key: %v", err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"show"}, `unknown subcommand "show"`},
		{[]string{"list", "x"}, "takes no argument"},
		{[]string{"revoke"}, "takes one key ID"},
		{[]string{"revoke", "KEY"}, "is not 16 lower-case hex"},
		{[]string{"list", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"list", "--now"}, "unknown flag --now for keys list (it is a flag of keys rotate)"},
	} {
		_, err := runKeys(t, c.args...)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), c.want) {
			t.Errorf("keys %q: %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
	if _, err := runKeys(t, "list", "--admin", "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "--http") {
		t.Errorf("keys list of a node that is not there: %v, want an error naming --http", err)
	}
}

// TestKeysRotateStaged: against a coordinator with a publish delay,
// rotate publishes a pending key and the active one stays; a second
// rotate says a rotation is pending; rotate --now makes the pending key
// active.
func TestKeysRotateStaged(t *testing.T) {
	cfg := testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 4)
	cfg.SignGrants, cfg.KeyPublishDelay = true, time.Hour
	srv, _ := testenv.StartTenureServer(t, cfg)
	mux := http.NewServeMux()
	adminapi.Register(mux, srv)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	admin := []string{"--admin", hs.URL}

	out, err := runKeys(t, append([]string{"rotate"}, admin...)...)
	active := regexp.MustCompile(`(?m)^([0-9a-f]{16})\s+active\s`).FindStringSubmatch(out)
	pending := regexp.MustCompile(`(?m)^([0-9a-f]{16})\s+pending\s`).FindStringSubmatch(out)
	if err != nil || active == nil || pending == nil {
		t.Fatalf("rotate with a publish delay: %v, want an active and a pending key:\n%s", err, out)
	}
	if _, err := runKeys(t, append([]string{"rotate"}, admin...)...); err == nil || !strings.Contains(err.Error(), "rotation is pending") ||
		!strings.Contains(err.Error(), "rotate --now") {
		t.Fatalf("a second rotate: %v, want one saying a rotation is pending and naming rotate --now", err)
	}
	out, err = runKeys(t, append([]string{"rotate", "--now"}, admin...)...)
	if err != nil || !regexp.MustCompile(`(?m)^`+pending[1]+`\s+active\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+active[1]+`\s+retired\s`).MatchString(out) {
		t.Fatalf("rotate --now: %v, want %s active and %s retired:\n%s", err, pending[1], active[1], out)
	}
}

func TestKeysHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"keys", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("keys --help: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"list", "rotate", "revoke ID", "--sign-grants", "--admin", "--output"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("keys --help lacks %q:\n%s", want, stdout.String())
		}
	}
	if code := run(context.Background(), []string{"keys"}, io.Discard, &stderr); code != 2 {
		t.Errorf("keys without a subcommand: exit %d, want 2", code)
	}
}
