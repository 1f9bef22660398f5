package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkDrainVersusRestart moves one of three stock kgo KIP-848
// consumers' partitions away three ways, in one group and one run, and
// reports what the generation log measured: the partition-seconds the
// moved partitions went without an owner, and the longest one.
//
//   - drain: `tenure groups drain`, the planned-deploy path;
//   - restart: the consumer closes (a leave) and a new one starts at once,
//     moving its share away and back;
//   - crash restart: its connection is cut, as a kill -9 would, and a new
//     one starts at once: the old partitions wait for the session to
//     expire.
//
// The timing is tenure's default heartbeat (1 s) with a 6 s session.
//
//	go test -run '^$' -bench DrainVersusRestart -benchtime 1x ./coordinator/server/
func BenchmarkDrainVersusRestart(b *testing.B) {
	const (
		heartbeat  = time.Second
		session    = 6 * time.Second
		partitions = 60
	)
	ts := startServer(b, func(c *Config) {
		c.Core.ConsumerHeartbeatInterval = heartbeat
		c.Core.ConsumerSessionTimeout = session
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newKgo(b, ts))
	if _, err := adm.CreateTopics(ctx, partitions, 1, nil, "work"); err != nil {
		b.Fatal(err)
	}
	start := func(name string, opts ...kgo.Opt) *kgo.Client {
		cl := newKgo(b, ts, append([]kgo.Opt{kgo.ClientID(name), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("work"),
			kgo.ServerSideBalancer(), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
		go func() {
			for ctx.Err() == nil {
				if f := cl.PollFetches(ctx); f.IsClientClosed() {
					return
				}
			}
		}()
		return cl
	}
	balanced := func() bool {
		d, err := adm.DescribeConsumerGroups(ctx, "g")
		if err != nil || d["g"].State != "Stable" || len(d["g"].Members) != 3 {
			return false
		}
		for _, m := range d["g"].Members {
			if len(m.Assignment["work"]) != partitions/3 {
				return false
			}
		}
		return true
	}
	member := func(client string) string {
		d, _ := adm.DescribeConsumerGroups(ctx, "g")
		for _, m := range d["g"].Members {
			if m.ClientID == client {
				return m.MemberID
			}
		}
		b.Fatalf("no member of %s", client)
		return ""
	}
	epoch := func() int32 {
		log, err := ts.GenerationLog(ctx, "g", 0, 1)
		if err != nil || len(log) == 0 {
			b.Fatalf("log: %v", err)
		}
		return log[0].Epoch
	}
	// settled waits for the group to be balanced with every hand-off
	// since epoch after done, and sums those entries.
	settled := func(after int32) (unowned, longest time.Duration, moves int) {
		eventually(b, 2*time.Minute, "the group to settle", func() bool {
			if !balanced() {
				return false
			}
			log, err := ts.GenerationLog(ctx, "g", 0, 0)
			if err != nil {
				return false
			}
			unowned, longest, moves = 0, 0, 0
			for _, e := range log {
				if e.Epoch <= after {
					break
				}
				if !e.Handoff.Done {
					return false
				}
				unowned += e.Handoff.Unowned
				longest = max(longest, e.Handoff.MaxUnowned)
				moves += len(e.Moves)
			}
			return true
		})
		return unowned, longest, moves
	}

	clients := []*kgo.Client{start("c0"), start("c1"), nil}
	proxy := newSeverableProxy(b, ts.addr)
	clients[2] = start("c2", kgo.Dialer(proxy.dial))
	eventually(b, time.Minute, "3 members, balanced", balanced)

	type figure struct {
		unowned, longest time.Duration
		moves            int
	}
	var drain, restart, crash []figure
	for b.Loop() {
		// Drain c2, then let it have partitions again.
		before := epoch()
		if err := ts.Drain("g", member("c2"), false); err != nil {
			b.Fatal(err)
		}
		eventually(b, time.Minute, "the drain's hand-off", func() bool {
			log, _ := ts.GenerationLog(ctx, "g", 0, 5)
			for _, e := range log {
				if e.Epoch > before && e.Reason == "drain" {
					return e.Handoff.Done
				}
			}
			return false
		})
		log, _ := ts.GenerationLog(ctx, "g", 0, 5)
		for _, e := range log {
			if e.Epoch > before && e.Reason == "drain" {
				drain = append(drain, figure{e.Handoff.Unowned, e.Handoff.MaxUnowned, len(e.Moves)})
			}
		}
		if err := ts.Undrain("g", member("c2")); err != nil {
			b.Fatal(err)
		}
		settled(before)

		// A plain restart: close (leave), start again.
		before = epoch()
		clients[2].Close()
		proxy.heal()
		clients[2] = start("c2", kgo.Dialer(proxy.dial))
		u, l, m := settled(before)
		restart = append(restart, figure{u, l, m})

		// A crash restart: the connection is cut; a new process starts.
		before = epoch()
		proxy.sever()
		old := clients[2]
		clients[2] = start("c2", kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ts.addr)
		}))
		u, l, m = settled(before)
		crash = append(crash, figure{u, l, m})
		old.Close()
		// The next round's c2 goes through the proxy again.
		clients[2].Close()
		proxy.heal()
		before = epoch()
		clients[2] = start("c2", kgo.Dialer(proxy.dial))
		settled(before)
	}
	report := func(name string, fs []figure) {
		var u, l time.Duration
		var m int
		for _, f := range fs {
			u += f.unowned
			l = max(l, f.longest)
			m += f.moves
		}
		n := float64(len(fs))
		b.ReportMetric(u.Seconds()/n, name+"-unowned-p-s")
		b.ReportMetric(l.Seconds(), name+"-longest-s")
		b.ReportMetric(float64(m)/n, name+"-moves")
	}
	report("drain", drain)
	report("restart", restart)
	report("crash", crash)
	b.Logf("per round: drain %v, restart %v, crash %v", drain, restart, crash)
}
