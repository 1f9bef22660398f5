// Command kgoconsumer is a stock franz-go (kgo) group consumer for
// tenure's process tests and benchmarks: it joins a group with kgo's own
// group management, consumes one topic, and prints every partition
// callback on stdout as one line ("assigned 0,3", "revoked 3", "lost 0"),
// so that a parent process can follow who owns what from the clients'
// own view. SIGTERM or SIGINT closes the client, which leaves the group as
// kgo does; SIGKILL leaves nothing behind but closed connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	var (
		brokers   = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
		group     = flag.String("group", "g", "consumer group")
		topic     = flag.String("topic", "jobs", "topic to consume")
		protocol  = flag.String("protocol", "consumer", "group protocol: consumer (KIP-848, the coordinator's timing) or classic")
		session   = flag.Duration("session-timeout", 0, "classic session timeout (0: kgo's default, 45s)")
		heartbeat = flag.Duration("heartbeat-interval", 0, "classic heartbeat interval (0: kgo's default, 3s)")
	)
	flag.Parse()
	say := func(what string, m map[string][]int32) {
		ps := slices.Clone(m[*topic])
		if len(ps) == 0 {
			return
		}
		slices.Sort(ps)
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = strconv.Itoa(int(p))
		}
		fmt.Printf("%s %s\n", what, strings.Join(s, ","))
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { say("assigned", m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { say("revoked", m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { say("lost", m) }),
	}
	switch *protocol {
	case "consumer":
		opts = append(opts, kgo.ServerSideBalancer())
	case "classic":
		if *session > 0 {
			opts = append(opts, kgo.SessionTimeout(*session))
		}
		if *heartbeat > 0 {
			opts = append(opts, kgo.HeartbeatInterval(*heartbeat))
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown protocol %q\n", *protocol)
		os.Exit(2)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Println("started")
	for ctx.Err() == nil {
		cl.PollFetches(ctx)
	}
	cl.Close() // leaves the group
	fmt.Println("closed")
}
