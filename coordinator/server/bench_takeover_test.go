package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// BenchmarkTakeoverInstall measures what a term taken over from a warm
// standby spends per group once it serves (takeover.install): 1,000 real
// groups (testgroups.Stable: 16 members, 64 partitions, an offset each),
// every one rebuilt ahead, resumed and installed one by one. It reports
// us-per-group, the pace at which a one-leader takeover of 10,000 groups
// brings them back when no request asks for one first.
func BenchmarkTakeoverInstall(b *testing.B) {
	const groups = 1000
	recs, _ := testgroups.Stable(b, "template")
	shared := store.NewMemory()
	topic := testgroups.Topic
	if _, err := shared.CreateTopic(context.Background(), &topic); err != nil {
		b.Fatal(err)
	}
	src := &recordsSource{recs: map[string][]coordinator.Record{}}
	for i := range groups {
		name := fmt.Sprintf("g-%05d", i)
		src.recs[name] = testgroups.Renamed(recs, name)
	}
	set := &fakeSet{leader: -1, shared: shared, nodes: []Node{{ID: 0}}}
	ts := startServer(b, func(c *Config) {
		c.Store = nil
		c.TopicStore = shared
		c.Cluster = set.node(0)
	})
	if _, err := ts.refreshTopics(context.Background()); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		sb := newStandby(ts.Server, src)
		now := time.Now()
		sb.pass(now, now.Add(time.Hour))
		sb.pass(now, now.Add(time.Hour))
		tm := ts.newTerm(newFakeTerm(shared), shared, -1, &ts.lead)
		to, err := sb.prepare(context.Background(), tm)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		warm, _, _ := to.run(context.Background())
		total += time.Since(start)
		b.StopTimer()
		if warm != groups {
			b.Fatalf("%d of %d groups rebuilt ahead", warm, groups)
		}
		tm.groups.closeAll()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N*groups), "us-per-group")
}
