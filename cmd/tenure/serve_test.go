package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// syncBuffer is a bytes.Buffer safe for the server's logger and the test
// to use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	help := stdout.String()
	for _, want := range []string{
		"--listen", "TENURE_LISTEN", "--advertise", "--partitions", "TENURE_AUTO_CREATE_TOPICS",
		"--metrics-listen", "--min-session-timeout", "--max-session-timeout", "--consumer-session-timeout",
		"--consumer-heartbeat-interval", "--initial-rebalance-delay", "--assignors", "--max-group-size",
		"--max-partitions", "--max-topics", "--max-groups", "--max-connections", "--max-frame-size",
		"--idle-timeout", "--write-timeout", "--store", "--log-level", "commit offsets explicitly",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestServeRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "zero partitions", args: []string{"--partitions", "0"}},
		{name: "partitions above the limit", args: []string{"--partitions", "100", "--max-partitions", "10"}},
		{name: "unknown store", args: []string{"--store", "etcd"}},
		{name: "unknown assignor", args: []string{"--assignors", "uniform,nope"}},
		{name: "bad log level", args: []string{"--log-level", "loud"}},
		{name: "min session above max", args: []string{"--min-session-timeout", "1h"}},
		{name: "heartbeat above session", args: []string{"--consumer-heartbeat-interval", "1m"}},
		{name: "bad advertised address", args: []string{"--advertise", "nohost"}},
		{name: "stray argument", args: []string{"extra"}},
		{name: "from the environment", env: map[string]string{"TENURE_MAX_CONNECTIONS": "0"}},
		{name: "malformed environment value", env: map[string]string{"TENURE_IDLE_TIMEOUT": "soon"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--listen", "127.0.0.1:0"}, tc.args...)
			if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if stderr.Len() == 0 {
				t.Fatal("no message on stderr")
			}
		})
	}
}

var (
	listenRe  = regexp.MustCompile(`"listen": "([^"]+)"`)
	metricsRe = regexp.MustCompile(`"metrics": "([^"]+)"`)
)

// TestServeStartsAndStops runs `tenure serve` on a free port, talks to it
// with a stock kgo client, scrapes its metrics, and stops it by cancelling
// the context, as SIGINT does.
func TestServeStartsAndStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Setenv("TENURE_PARTITIONS", "12") // the environment binding, end to end

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, io.Discard, stderr)
	}()

	var addr, metricsURL string
	deadline := time.Now().Add(10 * time.Second)
	for addr == "" || metricsURL == "" {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not report its addresses; stderr:\n%s", stderr.String())
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited with %d; stderr:\n%s", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		logs := stderr.String()
		if m := listenRe.FindStringSubmatch(logs); m != nil {
			addr = m[1]
		}
		if m := metricsRe.FindStringSubmatch(logs); m != nil {
			metricsURL = m[1]
		}
	}
	if !strings.Contains(stderr.String(), "in memory only") {
		t.Errorf("no warning that the memory store is not durable")
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, reqCancel := context.WithTimeout(ctx, 10*time.Second)
	// -1 partitions: the server's default, set from the environment.
	created, err := kadm.NewClient(cl).CreateTopics(reqCtx, -1, -1, nil, "work")
	reqCancel()
	cl.Close()
	if err != nil || created["work"].Err != nil || created["work"].NumPartitions != 12 {
		t.Fatalf("create topic: %v; %+v", err, created["work"])
	}

	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tenure_requests_total{api="CreateTopics",error="NONE"}`, "tenure_topics 1", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d after cancellation; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10s of cancellation")
	}
}
