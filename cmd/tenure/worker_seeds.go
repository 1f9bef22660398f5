package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// A worker whose --brokers all refuse connections (a typo, the HTTP port's
// neighbour, a coordinator that is not running) would wait its whole
// --join-timeout (30 s) before saying so. While it joins, watchSeeds dials
// the seeds: once every one has refused every dial for seedsRefusedFor,
// the join ends with the reason. A seed that accepts a connection once, or
// any other dial error (a timeout: a firewall, a host still booting),
// leaves the join to its own timeout, so a coordinator that starts within
// seedsRefusedFor of the worker is still joined.
const (
	seedsRefusedFor = 5 * time.Second
	seedProbeEvery  = 250 * time.Millisecond
)

// errSeedsRefuse is the cause watchSeeds ends a join with.
var errSeedsRefuse = errors.New("every broker refuses connections")

// watchSeeds cancels with a cause naming the seeds once all of them have
// refused connections for refusedFor; it returns when ctx ends, a seed
// accepts or fails otherwise, or it cancelled.
func watchSeeds(ctx context.Context, seeds []string, refusedFor, every time.Duration, cancel context.CancelCauseFunc) {
	start := time.Now()
	d := net.Dialer{Timeout: every}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, seed := range seeds {
			c, err := d.DialContext(ctx, "tcp", seed)
			if err == nil {
				c.Close()
				return
			}
			if ctx.Err() != nil || !errors.Is(err, syscall.ECONNREFUSED) {
				return
			}
		}
		if time.Since(start) >= refusedFor {
			cancel(fmt.Errorf("%w: nothing listens at --brokers %s (connection refused for %v): is the coordinator running, and is this its --listen address?",
				errSeedsRefuse, strings.Join(seeds, ","), refusedFor))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
