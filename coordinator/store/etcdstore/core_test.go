package etcdstore_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestCoreRestoresFromStore drives the real core with random requests
// (KIP-848 heartbeats and commits, classic joins, syncs, heartbeats and
// commits, leaves, admin commits, group deletions), persisting every
// Ready's records through the etcd store before its replies are
// delivered, as the server does. Now and then, and at the end, it loads
// the store and restores every group into a fresh core: each restored
// group's Snapshot must be the live group's (a deleted group comes back
// empty at its tombstone's epoch). Groups are also replaced by their
// restored copies mid-run, and deleted groups come back from their
// tombstones, so the run goes on against restored cores. A failure prints
// the seed.
func TestCoreRestoresFromStore(t *testing.T) {
	seeds, steps := 3, 400
	if testing.Short() {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := newCoreRun(t, uint64(seed))
			for step := range steps {
				r.step()
				if step%60 == 59 {
					r.check()
				}
			}
			r.check()
			t.Logf("%d persists, %d restarts, %d deletions, %d checks, %d log entries compared; replies: %v", r.persists, r.restarts, r.deletions, r.checks, r.logEntries, r.replies)
		})
	}
}

var coreEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const corePartitions = 8

type coreRun struct {
	t       *testing.T
	rng     *rand.Rand
	cfg     coordinator.Config
	topics  *coordinator.StaticTopics
	now     time.Time
	s       *etcdstore.Store
	groups  map[string]*coordinator.Group
	clients []*coreClient
	// ref applies every persisted record: the reference the stored
	// generation logs are checked against.
	ref *coordinator.RecordSet

	persists, restarts, deletions, checks int
	logEntries                            int
	replies                               map[string]int
}

type coreClient struct {
	n       int
	group   string
	classic bool
	gen     int // incarnation, for KIP-848 member IDs
	id      string
	joined  bool
	epoch   int32 // KIP-848 member epoch or classic generation
	held    []coordinator.TopicPartition
	// classic
	syncing bool
	leader  bool
	members []kmsg.JoinGroupResponseMember
}

// coreRef is a request's Ref: who sent what.
type coreRef struct {
	c    *coreClient
	kind string
}

func newCoreRun(t *testing.T, seed uint64) *coreRun {
	r := &coreRun{t: t, rng: rand.New(rand.NewPCG(seed, 5)), now: coreEpoch, groups: map[string]*coordinator.Group{}, replies: map[string]int{}}
	r.ref = coordinator.NewRecordSet()
	r.cfg = coordinator.DefaultConfig()
	r.cfg.GenerationLogRetention = 10 // so that the logs are trimmed
	r.topics = coordinator.NewStaticTopics()
	r.topics.Add("t", coordinator.TopicID{15: 1}, corePartitions)
	r.cfg.Topics = r.topics
	r.cfg.InitialRebalanceDelay = 200 * time.Millisecond
	if err := r.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	maxOps := []int{3, 5, 128}[seed%3]
	r.s, _, _ = open(t, etcdstore.MaxTxnOps(maxOps))
	for i := range 16 {
		c := &coreClient{n: i, group: []string{"c1", "c2", "k1", "k2"}[i%4]}
		c.classic = c.group[0] == 'k'
		r.clients = append(r.clients, c)
	}
	return r
}

// group returns the live group, restoring it from the store if it has
// none (the start, or after a deletion: the name continues from its
// tombstone).
func (r *coreRun) group(name string) *coordinator.Group {
	g := r.groups[name]
	if g != nil && !g.Deleted() {
		return g
	}
	g = r.restore(name, loadGroup(r.t, r.s, name))
	r.groups[name] = g
	return g
}

func (r *coreRun) restore(name string, recs []coordinator.Record) *coordinator.Group {
	g, err := coordinator.Restore(name, &r.cfg, rand.New(rand.NewPCG(r.rng.Uint64(), 1)), r.now, recs)
	if err != nil {
		r.t.Fatalf("restore %q: %v\n%s", name, err, render(recs, false))
	}
	return g
}

func (r *coreRun) step() {
	r.now = r.now.Add(time.Duration(r.rng.IntN(600)) * time.Millisecond)
	for _, name := range slices.Sorted(maps.Keys(r.groups)) {
		g := r.groups[name]
		if next := g.Ready().NextTick; !g.Deleted() && !next.IsZero() && !next.After(r.now) {
			g.Step(r.now, coordinator.Tick{})
			r.drain(g)
		}
	}
	switch x := r.rng.IntN(100); {
	case x < 2:
		r.deleteGroup([]string{"c1", "c2", "k1", "k2", "admin"}[r.rng.IntN(5)])
	case x < 4:
		r.restart([]string{"c1", "c2", "k1", "k2"}[r.rng.IntN(4)])
	case x < 7:
		r.adminCommit()
	default:
		c := r.clients[r.rng.IntN(len(r.clients))]
		if c.classic {
			r.classicAct(c)
		} else {
			r.consumerAct(c)
		}
	}
}

// drain persists the group's Readies through the store and delivers
// their replies, as the server does.
func (r *coreRun) drain(g *coordinator.Group) {
	for g.HasReady() {
		rd := g.Ready()
		if len(rd.Persist) > 0 {
			persist(r.t, r.s, rd.Persist...)
			r.persists++
			for _, rec := range rd.Persist {
				if err := r.ref.Apply(rec); err != nil {
					r.t.Fatal(err)
				}
			}
		}
		for _, rep := range rd.Replies {
			if ref, ok := rep.Ref.(coreRef); ok {
				r.deliver(ref, rep.Msg)
			}
		}
		g.Advance(rd)
	}
}

func (r *coreRun) send(c *coreClient, kind string, msg kmsg.Request) {
	g := r.group(c.group)
	g.Step(r.now, coordinator.Request{Ref: coreRef{c, kind}, Msg: msg, ClientID: fmt.Sprint("client-", c.n), ClientHost: "/10.0.0.1"})
	r.drain(g)
}

func (r *coreRun) consumerAct(c *coreClient) {
	switch x := r.rng.IntN(10); {
	case x < 6 || !c.joined:
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = c.group
		if c.id == "" {
			c.gen++
			c.id = fmt.Sprintf("c%d.%d", c.n, c.gen)
		}
		req.MemberID = c.id
		req.MemberEpoch = c.epoch
		if !c.joined {
			req.MemberEpoch = 0
			req.RebalanceTimeoutMillis = 5000
			req.SubscribedTopicNames = []string{"t"}
			req.ServerAssignor = kmsg.StringPtr([]string{"uniform", "range"}[r.rng.IntN(2)])
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(c.held) > 0 {
			rt := kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: coordinator.TopicID{15: 1}}
			for _, tp := range c.held {
				rt.Partitions = append(rt.Partitions, tp.Partition)
			}
			req.Topics = append(req.Topics, rt)
		}
		r.send(c, "heartbeat", req)
	case x < 9:
		r.commit(c, 9)
	default:
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = c.group
		req.MemberID = c.id
		req.MemberEpoch = -1
		r.send(c, "leave", req)
		c.reset()
	}
}

func (c *coreClient) reset() {
	c.id, c.joined, c.epoch, c.held, c.syncing, c.leader, c.members = "", false, 0, nil, false, false, nil
}

func (r *coreRun) classicAct(c *coreClient) {
	switch x := r.rng.IntN(10); {
	case !c.joined:
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group = c.group
		req.MemberID = c.id
		req.SessionTimeoutMillis = 10000
		req.RebalanceTimeoutMillis = 5000
		req.ProtocolType = "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{"t"}
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
		c.joined = true // a join in flight
		r.send(c, "join", req)
	case c.syncing:
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = 3
		req.Group = c.group
		req.Generation = c.epoch
		req.MemberID = c.id
		if c.leader {
			req.GroupAssignment = r.plan(c.members)
		}
		r.send(c, "sync", req)
	case x < 6:
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 3
		req.Group = c.group
		req.Generation = c.epoch
		req.MemberID = c.id
		r.send(c, "heartbeat", req)
	case x < 9:
		r.commit(c, 7)
	default:
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 3
		req.Group = c.group
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: c.id}}
		r.send(c, "leave", req)
		c.reset()
	}
}

// plan is the classic leader's assignment: the partitions round-robin
// over the members.
func (r *coreRun) plan(members []kmsg.JoinGroupResponseMember) []kmsg.SyncGroupRequestGroupAssignment {
	out := make([]kmsg.SyncGroupRequestGroupAssignment, len(members))
	for i, m := range members {
		a := kmsg.NewConsumerMemberAssignment()
		at := kmsg.ConsumerMemberAssignmentTopic{Topic: "t"}
		for p := i; p < corePartitions; p += len(members) {
			at.Partitions = append(at.Partitions, int32(p))
		}
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{at}
		out[i] = kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: a.AppendTo(nil)}
	}
	return out
}

// commit commits some of what c holds, sometimes a partition it does not.
func (r *coreRun) commit(c *coreClient, version int16) {
	if c.id == "" {
		return
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group = c.group
	req.Generation = c.epoch
	req.MemberID = c.id
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	parts := []int32{int32(r.rng.IntN(corePartitions))}
	for _, tp := range c.held {
		if r.rng.IntN(2) == 0 {
			parts = append(parts, tp.Partition)
		}
	}
	for _, p := range parts {
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Partition = p
		op.Offset = r.rng.Int64N(1 << 40)
		op.LeaderEpoch = int32(r.rng.IntN(3)) - 1
		if r.rng.IntN(3) == 0 {
			op.Metadata = kmsg.StringPtr(fmt.Sprint("md-", r.rng.IntN(9)))
		}
		rt.Partitions = append(rt.Partitions, op)
	}
	req.Topics = append(req.Topics, rt)
	r.send(c, "commit", req)
}

// adminCommit commits to the group "admin", which never has members: it
// never needs a GroupRecord, only offsets.
func (r *coreRun) adminCommit() {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 7
	req.Group = "admin"
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Partition = int32(r.rng.IntN(corePartitions))
	op.Offset = r.rng.Int64N(1000)
	rt.Partitions = append(rt.Partitions, op)
	req.Topics = append(req.Topics, rt)
	g := r.group("admin")
	g.Step(r.now, coordinator.Request{Ref: coreRef{&coreClient{}, "admin"}, Msg: req})
	r.drain(g)
}

func (r *coreRun) deliver(ref coreRef, msg kmsg.Response) {
	c := ref.c
	code := errorCode(msg)
	name := "NONE"
	if code != 0 {
		name = kerr.ErrorForCode(code).(*kerr.Error).Message
	}
	r.replies[ref.kind+":"+name]++
	switch resp := msg.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		if ref.kind == "leave" {
			return
		}
		switch {
		case code == 0:
			c.joined = true
			c.epoch = resp.MemberEpoch
			if resp.Assignment != nil {
				c.held = nil
				for _, at := range resp.Assignment.Topics {
					for _, p := range at.Partitions {
						c.held = append(c.held, coordinator.TopicPartition{Topic: "t", Partition: p})
					}
				}
			}
		case code == kerr.FencedMemberEpoch.Code:
			c.joined, c.epoch, c.held = false, 0, nil
		default:
			c.reset()
		}
	case *kmsg.JoinGroupResponse:
		switch code {
		case 0:
			c.id, c.epoch, c.syncing = resp.MemberID, resp.Generation, true
			c.leader = resp.LeaderID == resp.MemberID
			c.members = resp.Members
		case kerr.MemberIDRequired.Code:
			c.id, c.joined = resp.MemberID, false
		default:
			c.reset()
		}
	case *kmsg.SyncGroupResponse:
		c.syncing = false
		switch code {
		case 0:
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(resp.MemberAssignment); err != nil && len(resp.MemberAssignment) > 0 {
				r.t.Fatalf("assignment: %v", err)
			}
			c.held = nil
			for _, at := range a.Topics {
				for _, p := range at.Partitions {
					c.held = append(c.held, coordinator.TopicPartition{Topic: at.Topic, Partition: p})
				}
			}
		case kerr.RebalanceInProgress.Code:
			c.joined = false // rejoin with its member ID
		default:
			c.reset()
		}
	case *kmsg.HeartbeatResponse:
		switch code {
		case 0:
		case kerr.RebalanceInProgress.Code:
			c.joined, c.syncing = false, false
		default:
			c.reset()
		}
	}
}

func errorCode(msg kmsg.Response) int16 {
	switch resp := msg.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return resp.ErrorCode
	case *kmsg.JoinGroupResponse:
		return resp.ErrorCode
	case *kmsg.SyncGroupResponse:
		return resp.ErrorCode
	case *kmsg.HeartbeatResponse:
		return resp.ErrorCode
	case *kmsg.LeaveGroupResponse:
		return resp.ErrorCode
	case *kmsg.OffsetCommitResponse:
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	}
	return 0
}

// deleteGroup deletes an empty group (DeleteGroups); the live group stays
// deleted until a request for the name restores it from its tombstone.
func (r *coreRun) deleteGroup(name string) {
	g := r.group(name)
	deleted := g.Deleted()
	g.Step(r.now, coordinator.DeleteGroup{})
	if deleted || !g.Deleted() {
		r.drain(g)
		return
	}
	r.deletions++
	r.drain(g)
}

// restart replaces a group by its copy restored from the store, as a
// coordinator restart or fail-over does, after checking the two agree.
func (r *coreRun) restart(name string) {
	g := r.group(name)
	r.compare(name, g, loadGroup(r.t, r.s, name))
	r.groups[name] = r.restore(name, loadGroup(r.t, r.s, name))
	r.restarts++
}

// check loads the whole store and compares every group with its restored
// copy.
func (r *coreRun) check() {
	r.checks++
	byGroup := map[string][]coordinator.Record{}
	for _, rec := range load(r.t, r.s) {
		name, ok := coordinator.GroupOf(rec)
		if !ok {
			r.t.Fatalf("a record of no group: %s", render([]coordinator.Record{rec}, false))
		}
		byGroup[name] = append(byGroup[name], rec)
	}
	for name := range byGroup {
		if r.groups[name] == nil {
			r.t.Fatalf("the store holds group %q, which was never used:\n%s", name, render(byGroup[name], false))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.groups)) {
		r.compare(name, r.groups[name], byGroup[name])
		if got, want := render(loadGroup(r.t, r.s, name), true), render(byGroup[name], true); got != want {
			r.t.Fatalf("LoadGroup(%q) differs from Load:\n%swant:\n%s", name, got, want)
		}
		r.checkLog(name)
	}
}

// checkLog compares the group's stored generation log with the
// reference's: the newest entries alike, and the trimming lagging the
// retention by at most one trim interval.
func (r *coreRun) checkLog(name string) {
	r.t.Helper()
	want := store.NewestFirst(r.ref.Log(name), 0, 0)
	r.logEntries += len(want)
	all, err := r.s.LoadLog(testenv.Context(r.t), name, 0, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(all) < len(want) || len(all) > r.cfg.GenerationLogRetention+32 {
		r.t.Fatalf("group %q: %d log entries stored, the reference keeps %d (retention %d)", name, len(all), len(want), r.cfg.GenerationLogRetention)
	}
	if len(want) > 0 && !reflect.DeepEqual(all[:len(want)], want) {
		r.t.Fatalf("group %q: stored log differs:\n%s\nwant:\n%s", name, renderLog(all[:len(want)]), renderLog(want))
	}
	if len(want) > 1 {
		mid, err := r.s.LoadLog(testenv.Context(r.t), name, want[0].Epoch, 1)
		if err != nil || len(mid) != 1 || mid[0].Epoch != want[1].Epoch {
			r.t.Fatalf("group %q: the entry before epoch %d: %v %v", name, want[0].Epoch, mid, err)
		}
	}
}

func renderLog(log []*coordinator.GenerationRecord) string {
	var b strings.Builder
	for _, e := range log {
		fmt.Fprintf(&b, "%+v\n", *e)
	}
	return b.String()
}

// compare restores the group from recs into a fresh core and compares
// its snapshot with the live group's.
func (r *coreRun) compare(name string, live *coordinator.Group, recs []coordinator.Record) {
	r.t.Helper()
	restored := r.restore(name, recs)
	if live.Deleted() {
		if !restored.Empty() || restored.Epoch() != live.Epoch() || restored.Deleted() {
			r.t.Fatalf("deleted group %q at epoch %d restored as %s", name, live.Epoch(), restored)
		}
		return
	}
	if got, want := render(restored.Snapshot(), false), render(live.Snapshot(), false); got != want {
		r.t.Fatalf("group %q restored from the store differs:\nrestored:\n%slive:\n%sstored:\n%s", name, got, want, render(recs, false))
	}
}
