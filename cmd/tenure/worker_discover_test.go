package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// TestWorkerFindsCoordinatorEtcd: `tenure worker` with no etcd flags, as
// the README pastes it, works with `tenure serve` on its default store (an
// embedded etcd on a port the kernel chose): it asks the coordinator's
// admin API for its etcd and writes its records there. Before, it dialled
// 127.0.0.1:2379 and gave up after 10 s with "context deadline exceeded".
func TestWorkerFindsCoordinatorEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for seconds")
	}
	tenure := proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure")[0]
	dir := t.TempDir()
	coord := proctest.StartServe(t, "serve", tenure, "serve", "--listen", "{addr}", "--http", "{http}",
		"--data-dir", filepath.Join(dir, "data"), "--partitions", "4")
	httpAddr := coord.HTTP

	var out syncBuffer
	w := exec.Command(tenure, "worker", "--brokers", coord.Addr, "--admin", "http://"+httpAddr, "--group", "demo")
	w.Env = []string{} // no TENURE_ variable of the test's environment
	w.Stdout, w.Stderr = &out, &out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()
	defer func() {
		_ = w.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil && !t.Failed() {
				t.Errorf("the worker exited with %v after SIGTERM", err)
			}
		case <-time.After(30 * time.Second):
			_ = w.Process.Kill()
			t.Error("the worker did not stop within 30 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("worker's output:\n%s", out.String())
		}
	}()
	pollUntil(t, 60*time.Second, "the worker claiming the topic's 4 partitions", func() string {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the worker exited: %v", err)
		default:
		}
		if n := strings.Count(out.String(), "claim started"); n < 4 {
			return fmt.Sprintf("%d claims started", n)
		}
		return ""
	})
	if !strings.Contains(out.String(), "the records go to the coordinator's etcd") {
		t.Error("the worker does not say where its records go")
	}

	// --records reads them back from the same etcd, found the same way,
	// while the worker writes: one token (the group's first epoch), no
	// record written twice, none after a newer token.
	records := func(group string) string {
		c := exec.Command(tenure, "worker", "--records", "--admin", "http://"+httpAddr, "--group", group)
		c.Env = []string{}
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("tenure worker --records --group %s: %v\n%s", group, err, b)
		}
		return string(b)
	}
	row := regexp.MustCompile(`(?m)^1 +([1-9]\d*) +0 +0$`)
	pollUntil(t, 30*time.Second, "worker --records showing token 1's records", func() string {
		got := records("demo")
		if !strings.HasPrefix(got, "TOKEN  RECORDS  WRITTEN AGAIN  AFTER A NEWER TOKEN\n") || !row.MatchString(got) ||
			strings.Count(got, "\n") != 2 {
			return fmt.Sprintf("%q", got)
		}
		return ""
	})
	if got := records("nobody"); got != "TOKEN  RECORDS  WRITTEN AGAIN  AFTER A NEWER TOKEN\n" {
		t.Errorf("--records of a group that wrote nothing: %q", got)
	}
}
