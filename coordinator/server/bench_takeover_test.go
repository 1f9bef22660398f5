package server

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
		rev, err := sb.catchUp(context.Background(), tm)
		if err != nil {
			b.Fatal(err)
		}
		to := sb.prepare(tm, rev)
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

// BenchmarkTrackMembers measures what a new term spends on the first
// heartbeats of the members of groups it took over, in the core and in
// the connection tracking (trackMember): the 4,000 members of 250 groups
// taken over (testgroups.Stable: 16 members each) on one connection, as
// BenchmarkTakeover's load generator puts them, each heard for the first
// time by entries that are new, with a full heartbeat stepped into its
// group's core and tracked, as stepOn does. The groups are rebuilt for
// each round (not timed). It reports ns-per-member.
func BenchmarkTrackMembers(b *testing.B) {
	const groups = 250
	recs, members := testgroups.Stable(b, "template")
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add(testgroups.Topic.Name, testgroups.Topic.ID, testgroups.Topic.Partitions)
	cfg.Topics = topics
	cfg.TakeoverGrace = 30 * time.Second
	s := &Server{cfg: Config{Core: coordinator.Config{ConnLossGrace: 3 * time.Second}}}
	names := make([]string, groups)
	named := make([][]coordinator.Record, groups)
	reqs := make([][]*kmsg.ConsumerGroupHeartbeatRequest, groups)
	for i := range groups {
		name := fmt.Sprintf("bench-%05d", i)
		names[i], named[i] = name, testgroups.Decoded(recs, name)
		for _, m := range members {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version = 1
			req.Group = name
			req.MemberID = m.ID
			req.MemberEpoch = m.Epoch
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{testgroups.Topic.Name}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: testgroups.Topic.ID, Partitions: m.Partitions}}
			reqs[i] = append(reqs[i], req)
		}
	}
	entries := make([]*groupEntry, groups)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range entries {
			g, err := coordinator.Rebuild(names[i], &cfg, newGroupRand(), named[i])
			if err != nil {
				b.Fatal(err)
			}
			entries[i] = &groupEntry{name: names[i], g: g}
		}
		c := &conn{}
		runtime.GC()
		b.StartTimer()
		for i, e := range entries {
			e.mu.Lock()
			e.g.Step(now, coordinator.Resume{})
			for _, req := range reqs[i] {
				e.g.Step(now, coordinator.Request{Ref: c, Msg: req, Resp: resp})
				if resp.ErrorCode != 0 {
					b.Fatalf("heartbeat of %s: error %d", req.MemberID, resp.ErrorCode)
				}
				s.trackMember(e, c, req)
			}
			e.g.Advance(e.g.Ready())
			e.mu.Unlock()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*groups*len(members)), "ns-per-member")
}
