package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// fakeSet is an HA set of in-process servers sharing one memory store, in
// which the test decides who leads (package ha decides it on etcd, and is
// tested there).
type fakeSet struct {
	mu     sync.Mutex
	nodes  []Node
	leader int32 // -1: none
	shared *store.Memory
}

type fakeNode struct {
	set   *fakeSet
	id    int32
	terms chan Term
}

func (n *fakeNode) Self() Node {
	n.set.mu.Lock()
	defer n.set.mu.Unlock()
	return n.set.nodes[n.id]
}

func (n *fakeNode) Nodes() []Node {
	n.set.mu.Lock()
	defer n.set.mu.Unlock()
	return append([]Node(nil), n.set.nodes...)
}

func (n *fakeNode) Leader() (Node, bool) {
	n.set.mu.Lock()
	defer n.set.mu.Unlock()
	if n.set.leader < 0 {
		return Node{}, false
	}
	return n.set.nodes[n.set.leader], true
}

func (n *fakeNode) Terms() <-chan Term { return n.terms }

// fakeTerm is a term whose validity the test ends. Its store refuses
// writes once the term is invalid, as the etcd store's guard does once the
// leader key is gone.
type fakeTerm struct {
	valid atomic.Bool
	done  chan struct{}
	store *guardedStore
}

func newFakeTerm(shared store.Store) *fakeTerm {
	t := &fakeTerm{done: make(chan struct{})}
	t.valid.Store(true)
	t.store = &guardedStore{Store: shared, t: t}
	return t
}

func (t *fakeTerm) Store() store.Store    { return t.store }
func (t *fakeTerm) Valid(time.Time) bool  { return t.valid.Load() }
func (t *fakeTerm) Done() <-chan struct{} { return t.done }

// doubt makes the term invalid without ending it, as a leader whose
// keepalives stopped being acknowledged sees it.
func (t *fakeTerm) doubt() { t.valid.Store(false) }

func (t *fakeTerm) end() {
	t.valid.Store(false)
	close(t.done)
}

func (set *fakeSet) node(id int32) *fakeNode {
	return &fakeNode{set: set, id: id, terms: make(chan Term, 1)}
}

// advertise makes node i of the set reachable at servers[i]'s address.
func (set *fakeSet) advertise(servers ...*testServer) {
	set.mu.Lock()
	defer set.mu.Unlock()
	for i, ts := range servers {
		set.nodes[i].Addr = ts.addr
	}
}

func (set *fakeSet) setLeader(id int32) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.leader = id
}

type guardedStore struct {
	store.Store
	t *fakeTerm
}

var errGuard = errors.New("guard: no longer the leader")

func (s *guardedStore) Persist(ctx context.Context, recs []coordinator.Record) error {
	if !s.t.valid.Load() {
		return errGuard
	}
	return s.Store.Persist(ctx, recs)
}

// startSetServer starts node id of set, with its advertised address.
func startSetServer(t *testing.T, set *fakeSet, n *fakeNode) *testServer {
	t.Helper()
	return startServer(t, func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.Cluster = n
		c.TopicRefresh = 50 * time.Millisecond
	})
}

// TestFailover: in an HA set only the leader coordinates; a follower sends
// clients to it (NOT_COORDINATOR, FindCoordinator) and lists every node in
// Metadata. When the leader's term is in doubt it stops answering group
// requests at once, before another term starts; the next leader loads the
// groups from the store, and members go on at their epochs.
func TestFailover(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}}}
	na, nb := set.node(0), set.node(1)
	a := startSetServer(t, set, na)
	b := startSetServer(t, set, nb)
	set.advertise(a, b)

	ca, cb := dial(t, a.addr), dial(t, b.addr)
	if r := ca.roundTrip(cgHeartbeat("g", "member-a-000000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("before any term: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}

	ta := newFakeTerm(set.shared)
	set.setLeader(0)
	na.terms <- ta
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })
	ca.roundTrip(metadataRequest(12, "jobs"))
	const m1 = "member-a-000000000000000"
	r := ca.roundTrip(cgHeartbeat("g", m1, 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join on the leader: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: r.Assignment.Topics[0].TopicID, Partitions: r.Assignment.Topics[0].Partitions}}

	// The follower redirects.
	if r := cb.roundTrip(cgHeartbeat("g", m1, 1)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat on the follower: error %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"g"}
	if c := cb.roundTrip(fc).(*kmsg.FindCoordinatorResponse).Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 0 {
		t.Fatalf("FindCoordinator on the follower: %+v", c)
	}
	md := cb.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 2 || md.Topics[0].ErrorCode != 0 || md.Topics[0].TopicID != owned[0].TopicID {
		t.Fatalf("Metadata on the follower: %d brokers, topic %+v", len(md.Brokers), md.Topics[0])
	}

	// The leader's term is in doubt: it answers no group request, even
	// before the term has ended.
	ta.doubt()
	set.setLeader(-1)
	hb := cgHeartbeat("g", m1, 1)
	hb.Topics = owned
	if r := ca.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("heartbeat on a leader in doubt: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	ta.end()
	eventually(t, 5*time.Second, "a to drop its groups", func() bool { return a.lead.Load() == nil })

	tb := newFakeTerm(set.shared)
	set.setLeader(1)
	nb.terms <- tb
	eventually(t, 5*time.Second, "b to lead", func() bool { return b.lead.Load() != nil })
	hb = cgHeartbeat("g", m1, 1)
	hb.Topics = owned
	if r := cb.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("the member's heartbeat on the new leader: error %d epoch %d; it must go on at its epoch", r.ErrorCode, r.MemberEpoch)
	}
	if r := ca.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("the old leader after the fail-over: error %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	if n := b.metric(t, "tenure_coordinator_terms_total"); n != 1 {
		t.Fatalf("terms on b %v", n)
	}
}

// TestTopicCreatedOnAnotherNode: a client creates a topic through one node
// of an HA set and at once asks another about it (kadm's CommitOffsets
// reads Metadata first, then commits through the leader). The other node
// must look the topic up rather than call it unknown, however long until
// its periodic refresh; a topic that exists nowhere stays unknown.
func TestTopicCreatedOnAnotherNode(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}}}
	na, nb := set.node(0), set.node(1)
	noRefresh := func(c *Config) {
		c.Store = nil
		c.TopicStore = set.shared
		c.TopicRefresh = time.Hour
	}
	a := startServer(t, func(c *Config) { noRefresh(c); c.Cluster = na })
	b := startServer(t, func(c *Config) { noRefresh(c); c.Cluster = nb })
	set.advertise(a, b)
	set.setLeader(1)
	nb.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "b to lead", func() bool { return b.lead.Load() != nil })

	ca, cb := dial(t, a.addr), dial(t, b.addr)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 7
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "jobs", 4, 1
	create.Topics = append(create.Topics, ct)
	if r := ca.roundTrip(create).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create on a: error %d", r.Topics[0].ErrorCode)
	}

	md := metadataRequest(12, "jobs", "nowhere")
	md.AllowAutoTopicCreation = false
	r := cb.roundTrip(md).(*kmsg.MetadataResponse)
	if len(r.Topics) != 2 || r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 4 {
		t.Fatalf("Metadata on b right after the creation on a: %+v", r.Topics)
	}
	if r.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("a topic that exists nowhere: error %d, want UNKNOWN_TOPIC_OR_PARTITION", r.Topics[1].ErrorCode)
	}

	create.Topics[0].Topic = "more"
	if r := ca.roundTrip(create).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create on a: error %d", r.Topics[0].ErrorCode)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 9
	commit.Group = "g"
	commit.Generation = -1
	oc := kmsg.NewOffsetCommitRequestTopic()
	oc.Topic = "more"
	oc.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 3, Offset: 42, LeaderEpoch: -1}}
	commit.Topics = append(commit.Topics, oc)
	if r := cb.roundTrip(commit).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit on the leader right after the creation on a: error %d", r.Topics[0].Partitions[0].ErrorCode)
	}
}

// TestTopicDeletedOnAnotherNode: only the leader deletes topics (another
// node answers NOT_CONTROLLER, which clients retry on the controller that
// Metadata names); the leader forgets the topic at once, every other node
// at its next refresh, after which Metadata calls it unknown there too. A
// topic deleted and created again between two refreshes is seen with its
// new ID.
func TestTopicDeletedOnAnotherNode(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}}}
	na, nb := set.node(0), set.node(1)
	a := startSetServer(t, set, na)
	b := startSetServer(t, set, nb)
	set.advertise(a, b)
	set.setLeader(1)
	nb.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "b to lead", func() bool { return b.lead.Load() != nil })

	ca, cb := dial(t, a.addr), dial(t, b.addr)
	md := metadataRequest(12, "jobs")
	md.AllowAutoTopicCreation = false
	topicOn := func(c *rawClient) kmsg.MetadataResponseTopic {
		t.Helper()
		return c.roundTrip(md).(*kmsg.MetadataResponse).Topics[0]
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 7
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "jobs", 4, 1
	create.Topics = append(create.Topics, ct)
	if r := ca.roundTrip(create).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create on a: error %d", r.Topics[0].ErrorCode)
	}
	first := topicOn(cb).TopicID
	if topicOn(ca).TopicID != first {
		t.Fatal("the nodes disagree on the topic's ID")
	}

	if r := ca.roundTrip(deleteTopicsRequest(6, "jobs", "nowhere")).(*kmsg.DeleteTopicsResponse); len(r.Topics) != 2 ||
		r.Topics[0].ErrorCode != kerr.NotController.Code || r.Topics[1].ErrorCode != kerr.NotController.Code {
		t.Fatalf("DeleteTopics on a node that does not lead: %+v", r.Topics)
	}
	if c := ca.roundTrip(md).(*kmsg.MetadataResponse).ControllerID; c != 1 {
		t.Fatalf("a names controller %d, want the leader 1", c)
	}
	if r := cb.roundTrip(deleteTopicsRequest(6, "jobs")).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics on the leader: error %d", r.Topics[0].ErrorCode)
	}
	if code := topicOn(cb).ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("Metadata on the leader right after the deletion: error %d", code)
	}
	eventually(t, 5*time.Second, "a to forget the topic", func() bool {
		return topicOn(ca).ErrorCode == kerr.UnknownTopicOrPartition.Code
	})
	if n := a.metric(t, "tenure_topics"); n != 0 {
		t.Fatalf("topics gauge on a %v, want 0", n)
	}

	// Deleted and created again while a's view is stale: a ends up with
	// the new ID.
	if r := ca.roundTrip(create).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create again on a: error %d", r.Topics[0].ErrorCode)
	}
	second := topicOn(cb).TopicID
	if r := cb.roundTrip(deleteTopicsRequest(6, "jobs")).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics on the leader: error %d", r.Topics[0].ErrorCode)
	}
	if r := cb.roundTrip(create).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create on b: error %d", r.Topics[0].ErrorCode)
	}
	third := topicOn(cb).TopicID
	if second == first || third == second || third == first {
		t.Fatalf("IDs %x, %x, %x: each creation must have its own", first, second, third)
	}
	eventually(t, 5*time.Second, "a to see the new topic", func() bool { return topicOn(ca).TopicID == third })
}

// TestTopicDeletedBehindTheLeader: a leader that learns of a deletion from
// the topic store (its refresh), not from a DeleteTopics it served, tells
// its groups all the same: their offsets of the topic are deleted and a
// KIP-848 member loses its partitions of it at a new epoch.
func TestTopicDeletedBehindTheLeader(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
	na := set.node(0)
	a := startSetServer(t, set, na)
	set.advertise(a)
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })
	c := dial(t, a.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	const m = "member-a-000000000000000"
	r := c.roundTrip(cgHeartbeat("g", m, 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.Assignment == nil || len(r.Assignment.Topics) != 1 {
		t.Fatalf("join: error %d, assignment %+v", r.ErrorCode, r.Assignment)
	}
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: r.Assignment.Topics[0].TopicID, Partitions: r.Assignment.Topics[0].Partitions}}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 9
	commit.Group, commit.MemberID, commit.Generation = "g", m, r.MemberEpoch
	oc := kmsg.NewOffsetCommitRequestTopic()
	oc.Topic = "jobs"
	oc.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}}
	commit.Topics = append(commit.Topics, oc)
	if r := c.roundTrip(commit).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: error %d", r.Topics[0].Partitions[0].ErrorCode)
	}

	id, parts, _ := a.topics.Lookup("jobs")
	if ok, err := set.shared.DeleteTopic(context.Background(), &coordinator.TopicRecord{Name: "jobs", ID: id, Partitions: parts}); !ok || err != nil {
		t.Fatalf("DeleteTopic in the store: %v %v", ok, err)
	}
	eventually(t, 5*time.Second, "the leader to drop the topic", func() bool {
		_, _, ok := a.topics.Lookup("jobs")
		return !ok
	})
	hb := cgHeartbeat("g", m, r.MemberEpoch)
	hb.Topics = owned
	if got := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); got.ErrorCode != 0 || got.Assignment == nil || len(got.Assignment.Topics) != 0 {
		t.Fatalf("heartbeat after the deletion: error %d, assignment %+v; want an empty one", got.ErrorCode, got.Assignment)
	}
	hb = cgHeartbeat("g", m, r.MemberEpoch)
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if got := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); got.ErrorCode != 0 || got.MemberEpoch <= r.MemberEpoch {
		t.Fatalf("heartbeat once released: error %d, epoch %d; want above %d", got.ErrorCode, got.MemberEpoch, r.MemberEpoch)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "g"
	fetch.Groups = append(fetch.Groups, fg)
	if got := c.roundTrip(fetch).(*kmsg.OffsetFetchResponse); got.Groups[0].ErrorCode != 0 || len(got.Groups[0].Topics) != 0 {
		t.Fatalf("offsets after the deletion: %+v", got.Groups[0])
	}
}
