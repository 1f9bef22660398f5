package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/workload"
)

// blackholeWriteTimeout is the worker's --write-timeout in the black-hole
// test: short, so that the test sees several timeouts quickly.
const blackholeWriteTimeout = 300 * time.Millisecond

// TestWorkerBlackholed cuts a working worker off from both its resource
// and its coordinator without closing anything (packets vanish, as under a
// network partition or a frozen peer): its writes, commits and offset
// reads give up after --write-timeout rather than hang, and the attempt
// log says so; a SIGTERM then stops it cleanly (status 0) within a
// session timeout, before anything is reconnected, with no goroutine left.
func TestWorkerBlackholed(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })

	hole := new(workload.Pause)
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, pauseSession, pauseInterval, pauseParts))
	etcd := testenv.EtcdForTest(t)
	proxy := startProxy(t, strings.TrimPrefix(etcd.Endpoints[0], "http://"), hole)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "w.jsonl")

	fs := newWorkerFlags(t, []string{
		"--brokers", broker, "--group", "blackhole", "--topic", "work",
		"--session-timeout", pauseSession.String(), "--rebalance-timeout", "2s",
		"--work-interval", "50ms", "--commit-every", "5", "--write-timeout", blackholeWriteTimeout.String(),
		"--resource", "etcd", "--etcd-endpoints", proxy, "--etcd-prefix", "blackhole",
		"--attempt-log", logPath,
	})
	fs.dial = hole.Dialer(nil)
	var mu sync.Mutex
	var writes []workload.Write
	fs.observe = func(wr workload.Write) {
		mu.Lock()
		writes = append(writes, wr)
		mu.Unlock()
	}
	failedSince := func(since time.Time) (ok, failed int) {
		mu.Lock()
		defer mu.Unlock()
		for _, wr := range writes {
			switch {
			case wr.At.Before(since):
			case wr.Err == nil:
				ok++
			case !errors.Is(wr.Err, epoch.ErrStale):
				failed++
			}
		}
		return ok, failed
	}
	var logs syncBuffer
	log, err := newLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runWorker(ctx, fs, log) }()
	defer func() {
		if t.Failed() {
			t.Logf("worker's log:\n%s", logs.String())
		}
	}()

	pollUntil(t, 20*time.Second, "the worker writing", func() string {
		if ok, _ := failedSince(time.Time{}); ok < 20 {
			return "fewer than 20 records written"
		}
		return ""
	})
	cut := time.Now()
	hole.Begin()
	pollUntil(t, 10*blackholeWriteTimeout, "writes timing out", func() string {
		if _, failed := failedSince(cut); failed < 3 {
			return "fewer than 3 writes failed since the cut"
		}
		return ""
	})

	stopAt := time.Now()
	cancel() // SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("worker stopped with %v, want a clean stop", err)
		}
		took := time.Since(stopAt)
		if took > pauseSession+2*time.Second {
			t.Errorf("stopping took %v, more than a session timeout (%v) and slack", took, pauseSession)
		}
		t.Logf("stopped %v after the SIGTERM, %v after the cut", took, time.Since(cut))
	case <-time.After(3 * pauseSession):
		t.Fatal("the worker did not stop while cut off")
	}
	hole.End()

	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := workload.ReadAttempts(f)
	if err != nil {
		t.Fatal(err)
	}
	timedOut := map[workload.Op]int{}
	for _, l := range lines {
		if l.Op == workload.OpClaim {
			continue
		}
		if d := l.T1.Sub(l.T0); d > blackholeWriteTimeout+time.Second {
			t.Errorf("%s attempt took %v, with a write timeout of %v", l.Op, d, blackholeWriteTimeout)
		}
		if l.Outcome == workload.OutcomeError && strings.Contains(l.Err, "deadline exceeded") {
			timedOut[l.Op]++
		}
	}
	t.Logf("timed out attempts: %v", timedOut)
	if timedOut[workload.OpAppend] == 0 {
		t.Errorf("no append timed out in the attempt log (%v)", timedOut)
	}
	if !strings.Contains(logs.String(), "write failed; retrying") {
		t.Error("the worker's log does not report the failed writes")
	}
}

// newWorkerFlags parses `tenure worker` flags for a test.
func newWorkerFlags(t *testing.T, args []string) *workerOptions {
	t.Helper()
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	o := addWorkerFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

// startProxy forwards the connections made to the address it returns to
// target, through pause: while it is on, they carry nothing, as a black
// hole does. Everything is closed when the test ends.
func startProxy(t *testing.T, target string, pause *workload.Pause) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	closed := false
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			frozen := pause.Conn(up)
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				frozen.Close()
				return
			}
			conns = append(conns, c, frozen)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(frozen, c); frozen.Close(); c.Close() })
			wg.Go(func() { _, _ = io.Copy(c, frozen); frozen.Close(); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
