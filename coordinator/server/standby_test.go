package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// TestStandbyTakeover: a follower with a standby (an etcdstore.Mirror of
// the set's store) keeps the leader's groups rebuilt while it follows;
// when it wins the next term it serves them without loading the store:
// the groups it had rebuilt are resumed, one that changed just before the
// term ended comes from the mirror's current records, and every member
// goes on at its epoch, the member that joined last included.
func TestStandbyTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx)
	ta, ca := p.aLeads(t)
	var members []standbyMember
	for g := range 3 {
		members = append(members, joinStandbyGroup(t, ca, fmt.Sprintf("g%d", g), fmt.Sprintf("member-%d-000000000000000000", g)))
	}
	p.waitBuilt(t, 3)
	// A change the standby has not rebuilt yet: it rebuilds a group once
	// its records have stayed the same for a second.
	members = append(members, joinStandbyGroup(t, ca, "g2", "member-late-00000000000000000"))
	cb := p.handOver(t, ta)
	for _, m := range members {
		m.goesOn(t, cb)
	}
	standby, fromMirror, loaded := p.b.takeoverSources(t)
	if loaded != 0 || standby < 2 || standby+fromMirror != 3 {
		t.Fatalf("the takeover's groups: %v from the standby, %v from the mirror, %v from the store; want every group from the standby but g2, which may come from the mirror, and none from the store",
			standby, fromMirror, loaded)
	}
}

// TestStandbyTakeoverOffsetsOnly: a group whose offsets alone changed
// since the standby rebuilt it (its members commit every few seconds, so
// it never stays quiet long enough to be rebuilt again) is taken over
// from the standby's copy, given the offsets of now, not restored whole
// from the mirror's records; the new coordinator answers the offsets
// committed last.
func TestStandbyTakeoverOffsetsOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx)
	ta, ca := p.aLeads(t)
	committer := joinStandbyGroup(t, ca, "g0", "member-0-000000000000000000")
	other := joinStandbyGroup(t, ca, "g1", "member-1-000000000000000000")
	p.waitBuilt(t, 2)
	for _, off := range []int64{7, 42} {
		committer.commit(t, ca, off)
	}
	cb := p.handOver(t, ta)
	for _, m := range []standbyMember{committer, other} {
		m.goesOn(t, cb)
	}
	if standby, fromMirror, loaded := p.b.takeoverSources(t); standby != 2 || fromMirror != 0 || loaded != 0 {
		t.Fatalf("the takeover's groups: %v from the standby, %v from the mirror, %v from the store; want both from the standby",
			standby, fromMirror, loaded)
	}
	if got := committer.fetch(t, cb); got != 42 {
		t.Fatalf("the new coordinator answers offset %d for g0, want 42 (the last committed)", got)
	}
}

// TestStandbyRefreshOffsets: a standby readied for a takeover (a peer
// probed down: readyForTakeover) gives the copies whose offsets alone
// changed since their rebuild the offsets of now, and their versions
// become the mirror's, so the takeover resumes them as they are and
// answers the offsets last committed; a copy whose state changed (a
// member joined) is not one of them.
func TestStandbyRefreshOffsets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx)
	ta, ca := p.aLeads(t)
	committer := joinStandbyGroup(t, ca, "g0", "member-0-000000000000000000")
	joinStandbyGroup(t, ca, "g1", "member-1-000000000000000000")
	p.waitBuilt(t, 2)
	for _, off := range []int64{7, 42} {
		committer.commit(t, ca, off)
	}
	joinStandbyGroup(t, ca, "g1", "member-2-000000000000000000")
	sb := p.b.standby
	if _, err := sb.src.SyncTo(ctx, -1, 0); err != nil {
		t.Fatal(err)
	}
	if n := sb.refreshOffsets(); n != 1 {
		t.Fatalf("%d copies given the offsets of now, want 1 (g0's; g1's state changed)", n)
	}
	want := sb.src.Versions(-1)["g0"]
	sb.mu.Lock()
	b := sb.built["g0"]
	sb.mu.Unlock()
	if b == nil || b.version != want {
		t.Fatalf("g0's copy after the refresh: %+v, want version %d", b, want)
	}
	cb := p.handOver(t, ta)
	committer.goesOn(t, cb)
	if got := committer.fetch(t, cb); got != 42 {
		t.Fatalf("the new coordinator answers offset %d for g0, want 42 (the last committed)", got)
	}
}

// TestStandbyKeepsCopiesWhileTermLoads: a pass that runs while a term of
// the shard loads (between the win and prepare, which takes the copies
// once the mirror caught up) keeps the copies; it dropped them, and the
// takeover then restored every group from the mirror's records.
func TestStandbyKeepsCopiesWhileTermLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx)
	_, ca := p.aLeads(t)
	joinStandbyGroup(t, ca, "g0", "member-0-000000000000000000")
	joinStandbyGroup(t, ca, "g1", "member-1-000000000000000000")
	p.waitBuilt(t, 2)
	sb := p.b.standby
	p.b.loadingLead.Store(true)
	now := time.Now()
	sb.pass(now, now.Add(standbyPassTime))
	sb.mu.Lock()
	kept := len(sb.built)
	sb.mu.Unlock()
	p.b.loadingLead.Store(false)
	if kept != 2 {
		t.Fatalf("a pass while a term loads kept %d copies, want 2", kept)
	}
}

// standbyPair is two servers of a set over one embedded etcd: a, with
// no standby, and b, whose standby is a Mirror of the store.
type standbyPair struct {
	a, b   *testServer
	na, nb *fakeNode
	set    *fakeSet
	term   func() *fakeTerm // a term over a new store of the prefix
}

func startStandbyPair(t *testing.T, ctx context.Context) *standbyPair {
	t.Helper()
	emb, err := embedetcd.Start(ctx, t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	cli := emb.Client()
	opts := append(emb.StoreOpts(), etcdstore.Prefix("/standby/"), etcdstore.Logger(zap.NewNop()))
	mirror, err := etcdstore.NewMirror(ctx, cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mirror.Close() })
	topics := etcdstore.NewTopics(cli, opts...)
	p := &standbyPair{set: &fakeSet{leader: -1, nodes: []Node{{ID: 0}, {ID: 1}}}}
	p.na, p.nb = p.set.node(0), p.set.node(1)
	start := func(n *fakeNode, sb Standby) *testServer {
		return startServer(t, func(c *Config) {
			c.Store = nil
			c.TopicStore = topics
			c.Cluster = n
			c.TopicRefresh = 50 * time.Millisecond
			c.Standby = sb
		})
	}
	p.a, p.b = start(p.na, nil), start(p.nb, mirror)
	p.set.advertise(p.a, p.b)
	p.term = func() *fakeTerm {
		st, err := etcdstore.New(ctx, cli, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return newFakeTerm(st)
	}
	return p
}

// aLeads has a win a term and returns it, with a connection to a that
// has asked for the metadata of "jobs" (which creates the topic).
func (p *standbyPair) aLeads(t *testing.T) (*fakeTerm, *rawClient) {
	t.Helper()
	ta := p.term()
	p.set.setLeader(0)
	p.na.terms <- ta
	eventually(t, 5*time.Second, "a to lead", func() bool { return p.a.lead.Load() != nil })
	ca := dial(t, p.a.addr)
	ca.roundTrip(metadataRequest(12, "jobs"))
	return ta, ca
}

// waitBuilt waits until b's standby holds n groups rebuilt.
func (p *standbyPair) waitBuilt(t *testing.T, n int) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("b's standby to rebuild %d groups", n), func() bool {
		p.b.standby.mu.Lock()
		defer p.b.standby.mu.Unlock()
		built := 0
		for _, bg := range p.b.standby.built {
			if bg.g != nil {
				built++
			}
		}
		return built == n
	})
}

// handOver ends a's term ta and has b win the next, and returns a
// connection to b once b has taken every group over.
func (p *standbyPair) handOver(t *testing.T, ta *fakeTerm) *rawClient {
	t.Helper()
	ta.end()
	eventually(t, 5*time.Second, "a to drop its groups", func() bool { return p.a.lead.Load() == nil })
	tb := p.term()
	p.set.setLeader(1)
	p.nb.terms <- tb
	eventually(t, 5*time.Second, "b to lead with every group taken over", func() bool {
		tm := p.b.lead.Load()
		return tm != nil && tm.groups.pendingCount() == 0
	})
	return dial(t, p.b.addr)
}

// takeoverSources returns where ts's terms took their groups from.
func (ts *testServer) takeoverSources(t *testing.T) (standby, mirror, store float64) {
	t.Helper()
	return ts.metric(t, "tenure_takeover_groups_total", "from", "standby"),
		ts.metric(t, "tenure_takeover_groups_total", "from", "mirror"),
		ts.metric(t, "tenure_takeover_groups_total", "from", "store")
}

// standbyMember is a KIP-848 member that joined its own group.
type standbyMember struct {
	group, id string
	epoch     int32
	owned     []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func joinStandbyGroup(t *testing.T, c *rawClient, group, id string) standbyMember {
	t.Helper()
	r := c.roundTrip(cgHeartbeat(group, id, 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.Assignment == nil {
		t.Fatalf("join %s to %s: error %d", id, group, r.ErrorCode)
	}
	m := standbyMember{group: group, id: id, epoch: r.MemberEpoch, owned: []kmsg.ConsumerGroupHeartbeatRequestTopic{}}
	for _, tp := range r.Assignment.Topics {
		m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
	}
	return m
}

// goesOn checks that m's heartbeat on c goes on at its epoch or later.
func (m standbyMember) goesOn(t *testing.T, c *rawClient) {
	t.Helper()
	hb := cgHeartbeat(m.group, m.id, m.epoch)
	hb.Topics = m.owned
	if r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch < m.epoch {
		t.Fatalf("%s of %s on the new leader: error %d epoch %d, want to go on at %d", m.id, m.group, r.ErrorCode, r.MemberEpoch, m.epoch)
	}
}

// commit commits offset off for the first partition m owns, on c.
func (m standbyMember) commit(t *testing.T, c *rawClient, off int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.epoch
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "jobs"
	ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: m.owned[0].Partitions[0], Offset: off, LeaderEpoch: -1}}
	req.Topics = append(req.Topics, ct)
	if r := c.roundTrip(req).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("%s commits %d to %s: error %d", m.id, off, m.group, r.Topics[0].Partitions[0].ErrorCode)
	}
}

// fetch returns the offset c answers for the partition m commits.
func (m standbyMember) fetch(t *testing.T, c *rawClient) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = m.group
	req.Groups = append(req.Groups, g)
	r := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
	for _, ft := range r.Groups[0].Topics {
		for _, fp := range ft.Partitions {
			if fp.Partition == m.owned[0].Partitions[0] {
				return fp.Offset
			}
		}
	}
	t.Fatalf("no offset of %s for partition %d: %+v", m.group, m.owned[0].Partitions[0], r.Groups[0])
	return 0
}

// recordsSource is a Standby over fixed records: one unsharded group per
// name, each at version 1.
type recordsSource struct {
	recs map[string][]coordinator.Record
}

func (r *recordsSource) SyncTo(context.Context, int, int64) (int64, error) { return 1, nil }

func (r *recordsSource) Versions(shard int) map[string]uint64 {
	out := map[string]uint64{}
	for name := range r.recs {
		out[name] = 1
	}
	return out
}

func (r *recordsSource) StateVersions(shard int) map[string]uint64 { return r.Versions(shard) }

func (r *recordsSource) Group(name string) ([]coordinator.Record, uint64, error) {
	return r.recs[name], 1, nil
}

// TestStandbyPassTime: a pass stops rebuilding once its time is up, but
// rebuilds at least one group whatever the time, so that on a machine too
// loaded for its time budget every group is still rebuilt, a pass at a
// time; with time to spare, one pass rebuilds every quiet group.
func TestStandbyPassTime(t *testing.T) {
	// A node of a set that has no leader: it leads nothing, so every
	// group is its standby's to rebuild.
	set := &fakeSet{leader: -1, nodes: []Node{{ID: 0}}}
	ts := startServer(t, func(c *Config) {
		c.TopicStore = c.Store.(store.TopicStore)
		c.Store = nil
		c.Cluster = set.node(0)
	})
	src := &recordsSource{recs: map[string][]coordinator.Record{}}
	const groups = 5
	for i := range groups {
		name := fmt.Sprintf("g%d", i)
		src.recs[name] = []coordinator.Record{&coordinator.GroupRecord{Group: name, Type: coordinator.Consumer, Epoch: 3}}
	}
	built := func(sb *standby) int {
		sb.mu.Lock()
		defer sb.mu.Unlock()
		return len(sb.built)
	}
	// The first pass only sees the groups' versions.
	sb := newStandby(ts.Server, src)
	now := time.Now()
	sb.pass(now, now.Add(time.Hour))
	if n := built(sb); n != 0 {
		t.Fatalf("%d groups rebuilt on the pass that first saw them", n)
	}
	past := now.Add(-time.Second)
	for pass := 1; pass <= groups; pass++ {
		sb.pass(now, past)
		if n := built(sb); n != pass {
			t.Fatalf("after %d passes out of time: %d groups rebuilt, want one a pass", pass, n)
		}
	}

	sb = newStandby(ts.Server, src)
	sb.pass(now, now.Add(time.Hour))
	sb.pass(now, now.Add(time.Hour))
	if n := built(sb); n != groups {
		t.Fatalf("a pass with time to spare rebuilt %d of %d groups", n, groups)
	}
}

// versionedSource is a Standby over one unsharded group whose records,
// version and state version the test sets.
type versionedSource struct {
	mu             sync.Mutex
	name           string
	recs           []coordinator.Record
	version, state uint64
}

func (v *versionedSource) SyncTo(context.Context, int, int64) (int64, error) { return 1, nil }

func (v *versionedSource) Versions(int) map[string]uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return map[string]uint64{v.name: v.version}
}

func (v *versionedSource) StateVersions(int) map[string]uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return map[string]uint64{v.name: v.state}
}

func (v *versionedSource) Group(string) ([]coordinator.Record, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.recs), v.version, nil
}

func (v *versionedSource) set(version, state uint64, recs ...coordinator.Record) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.version, v.state, v.recs = version, state, recs
}

// TestStandbyOffsetsOnly: a group whose offsets alone changed since its
// rebuild is rebuilt again only once they have not changed for
// standbyOffsetsQuiet (a group that keeps committing never is, however
// long ago its rebuild), while a change of anything else is rebuilt at the
// next quiet pass, as before.
func TestStandbyOffsetsOnly(t *testing.T) {
	set := &fakeSet{leader: -1, nodes: []Node{{ID: 0}}}
	ts := startServer(t, func(c *Config) {
		c.TopicStore = c.Store.(store.TopicStore)
		c.Store = nil
		c.Cluster = set.node(0)
	})
	group := &coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 3}
	offset := func(o int64) *coordinator.OffsetRecord {
		return &coordinator.OffsetRecord{Group: "g", Topic: "t", Partition: 0, Offset: o}
	}
	src := &versionedSource{name: "g"}
	src.set(1, 1, group, offset(1))
	sb := newStandby(ts.Server, src)
	builtAt := func() uint64 {
		sb.mu.Lock()
		defer sb.mu.Unlock()
		if b := sb.built["g"]; b != nil {
			return b.version
		}
		return 0
	}
	now := time.Now()
	// Two passes at one time: the second sees the group quiet.
	passes := func(at time.Time) {
		sb.pass(at, at.Add(time.Hour))
		sb.pass(at, at.Add(time.Hour))
	}
	passes(now)
	if v := builtAt(); v != 1 {
		t.Fatalf("built at version %d, want 1", v)
	}
	// Commits every 10 s, for three times standbyOffsetsQuiet: each
	// followed by a quiet pass, but never standbyOffsetsQuiet of quiet.
	at := now
	version := uint64(1)
	for at.Sub(now) < 3*standbyOffsetsQuiet {
		at = at.Add(10 * time.Second)
		version++
		src.set(version, 1, group, offset(int64(version)))
		passes(at)
		if v := builtAt(); v != 1 {
			t.Fatalf("offsets committed every 10 s for %v: rebuilt at version %d, want 1 (the build of before the commits)",
				at.Sub(now), v)
		}
	}
	passes(at.Add(standbyOffsetsQuiet - time.Second))
	if v := builtAt(); v != 1 {
		t.Fatalf("offsets alone changed %v ago: rebuilt at version %d, want 1", standbyOffsetsQuiet-time.Second, v)
	}
	at = at.Add(standbyOffsetsQuiet)
	passes(at)
	if v := builtAt(); v != version {
		t.Fatalf("offsets alone changed %v ago: built at version %d, want %d", standbyOffsetsQuiet, v, version)
	}
	bumped := *group
	bumped.Epoch++
	version++
	src.set(version, version, &bumped, offset(2))
	passes(at.Add(time.Second))
	if v := builtAt(); v != version {
		t.Fatalf("the group's epoch changed: built at version %d, want %d", v, version)
	}
}
