package server

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestReadyForTakeover: when a node that keeps a standby probes a
// peer down (the leader, killed: its registration stays until its lease
// expires), it collects garbage then, ahead of the takeover's surge; a
// node without a standby has no heap of groups to collect and does not;
// nor does b collect again within collectEvery.
func TestReadyForTakeover(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}, {ID: 2}}}
	na, nb, nc := set.node(0), set.node(1), set.node(2)
	start := func(n *fakeNode, standby bool) (*testServer, *observer.ObservedLogs) {
		obs, logs := observer.New(zapcore.DebugLevel)
		return startServerLogger(t, zap.New(obs), func(c *Config) {
			c.Store = nil
			c.TopicStore = set.shared
			c.Cluster = n
			c.TopicRefresh = 50 * time.Millisecond
			if standby {
				c.Standby = &recordsSource{recs: map[string][]coordinator.Record{}}
			}
		}), logs
	}
	a, _ := start(na, false)
	b, bLogs := start(nb, true)
	c, cLogs := start(nc, false)
	set.advertise(a, b, c)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })
	eventually(t, 5*time.Second, "b and c to see every node's address", func() bool {
		for _, s := range []*testServer{b, c} {
			snap := s.view.snap.Load()
			if snap == nil || len(snap.live) != 3 {
				return false
			}
		}
		return true
	})
	const collected = "readied the standby for a takeover: offsets given to its copies, garbage collected"
	if n := bLogs.FilterMessage(collected).Len(); n != 0 {
		t.Fatalf("b collected %d times before any peer was down", n)
	}
	a.stop()
	eventually(t, 5*time.Second, "b and c to probe a down", func() bool { return b.view.down(0) && c.view.down(0) })
	eventually(t, 5*time.Second, "b, which keeps a standby, to collect", func() bool {
		return bLogs.FilterMessage(collected).Len() == 1
	})
	if n := cLogs.FilterMessage(collected).Len(); n != 0 {
		t.Fatalf("c, without a standby, collected %d times", n)
	}
	// A peer probed down again soon after (its probes flap) does not
	// make b collect again within collectEvery.
	b.readyForTakeover()
	time.Sleep(100 * time.Millisecond)
	if n := bLogs.FilterMessage(collected).Len(); n != 1 {
		t.Fatalf("b collected %d times, want 1: twice within %v", n, collectEvery)
	}
}
