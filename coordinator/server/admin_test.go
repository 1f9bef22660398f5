package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/coordinator"
)

// TestDrainStockConsumers drains one of three stock kgo KIP-848 consumers:
// its partitions go to the others, never to two consumers at once, the
// drained member stays with nothing, and the generation log explains it
// (reason, moves, the hand-off's unowned time), as do the metrics.
func TestDrainStockConsumers(t *testing.T) {
	const heartbeat = 250 * time.Millisecond
	ts := startServer(t, func(c *Config) {
		c.Core.ConsumerHeartbeatInterval = heartbeat
		c.Core.ConsumerSessionTimeout = 10 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, ts))
	if _, err := adm.CreateTopics(ctx, 12, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}

	// held[p] is the client holding partition p, as the clients see it.
	var mu sync.Mutex
	held := make(map[int32]string)
	var overlaps []string
	start := func(name string) *kgo.Client {
		cl := newKgo(t, ts,
			kgo.ClientID(name),
			kgo.ConsumerGroup("g"),
			kgo.ConsumeTopics("work"),
			kgo.ServerSideBalancer(),
			kgo.FetchMaxWait(100*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range m["work"] {
					if other, ok := held[p]; ok && other != name {
						overlaps = append(overlaps, fmt.Sprintf("work[%d] given to %s while %s holds it", p, name, other))
					}
					held[p] = name
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range m["work"] {
					if held[p] == name {
						delete(held, p)
					}
				}
			}),
		)
		go func() {
			for ctx.Err() == nil {
				if f := cl.PollFetches(ctx); f.IsClientClosed() {
					return
				}
			}
		}()
		return cl
	}
	for i := range 3 {
		start(fmt.Sprintf("c%d", i))
	}
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		n := make(map[string]int)
		for _, c := range held {
			n[c]++
		}
		return n
	}
	eventually(t, 30*time.Second, "4 partitions each", func() bool {
		n := count()
		return n["c0"] == 4 && n["c1"] == 4 && n["c2"] == 4
	})
	member := func(client string) string {
		d, err := adm.DescribeConsumerGroups(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range d["g"].Members {
			if m.ClientID == client {
				return m.MemberID
			}
		}
		t.Fatalf("no member of client %s in %+v", client, d["g"].Members)
		return ""
	}
	c0 := member("c0")

	if err := ts.Drain("g", "nobody", false); !errors.Is(err, coordinator.ErrUnknownMember) {
		t.Fatalf("drain of an unknown member: %v", err)
	}
	if err := ts.Drain("nogroup", c0, false); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("drain in an unknown group: %v", err)
	}
	if err := ts.Drain("g", c0, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "c0 drained, 6 partitions each for c1 and c2", func() bool {
		n := count()
		return n["c0"] == 0 && n["c1"] == 6 && n["c2"] == 6
	})
	eventually(t, 10*time.Second, "the drain's hand-off to complete", func() bool {
		log, err := ts.GenerationLog(ctx, "g", 0, 1)
		return err == nil && len(log) == 1 && log[0].Reason == "drain" && log[0].Handoff.Done
	})
	log, err := ts.GenerationLog(ctx, "g", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := log[0]
	if len(e.Moves) != 4 || e.MinMoves != 4 || e.Handoff.Granted != 4 {
		t.Fatalf("drain entry: %+v", e)
	}
	for _, m := range e.Moves {
		if m.From != c0 || m.To == c0 || m.To == "" || m.NewToken <= m.OldToken || int32(m.NewToken) != e.Epoch {
			t.Fatalf("drain move %+v of entry at epoch %d", m, e.Epoch)
		}
	}
	// Revocation before assignment: each partition is unowned only from
	// c0's release to the next heartbeat of its new owner.
	if e.Handoff.MaxUnowned > 4*heartbeat {
		t.Fatalf("a drained partition was unowned for %v (heartbeat %v)", e.Handoff.MaxUnowned, heartbeat)
	}
	t.Logf("drain at epoch %d: %d moves, unowned %v in all, at most %v", e.Epoch, len(e.Moves), e.Handoff.Unowned, e.Handoff.MaxUnowned)
	if n := ts.metric(t, "tenure_rebalances_total", "type", "consumer", "reason", "drain"); n != 1 {
		t.Fatalf("drain rebalances counted: %v", n)
	}
	if h := ts.histogram(t, "tenure_handoff_unowned_seconds"); h.count < 16 {
		t.Fatalf("hand-offs observed: %+v", h)
	}
	if len(log) < 4 || log[len(log)-1].Reason != "member-joined" {
		t.Fatalf("log: %d entries, oldest %+v", len(log), log[len(log)-1])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatalf("partitions held twice: %v", overlaps)
	}
}
