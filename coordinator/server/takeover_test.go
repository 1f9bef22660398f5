package server

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// gatedSource is a recordsSource whose records of one group are read only
// once the gate opens: a takeover that is slow to reach a group. reached
// is closed when a read of that group first waits.
type gatedSource struct {
	recordsSource
	slow    string
	gate    chan struct{}
	reached chan struct{}
	once    sync.Once
}

func (g *gatedSource) Group(name string) ([]coordinator.Record, uint64, error) {
	if name == g.slow {
		g.once.Do(func() { close(g.reached) })
		<-g.gate
	}
	return g.recordsSource.Group(name)
}

// TestTakeoverServesEachGroup: a term taken over from a standby serves each
// group as soon as it is installed, not once every group is. While the
// takeover still reads one group's records, a group installed before it
// is served and goes on above its stored epoch; the group being
// installed is answered COORDINATOR_LOAD_IN_PROGRESS by every path once
// it has waited Config.TakeoverWait for the install (a heartbeat that
// would create it; a describe, an offset fetch), never served as a new
// group; a group whose turn has not come is installed by
// its first request, above its stored epoch; a group the store does not
// hold is created at once. Once its records are read, the slow group goes
// on above its stored epoch too. A group installed that nobody asked for
// has no per-group gauges yet: they are made at a group's first event.
func TestTakeoverServesEachGroup(t *testing.T) {
	const epoch = 7
	src := &gatedSource{
		recordsSource: recordsSource{recs: map[string][]coordinator.Record{}},
		slow:          "z-slow", gate: make(chan struct{}), reached: make(chan struct{}),
	}
	for _, name := range []string{"a-ready", "b-quiet", "z-slow", "zz-asked"} {
		src.recs[name] = []coordinator.Record{&coordinator.GroupRecord{Group: name, Type: coordinator.Consumer, Epoch: epoch}}
	}
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(src.gate)
		}
	}
	defer open()

	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
	na := set.node(0)
	a := startServer(t, func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.Cluster = na
		c.TopicRefresh = 50 * time.Millisecond
		c.Standby = src
	})
	t.Cleanup(open) // before the server stops: a takeover waiting at the gate ends
	set.advertise(a)
	ca := dial(t, a.addr)
	ca.roundTrip(metadataRequest(12, "jobs"))

	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	select {
	case <-src.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the takeover never read the slow group's records")
	}
	join := func(group string) *kmsg.ConsumerGroupHeartbeatResponse {
		return ca.roundTrip(cgHeartbeat(group, "member-"+group+"-0000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	var r *kmsg.ConsumerGroupHeartbeatResponse
	eventually(t, 5*time.Second, "the group installed first to be served", func() bool {
		r = join("a-ready")
		return r.ErrorCode == 0
	})
	if r.MemberEpoch <= epoch {
		t.Fatalf("a-ready served at epoch %d: not above its stored %d, a new group instead of its state", r.MemberEpoch, epoch)
	}
	if a.lead.Load().groups.lookup("b-quiet") == nil {
		t.Fatal("b-quiet, installed before the slow group, is not")
	}
	if a.find(t, "tenure_group_generation", "group", "b-quiet") != nil || a.find(t, "tenure_group_members", "group", "b-quiet") != nil {
		t.Fatal("b-quiet has per-group gauges before any event")
	}
	if a.metric(t, "tenure_group_members", "group", "a-ready") != 1 {
		t.Fatalf("a-ready's members gauge %v after a join, want 1", a.metric(t, "tenure_group_members", "group", "a-ready"))
	}
	if r := join("z-slow"); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("heartbeat to the group still loading: error %d, want COORDINATOR_LOAD_IN_PROGRESS", r.ErrorCode)
	}
	dg := kmsg.NewPtrConsumerGroupDescribeRequest()
	dg.Groups = []string{"z-slow"}
	if g := ca.roundTrip(dg).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; g.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("describe of the group still loading: error %d, want COORDINATOR_LOAD_IN_PROGRESS", g.ErrorCode)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = "z-slow"
	of.Groups = append(of.Groups, og)
	if g := ca.roundTrip(of).(*kmsg.OffsetFetchResponse).Groups[0]; g.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("offset fetch of the group still loading: error %d, want COORDINATOR_LOAD_IN_PROGRESS", g.ErrorCode)
	}
	// A group whose turn has not come (it sorts after the slow one) is
	// installed by its first request, ahead of its turn.
	if r := join("zz-asked"); r.ErrorCode != 0 || r.MemberEpoch <= epoch {
		t.Fatalf("a group asked for before its turn: error %d epoch %d, want served above its stored %d", r.ErrorCode, r.MemberEpoch, epoch)
	}
	if r := join("fresh"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("a group the store does not hold, during the takeover: error %d epoch %d, want a new group at epoch 1", r.ErrorCode, r.MemberEpoch)
	}

	open()
	eventually(t, 5*time.Second, "the slow group to be served", func() bool {
		r = join("z-slow")
		return r.ErrorCode == 0
	})
	if r.MemberEpoch <= epoch {
		t.Fatalf("z-slow served at epoch %d: not above its stored %d", r.MemberEpoch, epoch)
	}
	if n := a.lead.Load().groups.pendingCount(); n != 0 {
		t.Fatalf("%d groups still pending once every group is served", n)
	}
}

// TestTakeoverForgetsDeletedTopics: a group the standby rebuilt ahead,
// whose records name a topic the registry does not hold, forgets that
// topic when a term takes it over from the standby, as a group restored
// from its records does: the rebuild's lookup stands in for the
// install's while the topics have not changed since.
func TestTakeoverForgetsDeletedTopics(t *testing.T) {
	src := &recordsSource{recs: map[string][]coordinator.Record{"g": {
		&coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 3},
		&coordinator.OffsetRecord{Group: "g", Topic: "jobs", Partition: 0, Offset: 10},
		&coordinator.OffsetRecord{Group: "g", Topic: "jobs", Partition: 1, Offset: 11},
		&coordinator.OffsetRecord{Group: "g", Topic: "deleted", Partition: 0, Offset: 12},
		&coordinator.OffsetRecord{Group: "g", Topic: "jobs", Partition: 2, Offset: 13},
	}}}
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
	na := set.node(0)
	a := startServer(t, func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.Cluster = na
		c.TopicRefresh = 50 * time.Millisecond
		c.Standby = src
	})
	set.advertise(a)
	ca := dial(t, a.addr)
	ca.roundTrip(metadataRequest(12, "jobs"))
	eventually(t, 10*time.Second, "the standby to rebuild g against the topics with jobs", func() bool {
		a.standby.mu.Lock()
		defer a.standby.mu.Unlock()
		b := a.standby.built["g"]
		return b != nil && b.g != nil && b.topics == a.topics.gen.Load()
	})
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead with g taken over", func() bool {
		tm := a.lead.Load()
		return tm != nil && tm.groups.pendingCount() == 0
	})
	if n := a.metric(t, "tenure_takeover_groups_total", "from", "standby"); n != 1 {
		t.Fatalf("%v groups taken from the standby, want g", n)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = "g"
	of.Groups = append(of.Groups, og)
	g := ca.roundTrip(of).(*kmsg.OffsetFetchResponse).Groups[0]
	got := map[string]int{}
	for _, tp := range g.Topics {
		got[tp.Topic] = len(tp.Partitions)
	}
	if g.ErrorCode != 0 || len(got) != 1 || got["jobs"] != 3 {
		t.Fatalf("offsets of g after the takeover: error %d, partitions by topic %v; want jobs' 3 and none of the deleted topic", g.ErrorCode, got)
	}
}
