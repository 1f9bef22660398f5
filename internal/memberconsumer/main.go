// Command memberconsumer is a group member built on tenure's member
// library, as a process of its own, for tenure's process tests: it joins a
// group, runs a handler for each partition it claims, and prints one line
// on stdout when a handler starts ("assigned 3") and when it returns
// ("revoked 3"), the format of internal/kgoconsumer, so that a parent
// process follows who works on what. It exists so that a test can stop
// the whole process (SIGSTOP: its timers stop with it, as in a real
// stop-the-world pause) or kill it, which an in-process member cannot
// show. SIGTERM or SIGINT closes the session (its handlers return, it
// leaves the group).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/member"
)

func main() {
	var (
		brokers   = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
		group     = flag.String("group", "g", "consumer group")
		topic     = flag.String("topic", "jobs", "topic to consume")
		session   = flag.Duration("session-timeout", 0, "the coordinator's session timeout (member.Config.SessionTimeout; 0: the library's default)")
		rebalance = flag.Duration("rebalance-timeout", 0, "member.Config.RebalanceTimeout (0: the library's default)")
		margin    = flag.Duration("suspect-margin", 0, "member.Config.SuspectMargin (0: the library's default)")
		request   = flag.Duration("request-timeout", 0, "member.Config.RequestTimeout (0: the library's default)")
		drift     = flag.Float64("max-drift", 0, "member.Config.MaxDrift (0: the library's default)")
	)
	flag.Parse()
	// Lines from concurrent handlers must not interleave.
	var mu sync.Mutex
	say := func(what string, p int32) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("%s %d\n", what, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log, err := zap.NewProduction()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := member.Join(ctx, member.Config{
		Brokers:          strings.Split(*brokers, ","),
		Group:            *group,
		Topics:           []string{*topic},
		SessionTimeout:   *session,
		RebalanceTimeout: *rebalance,
		SuspectMargin:    *margin,
		RequestTimeout:   *request,
		MaxDrift:         *drift,
		Logger:           log.WithOptions(zap.IncreaseLevel(zap.WarnLevel)),
	}, func(c *member.Claim) {
		say("assigned", c.Partition())
		<-c.Context().Done()
		say("revoked", c.Partition())
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("started")
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(cctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("closed")
}
