package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestWorkerCoordinatorOutageLog: while the coordinator is down (every
// connection to it refused), a worker whose claims retry their commits
// many times a second writes one line when the commits start failing,
// not one per failed commit, and one line when they succeed again.
// Before, 8 claims committing every 50 ms gave ~160 lines a second.
func TestWorkerCoordinatorOutageLog(t *testing.T) {
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, 20*time.Second, pauseInterval, pauseParts))
	etcd := testenv.EtcdForTest(t)
	o := newWorkerFlags(t, []string{
		"--brokers", broker, "--group", "outage", "--topic", "work",
		"--session-timeout", "20s", "--rebalance-timeout", "2s",
		"--work-interval", "20ms", "--commit-every", "1", "--write-timeout", "1s",
		"--resource", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", "outage",
	})
	sw := &switchDialer{}
	o.dial = sw.dial
	var logs syncBuffer
	log, err := newLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runWorker(ctx, o, log) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the worker did not stop")
		}
		if t.Failed() {
			t.Logf("worker's log:\n%s", logs.String())
		}
	}()
	count := func(s string) int { return strings.Count(logs.String(), s) }
	pollUntil(t, 20*time.Second, "the worker committing", func() string {
		if count("claim started") < pauseParts {
			return "not every partition claimed"
		}
		return ""
	})
	sw.down()
	// 3 s of outage, well within the 20 s session: the claims stay Owned
	// and go on writing and committing.
	time.Sleep(3 * time.Second)
	failed, still := count("commit failed; retrying"), count("commit still failing")
	if failed != 1 || still > 1 {
		t.Errorf("%d lines of commits starting to fail and %d reminders in 3 s of outage; want 1 and at most 1", failed, still)
	}
	sw.up()
	pollUntil(t, 20*time.Second, "the commits succeeding again", func() string {
		if count("commit succeeds again") == 0 {
			return "no line says so"
		}
		return ""
	})
	if n := count("commit succeeds again"); n != 1 {
		t.Errorf("%d lines of commits succeeding again, want 1", n)
	}
}

// switchDialer dials the coordinator until down, which closes every
// connection it made and refuses new ones, as a stopped coordinator does,
// until up.
type switchDialer struct {
	mu     sync.Mutex
	isDown bool
	conns  []net.Conn
}

func (s *switchDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDown {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.Join(syscall.ECONNREFUSED)}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		s.conns = append(s.conns, c)
	}
	return c, err
}

func (s *switchDialer) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isDown = true
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

func (s *switchDialer) up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isDown = false
}
