// Command kgo is the fail-over matrix's franz-go driver: a stock kgo
// consumer, KIP-848 (-protocol consumer) or classic cooperative-sticky
// (-protocol classic), that consumes one topic in a group and prints each
// assignment callback as a JSON line (see package interop's Event) on
// stdout until SIGTERM, when it leaves the group and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	brokers  = flag.String("brokers", "", "comma-separated seed brokers: every node of the set")
	group    = flag.String("group", "", "consumer group")
	topic    = flag.String("topic", "", "topic to consume")
	protocol = flag.String("protocol", "consumer", "group protocol: consumer (KIP-848) or classic")
	session  = flag.Duration("session-timeout", 10*time.Second, "classic session timeout")
	logLevel = flag.String("log-level", "warn", "kgo log level on stderr: debug, info, warn, error")
	overhead = flag.Duration("request-timeout-overhead", 3*time.Second, "classic: kgo's RequestTimeoutOverhead, below the session timeout")
)

// out serializes the event lines.
var out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func emit(ev string, ps map[string][]int32, msg string) {
	var parts []int32
	for _, p := range ps {
		parts = append(parts, p...)
	}
	slices.Sort(parts)
	out.mu.Lock()
	defer out.mu.Unlock()
	out.enc.Encode(struct {
		T          float64 `json:"t"`
		Ev         string  `json:"ev"`
		Partitions []int32 `json:"partitions"`
		Msg        string  `json:"msg,omitempty"`
	}{float64(time.Now().UnixMicro()) / 1e3, ev, parts, msg})
}

func main() {
	flag.Parse()
	out.enc = json.NewEncoder(os.Stdout)
	level := kgo.LogLevelWarn
	switch *logLevel {
	case "debug":
		level = kgo.LogLevelDebug
	case "info":
		level = kgo.LogLevelInfo
	case "error":
		level = kgo.LogLevelError
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic),
		// The topics hold no records: nothing to commit.
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(time.Second),
		// Timestamps line the client's log up with the nodes' logs.
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string { return time.Now().UTC().Format("15:04:05.000000 ") })),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { emit("assigned", m, "") }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { emit("revoked", m, "") }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { emit("lost", m, "") }),
	}
	switch *protocol {
	case "consumer":
		opts = append(opts, kgo.ServerSideBalancer())
	case "classic":
		// A classic heartbeat is retried (a read timeout is a retryable
		// broker error) only while its RetryTimeout, the session timeout,
		// lasts; with the default RequestTimeoutOverhead (10 s) one
		// heartbeat into a frozen coordinator's open socket spends all of
		// it, and the session ends (OnPartitionsLost). 3 s leaves room for
		// retries, which reach the new coordinator (docs/FAILOVER.md).
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(*session),
			kgo.RequestTimeoutOverhead(*overhead))
	default:
		fmt.Fprintf(os.Stderr, "unknown -protocol %q\n", *protocol)
		os.Exit(2)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	emit("started", nil, "")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				emit("error", nil, fmt.Sprintf("%s/%d: %v", t, p, err))
			}
		})
	}
	emit("stopping", nil, "")
	cl.Close()
}
