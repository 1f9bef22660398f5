package readme

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// TestSkippedSuites runs .ci/skipped.sh, which `make test` runs first, on
// a machine without promtool, Chromium or a PostgreSQL server, then with
// all three: one line per suite that will skip, then none.
func TestSkippedSuites(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs(filepath.Join(root, ".ci", "skipped.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dead, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	pg, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	tools := t.TempDir()
	for _, name := range []string{"promtool", "chromium"} {
		if err := os.WriteFile(filepath.Join(tools, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	for _, tc := range []struct {
		name  string
		env   []string
		lines []string
	}{
		{"nothing installed", []string{"PATH=" + t.TempDir(), "TENURE_PG_PORT=" + port(dead)},
			[]string{"promtool is not on PATH", "chromium is not installed", "no server on " + dead}},
		{"everything installed", []string{"PATH=" + tools, "TENURE_PG_PORT=" + port(pg.Addr().String())}, nil},
		{"a DSN given", []string{"PATH=" + tools, "TENURE_PG_PORT=" + port(dead), "TENURE_TEST_POSTGRES=postgres://x@" + dead + "/x"}, nil},
		{"tools required", []string{"PATH=" + t.TempDir(), "TENURE_PG_PORT=" + port(dead), "TENURE_REQUIRE_TOOLS=1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bash, script)
			cmd.Env = tc.env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var got []string
			if s := strings.TrimSpace(string(out)); s != "" {
				got = strings.Split(s, "\n")
			}
			if len(got) != len(tc.lines) {
				t.Fatalf("%d lines, want %d:\n%s", len(got), len(tc.lines), out)
			}
			for i, want := range tc.lines {
				if !strings.HasPrefix(got[i], "make test: skipping ") || !strings.Contains(got[i], want) {
					t.Errorf("line %d is %q, want a skip naming %q", i+1, got[i], want)
				}
			}
		})
	}
}
