//go:build unix

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/internal/chaos"
)

// chaosCommitterCommand is `tenure chaos-committer`, hidden: one of the
// stock kgo consumers a chaos run starts as a process of its own, so that
// it can be killed and paused like the workers.
func chaosCommitterCommand() *command {
	return &command{
		name:    "chaos-committer",
		summary: "(used by tenure chaos) a stock kgo consumer (KIP-848 or classic) that commits offsets and logs every commit, fetch and rebalance callback",
		hidden:  true,
		setup:   setupChaosCommitter,
	}
}

func setupChaosCommitter(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	var (
		name, brokers, route, group, topic, logFile, logLevel string
		partitions                                            int
		interval                                              time.Duration
		classic                                               bool
	)
	fs.StringVar(&name, "name", "c0", "`name` of the committer in its log lines")
	fs.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated `host:port` list of the coordinator's nodes")
	fs.StringVar(&route, "route", "", "dial through proxies: comma-separated `host:port=host:port` pairs (see tenure worker --help)")
	fs.StringVar(&group, "group", "chaos-offsets", "`group` to join")
	fs.StringVar(&topic, "topic", "work", "`topic` to consume")
	fs.IntVar(&partitions, "partitions", 64, "`partitions` of the topic, all read by each fetch")
	fs.DurationVar(&interval, "interval", 50*time.Millisecond, "time between two commits of a partition")
	fs.StringVar(&logFile, "log", "", "`file` to append one JSON line per commit, fetch and rebalance callback of a partition to (required)")
	fs.BoolVar(&classic, "classic", false, "join with the classic protocol (cooperative-sticky) instead of KIP-848")
	fs.StringVar(&logLevel, "log-level", "info", "log `level` of the client: debug, info, warn or error")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		if logFile == "" {
			return usagef("--log is required")
		}
		if partitions <= 0 || interval <= 0 {
			return usagef("--partitions and --interval must be positive")
		}
		rs, err := parseRoutes(route)
		if err != nil {
			return err
		}
		log, err := newLogger(fs.Output(), logLevel)
		if err != nil {
			return err
		}
		defer log.Sync()
		f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("log: %w", err)
		}
		defer f.Close()
		return chaos.RunCommitter(ctx, chaos.CommitterConfig{
			Name:       name,
			ClientOpts: []kgo.Opt{kgo.SeedBrokers(splitList(brokers)...), kgo.Dialer(rs.dialer())},
			Group:      group, Topic: topic, Classic: classic, Partitions: int32(partitions), Interval: interval,
			Log: f, Logger: log,
		})
	}
}
