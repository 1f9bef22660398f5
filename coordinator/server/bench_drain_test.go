package server

import (
	"context"
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
//   - drain: `tenure groups drain`, the planned-deploy path, then a
//     restart of the member, which holds nothing, and its return;
//   - restart: the consumer closes (a leave) holding its share, and
//     comes back;
//   - crash restart: its connection is cut, as a kill -9 would; its share
//     waits for the session to expire, and it comes back.
//
// Each restart keeps the process away for 2 s. The timing is tenure's
// default heartbeat (1 s) with a 6 s session. A round's figure sums the
// generation log entries of its moves: the share going away and coming
// back.
//
//	go test -run '^$' -bench DrainVersusRestart -benchtime 1x ./coordinator/server/
func BenchmarkDrainVersusRestart(b *testing.B) {
	const (
		heartbeat  = time.Second
		session    = 6 * time.Second
		partitions = 60
		// restartGap is how long a restarting process is away.
		restartGap = 2 * time.Second
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
	present := func(id string) bool {
		d, _ := adm.DescribeConsumerGroups(ctx, "g")
		for _, m := range d["g"].Members {
			if m.MemberID == id {
				return true
			}
		}
		return false
	}
	// settled waits for the group to be balanced without member gone,
	// with every hand-off since epoch after done, and sums those entries.
	settled := func(after int32, gone string, stopAt time.Time) (unowned, unserved, longest time.Duration, moves int) {
		eventually(b, 2*time.Minute, "the group to settle", func() bool {
			if !balanced() || gone != "" && present(gone) {
				return false
			}
			log, err := ts.GenerationLog(ctx, "g", 0, 0)
			if err != nil {
				return false
			}
			unowned, unserved, longest, moves = 0, 0, 0, 0
			for _, e := range log {
				if e.Epoch <= after {
					break
				}
				if !e.Handoff.Done {
					return false
				}
				unowned += e.Handoff.Unowned
				unserved += e.Handoff.Unowned
				longest = max(longest, e.Handoff.MaxUnowned)
				moves += len(e.Moves)
				// The gone member's partitions went unserved from its
				// stop, which the coordinator does not see, to their
				// release (this entry's start), and then unowned.
				for _, mv := range e.Moves {
					if mv.From == gone && mv.To != "" && e.Time.After(stopAt) {
						unserved += e.Time.Sub(stopAt)
					}
				}
				b.Logf("epoch %d %s: %d moves, %d granted, %d superseded, unowned %v, longest %v",
					e.Epoch, e.Reason, len(e.Moves), e.Handoff.Granted, e.Handoff.Superseded, e.Handoff.Unowned, e.Handoff.MaxUnowned)
			}
			return true
		})
		return unowned, unserved, longest, moves
	}

	// handedOff sums the entries of reason after epoch after, once
	// their hand-offs are done.
	handedOff := func(after int32, reason string) (unowned, longest time.Duration, moves int, ok bool) {
		log, err := ts.GenerationLog(ctx, "g", 0, 10)
		if err != nil {
			return 0, 0, 0, false
		}
		for _, e := range log {
			if e.Epoch <= after || e.Reason != reason {
				continue
			}
			if !e.Handoff.Done {
				return 0, 0, 0, false
			}
			unowned += e.Handoff.Unowned
			longest = max(longest, e.Handoff.MaxUnowned)
			moves += len(e.Moves)
			ok = true
		}
		return unowned, longest, moves, ok
	}

	clients := []*kgo.Client{start("c0"), start("c1"), nil}
	proxy := newSeverableProxy(b, ts.addr)
	clients[2] = start("c2", kgo.Dialer(proxy.dial))
	eventually(b, time.Minute, "3 members, balanced", balanced)
	roundNo := 0

	type figure struct {
		unowned, unserved, longest time.Duration
		moves                      int
	}
	add := func(fs *[]figure, u, us, l time.Duration, m int) {
		if len(*fs) == 0 || len(*fs) < roundNo {
			*fs = append(*fs, figure{})
		}
		f := &(*fs)[len(*fs)-1]
		f.unowned += u
		f.unserved += us
		f.longest = max(f.longest, l)
		f.moves += m
	}
	// restart stops c2 (with stop), waits restartGap, as a process that
	// restarts does, and starts it again; it returns once the group has
	// settled without the old member.
	restart := func(stop func()) (time.Duration, time.Duration, time.Duration, int) {
		before, gone, stopAt := epoch(), member("c2"), time.Now()
		stop()
		time.Sleep(restartGap)
		proxy = newSeverableProxy(b, ts.addr) // a new process, a new connection
		clients[2] = start("c2", kgo.Dialer(proxy.dial))
		return settled(before, gone, stopAt)
	}
	var drains, restarts, crashes []figure
	for b.Loop() {
		roundNo++
		// Planned: drain c2, then restart it holding nothing; it
		// comes back as a new member and takes its share again.
		before := epoch()
		if err := ts.Drain("g", member("c2"), false); err != nil {
			b.Fatal(err)
		}
		eventually(b, time.Minute, "the drain's hand-off", func() bool {
			u, l, m, ok := handedOff(before, "drain")
			if ok {
				add(&drains, u, u, l, m) // the drained member serves until it releases
			}
			return ok
		})
		u, us, l, m := restart(func() { clients[2].Close() })
		add(&drains, u, us, l, m)

		// A plain restart: the consumer closes (a leave) holding its
		// share, and comes back.
		u, us, l, m = restart(func() { clients[2].Close() })
		add(&restarts, u, us, l, m)

		// A crash restart: its connection is cut, as kill -9 would;
		// the old member holds its share until its session expires.
		old := clients[2]
		u, us, l, m = restart(proxy.sever)
		old.Close()
		add(&crashes, u, us, l, m)
	}
	report := func(name string, fs []figure) {
		var u, us, l time.Duration
		var m int
		for _, f := range fs {
			u += f.unowned
			us += f.unserved
			l = max(l, f.longest)
			m += f.moves
		}
		n := float64(len(fs))
		b.ReportMetric(u.Seconds()/n, name+"-unowned-p-s")
		b.ReportMetric(us.Seconds()/n, name+"-unserved-p-s")
		b.ReportMetric(l.Seconds(), name+"-longest-s")
		b.ReportMetric(float64(m)/n, name+"-moves")
	}
	report("drain", drains)
	report("restart", restarts)
	report("crash", crashes)
	b.Logf("per round: drain %v, restart %v, crash restart %v", drains, restarts, crashes)
}
