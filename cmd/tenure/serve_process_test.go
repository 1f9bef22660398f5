package main

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// buildTenure returns the path of a tenure binary built for t.
func buildTenure(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs tenure processes")
	}
	return proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure")[0]
}

// exitWithin waits for cmd to exit and returns its exit code and how long
// it took after since, failing t if it takes longer than limit.
func exitWithin(t *testing.T, cmd *exec.Cmd, limit time.Duration, out fmt.Stringer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(limit):
		cmd.Process.Signal(syscall.SIGQUIT)
		<-done
		t.Fatalf("%s still running after %v; output:\n%s", strings.Join(cmd.Args, " "), limit, out)
		return -1
	}
}

// TestServeDataDirInUse starts a second `tenure serve` process on the data
// dir of a running one: it fails at once, naming the directory and the
// process that holds it.
func TestServeDataDirInUse(t *testing.T) {
	bin := buildTenure(t)
	dir := t.TempDir() + "/data"
	first := proctest.StartServe(t, "first", bin, "serve", "--listen", "{addr}", "--http", "127.0.0.1:0", "--data-dir", dir)

	second := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", dir)
	var out syncBuffer
	second.Stdout, second.Stderr = &out, &out
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	if code := exitWithin(t, second, 30*time.Second, &out); code != 1 {
		t.Errorf("the second serve exited with %d, want 1", code)
	}
	for _, want := range []string{dir, fmt.Sprintf("process %d", first.Pid())} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the second serve's error does not name %q:\n%s", want, out.String())
		}
	}
	if first.Exited() {
		t.Errorf("the first serve exited:\n%s", first.Output())
	}
}

// TestServeInterruptedWhileStarting sends SIGINT and SIGTERM to nodes
// that wait, at start-up, for etcd peers that never come: each exits
// promptly.
func TestServeInterruptedWhileStarting(t *testing.T) {
	bin := buildTenure(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			var peers []string
			for i := range 3 {
				addr, err := proctest.FreeAddr()
				if err != nil {
					t.Fatal(err)
				}
				peers = append(peers, fmt.Sprintf("n%d=http://%s", i+1, addr))
			}
			cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", t.TempDir(),
				"--etcd-name", "n1", "--etcd-initial-cluster", strings.Join(peers, ","))
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The member says whom it waits for every few seconds.
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "quorum") && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			if code := exitWithin(t, cmd, 15*time.Second, &out); code == 0 {
				t.Errorf("exit 0 from an interrupted start-up")
			}
		})
	}
}
