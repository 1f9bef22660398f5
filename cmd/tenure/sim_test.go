package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// captureReports sends the reports of sim and tune to a buffer for the
// duration of a test.
func captureReports(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := reportOutput
	reportOutput = &buf
	t.Cleanup(func() { reportOutput = old })
	return &buf
}

func TestSimRunsAScenario(t *testing.T) {
	out := captureReports(t)
	dir := t.TempDir()
	prefix := filepath.Join(dir, "crash")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"sim", "--scenario", "crash", "--seed", "2", "--duration", "3m",
		"--set", "timing.session=6s", "--set", "timing.heartbeat=500ms", "--partition", "3", "--out", prefix}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"scenario crash", "seed 2", "session=6s", "crash to full reassignment", "TIMELINE OF work/3", "fenced: accepted stale"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{prefix + ".json", prefix + ".csv", prefix + "-timeline.csv"} {
		if b, err := os.ReadFile(f); err != nil || len(b) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

func TestSimIsReproducible(t *testing.T) {
	out := captureReports(t)
	var hashes []string
	for range 2 {
		out.Reset()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"sim", "--scenario", "flaky-network", "--duration", "2m", "--seed", "9"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		i := strings.Index(out.String(), "trace hash")
		if i < 0 {
			t.Fatalf("no trace hash:\n%s", out.String())
		}
		hashes = append(hashes, strings.Fields(out.String()[i:])[2])
	}
	if hashes[0] != hashes[1] {
		t.Fatalf("the same seed gave trace hashes %s and %s", hashes[0], hashes[1])
	}
}

func TestSimRejectsBadInput(t *testing.T) {
	captureReports(t)
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(badFile, []byte("members n=2\ntopic name=t partitions=4\ntiming session=ten\nrun for=1m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--scenario", "nosuch"}, "neither a built-in scenario"},
		{[]string{"sim", "--scenario", badFile}, "bad line 3: timing: argument session"},
		{[]string{"sim", "--set", "timing.session"}, "want command.argument=value"},
		{[]string{"sim", "--set", "timing.sesion=1s"}, `unknown argument "sesion"`},
		{[]string{"sim", "extra"}, "unexpected arguments"},
		{[]string{"sim", "--partition", "64"}, "partitions 0 to 63"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
		if strings.Count(stderr.String(), "sim:") != 1 {
			t.Errorf("%v: the prefix is repeated: %q", tt.args, stderr.String())
		}
	}
}

func TestSimListAndShow(t *testing.T) {
	out := captureReports(t)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"sim", "--list"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, name := range []string{"steady", "gc-pauses", "crash", "rolling-restart", "scale-out", "flaky-network"} {
		if !strings.Contains(out.String(), name) {
			t.Fatalf("--list lacks %s:\n%s", name, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"sim", "--scenario", "steady", "--set", "members.n=3", "--show"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(out.String(), "members n=3") || !strings.Contains(out.String(), "run for=10m") {
		t.Fatalf("--show printed:\n%s", out.String())
	}
}

func TestSimSeedFromEnvironment(t *testing.T) {
	out := captureReports(t)
	t.Setenv("TENURE_SEED", "77")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"sim", "--duration", "30s"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(out.String(), "seed 77") {
		t.Fatalf("TENURE_SEED was not used:\n%s", out.String())
	}
}

func TestTuneSmallSearch(t *testing.T) {
	out := captureReports(t)
	dir := t.TempDir()
	plot := filepath.Join(dir, "front.svg")
	csv := filepath.Join(dir, "all.csv")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"tune", "--scenarios", "crash,steady", "--duration", "2m",
		"--set", "members.n=4", "--set", "topic.partitions=8",
		"--heartbeats", "500ms,1s", "--sessions", "3s,10s", "--rebalances", "30s", "--margins", "200ms", "--static", "false",
		"--seeds", "2", "--finalists", "2", "--plot", plot, "--out", csv}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"PARETO FRONT", "RECOMMENDED", "tenure serve --consumer-session-timeout=", "kafka defaults", "Plot written to"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(stderr.String(), "runs 100%") {
		t.Fatalf("no finished progress bar on stderr: %q", stderr.String())
	}
	for _, f := range []string{plot, csv} {
		if b, err := os.ReadFile(f); err != nil || len(b) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// runTime matches the line that says how long a search took.
var runTime = regexp.MustCompile(`\d+ runs in \d`)

// TestTuneReportIsReproducible runs one search twice, with different
// parallelism: the reports must be identical, byte for byte, for a report
// to be comparable with another (the README shows one), and the time the
// search took goes to stderr.
func TestTuneReportIsReproducible(t *testing.T) {
	out := captureReports(t)
	var reports []string
	for _, parallel := range []string{"1", "3"} {
		out.Reset()
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"tune", "--scenarios", "crash,gc-pauses", "--duration", "2m",
			"--set", "members.n=4", "--set", "topic.partitions=8",
			"--heartbeats", "500ms,1s", "--sessions", "3s,10s", "--rebalances", "30s", "--margins", "200ms", "--static", "false",
			"--seeds", "2", "--finalists", "2", "--plot", "", "--progress=false", "--parallel", parallel}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("--parallel %s: exit %d: %s", parallel, code, stderr.String())
		}
		if !runTime.MatchString(stderr.String()) {
			t.Fatalf("--parallel %s: no run time on stderr: %q", parallel, stderr.String())
		}
		reports = append(reports, out.String())
	}
	if reports[0] != reports[1] {
		t.Fatalf("the report depends on --parallel:\n--parallel 1:\n%s\n--parallel 3:\n%s", reports[0], reports[1])
	}
	if runTime.MatchString(reports[0]) {
		t.Fatalf("the report holds the run time:\n%s", reports[0])
	}
}

func TestTuneRejectsBadFlags(t *testing.T) {
	captureReports(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"tune", "--sessions", "ten"}, "--sessions"},
		{[]string{"tune", "--static", "maybe"}, "--static"},
		{[]string{"tune", "--minimise", "cost"}, "unknown goal"},
		{[]string{"tune", "--seeds", "0"}, "must be positive"},
		{[]string{"tune", "--scenarios", "nosuch"}, "neither a built-in"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
		if strings.Count(stderr.String(), "tune:") != 1 {
			t.Errorf("%v: the prefix is repeated: %q", tt.args, stderr.String())
		}
	}
}
