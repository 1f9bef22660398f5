package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// A Mirror is a warm standby's copy of the group records of a prefix, of
// every shard, kept current by one watch of the prefix: a node that does
// not coordinate a group (an HA follower, or a node of a sharded set for
// the shards others own) follows what their coordinators write, so that
// when it takes them over it loads nothing but checks, with Sync, that it
// has seen every write up to now.
//
// It reads everything once, at one revision, and from then on applies the
// watch's events from the revision after. A watch that breaks (etcd
// unreachable, a leader election) is started again from the revision
// after the last one applied: the mirror catches up, never starting from
// scratch, unless etcd compacted that revision meanwhile, when it reads
// everything again (logged: the only full reload after the first). A
// Mirror writes nothing and is safe for concurrent use.
type Mirror struct {
	cli  *clientv3.Client
	cfg  cfg
	keys keys

	wctx   context.Context // the watch's: RequestProgress needs its stream
	cancel context.CancelFunc
	done   chan struct{}

	// hold, when set, keeps a broken watch from starting again until it
	// is closed; breakWatch ends the current watch (tests' fell-behind).
	hold       chan struct{}
	breakWatch context.CancelFunc

	mu       sync.Mutex
	rev      int64 // every write up to it is applied
	advanced chan struct{}
	state
	version uint64 // of the last change applied to a group
	loads   int    // full reads, the first included
	resumes int    // watches started again from rev+1
	err     error  // why the mirror stopped, once it has
}

// state is what a mirror holds.
type state struct {
	topics  map[string]*coordinator.TopicRecord
	groups  map[string]*mirrorGroup
	byShard map[int]map[string]*mirrorGroup // groups by shard (-1: unsharded)
}

func newState() state {
	return state{topics: map[string]*coordinator.TopicRecord{}, groups: map[string]*mirrorGroup{}, byShard: map[int]map[string]*mirrorGroup{}}
}

// mirrorGroup is one group's latest records. A standby follows every
// write of the set, and most of them are offset commits, of which it
// needs only the last of each partition, when the group is read (a
// rebuild or a takeover): so offset values are kept as etcd sends them
// and decoded when the group is read, not each one as it comes (which
// cost every node of a set the decoding of every commit of the set). The
// group's other records change rarely in steady state and every rebuild
// reads them, so they are decoded as they come.
type mirrorGroup struct {
	shard       int    // -1: the unsharded layout
	version     uint64 // Mirror.version when it last changed
	state       uint64 // Mirror.version when a record other than an offset last changed
	group       *coordinator.GroupRecord
	members     map[string]*coordinator.MemberRecord
	assignments map[string]*coordinator.AssignmentRecord
	offsets     map[string]rawKV // partition keys' values, undecoded, by key
	batches     map[string]rawKV // offset batches' values, undecoded, by key
	bad         map[string]error // the keys, other than offsets, whose values do not decode
}

// rawKV is a value as etcd sent it, with its ModRevision: a partition's
// offset is the write of the highest order (offset_batch.go).
type rawKV struct {
	rev int64
	val []byte
}

func (g *mirrorGroup) empty() bool {
	return g.group == nil && len(g.members) == 0 && len(g.assignments) == 0 && len(g.offsets) == 0 &&
		len(g.batches) == 0 && len(g.bad) == 0
}

// ErrMirrorClosed is returned by a Mirror's methods after Close.
var ErrMirrorClosed = errors.New("etcdstore: mirror closed")

// NewMirror reads the group records of every shard under the prefix of
// cli's cluster (Prefix; Logger and PageSize apply too, the other options
// do not) and follows them until Close. cli stays the caller's.
func NewMirror(ctx context.Context, cli *clientv3.Client, opts ...Opt) (*Mirror, error) {
	c := newCfg(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	m := &Mirror{cli: cli, cfg: c, keys: prefixKeys(c.prefix), advanced: make(chan struct{}), done: make(chan struct{}),
		breakWatch: func() {}}
	if err := m.reload(ctx, "start"); err != nil {
		return nil, err
	}
	m.wctx, m.cancel = context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	go m.follow()
	return m, nil
}

// ranges are the directories a mirror reads: the topics and the groups
// of either layout (a prefix has one of them).
func (m *Mirror) ranges() []keyRange {
	var out []keyRange
	for _, d := range []string{topicsDir, groupsDir, shardsDir} {
		out = append(out, keyRange{m.keys.prefix + d, prefixEnd(m.keys.prefix + d)})
	}
	return out
}

// reload reads everything at one revision and replaces the mirror's
// state with it.
func (m *Mirror) reload(ctx context.Context, why string) error {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		st := newState()
		var rev int64
		var err error
		for _, r := range m.ranges() {
			rev, err = pages(ctx, m.cli, r.start, r.end, rev, m.cfg.pageSize, func(kv *mvccpb.KeyValue) {
				st.applyKV(m.keys, kv, 0)
			})
			if err != nil {
				break
			}
		}
		if isCompacted(err) && attempt < maxLoadAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("etcdstore: mirror: reading %q: %w", m.keys.prefix, err)
		}
		m.mu.Lock()
		m.version++
		for _, g := range st.groups {
			g.version, g.state = m.version, m.version
		}
		m.state = st
		m.loads++
		m.setRevLocked(rev)
		m.mu.Unlock()
		m.cfg.log.Info("etcd store mirror: read everything", zap.String("prefix", m.keys.prefix), zap.String("why", why),
			zap.Int("groups", len(st.groups)), zap.Int64("revision", rev), zap.Duration("took", time.Since(start)))
		return nil
	}
}

func isCompacted(err error) bool { return errors.Is(err, rpctypes.ErrCompacted) }

// setRevLocked records that every write up to rev is applied.
func (m *Mirror) setRevLocked(rev int64) {
	if rev <= m.rev {
		return
	}
	m.rev = rev
	close(m.advanced)
	m.advanced = make(chan struct{})
}

// follow applies the watch's events until Close, starting the watch again
// from the revision after the last applied when it breaks, and reading
// everything again when that revision is compacted.
func (m *Mirror) follow() {
	defer close(m.done)
	for first := true; m.wctx.Err() == nil; first = false {
		m.mu.Lock()
		from := m.rev + 1
		if !first {
			m.resumes++
		}
		compacted := false
		wctx, cancel := context.WithCancel(m.wctx)
		m.breakWatch = cancel
		hold := m.hold
		m.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-m.wctx.Done():
			}
		}
		wch := m.cli.Watch(wctx, m.keys.prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
		for wr := range wch {
			if wr.CompactRevision != 0 {
				compacted = true
				break
			}
			if err := wr.Err(); err != nil {
				m.cfg.log.Warn("etcd store mirror: watch failed; starting it again from the last revision applied",
					zap.Int64("from", from), zap.Error(err))
				break
			}
			m.apply(wr)
		}
		cancel()
		if m.wctx.Err() != nil {
			return
		}
		if compacted {
			m.mu.Lock()
			behind := m.rev
			m.mu.Unlock()
			m.cfg.log.Warn("etcd store mirror: fell behind a compaction; reading everything again",
				zap.String("prefix", m.keys.prefix), zap.Int64("applied", behind))
			err := m.reload(m.wctx, "compacted")
			if err == nil {
				continue
			}
			if m.wctx.Err() == nil {
				m.cfg.log.Warn("etcd store mirror: cannot read everything yet", zap.Error(err))
			}
		}
		select {
		case <-m.wctx.Done():
			return
		case <-time.After(watchRetry):
		}
	}
}

// apply applies one watch response: its events, or, for a progress
// notification, the revision up to which the watch has sent everything.
func (m *Mirror) apply(wr clientv3.WatchResponse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if wr.IsProgressNotify() {
		m.setRevLocked(wr.Header.Revision)
		return
	}
	if len(wr.Events) == 0 {
		return
	}
	m.version++
	for _, ev := range wr.Events {
		if ev.Type == clientv3.EventTypeDelete {
			m.deleteKV(m.keys, string(ev.Kv.Key), m.version)
		} else {
			m.applyKV(m.keys, ev.Kv, m.version)
		}
	}
	// A response holds whole revisions: every write up to its last
	// event's is applied.
	m.setRevLocked(wr.Events[len(wr.Events)-1].Kv.ModRevision)
}

// applyKV takes a key's new value into topics and groups; an offset's
// value is kept as it is, and decoded when its group is read.
func (st *state) applyKV(k keys, kv *mvccpb.KeyValue, version uint64) {
	key := string(kv.Key)
	pk, err := k.parse(key)
	if err != nil {
		return // not a record: the loads skip it too (or fail on it)
	}
	switch pk.kind {
	case kindTopic:
		if r, err := decodeValue(pk, kv.Value); err == nil {
			st.topics[pk.name] = r.(*coordinator.TopicRecord)
		}
		return
	case kindOffset:
		g := st.groupOf(pk)
		g.version = version
		g.offsets[key] = rawKV{kv.ModRevision, kv.Value}
		return
	case kindOffsetBatch:
		g := st.groupOf(pk)
		g.version = version
		g.batches[key] = rawKV{kv.ModRevision, kv.Value}
		return
	case kindGroup, kindMember, kindAssignment:
	default:
		return
	}
	g := st.groupOf(pk)
	g.version, g.state = version, version
	st.forget(g, pk, key)
	r, err := decodeValue(pk, kv.Value)
	if err != nil {
		if g.bad == nil {
			g.bad = map[string]error{}
		}
		g.bad[key] = fmt.Errorf("etcdstore: key %q: %w", key, err)
		return
	}
	switch r := r.(type) {
	case *coordinator.GroupRecord:
		g.group = r
	case *coordinator.MemberRecord:
		g.members[r.MemberID] = r
	case *coordinator.AssignmentRecord:
		g.assignments[r.MemberID] = r
	}
}

// forget drops what g holds of the key parsed as pk.
func (st *state) forget(g *mirrorGroup, pk parsedKey, key string) {
	delete(g.bad, key)
	switch pk.kind {
	case kindGroup:
		g.group = nil
	case kindMember:
		delete(g.members, pk.name)
	case kindAssignment:
		delete(g.assignments, pk.name)
	case kindOffset:
		delete(g.offsets, key)
	case kindOffsetBatch:
		delete(g.batches, key)
	}
}

// deleteKV takes a key's deletion into topics and groups.
func (st *state) deleteKV(k keys, key string, version uint64) {
	pk, err := k.parse(key)
	if err != nil {
		return
	}
	switch pk.kind {
	case kindTopic:
		delete(st.topics, pk.name)
		return
	case kindGroup, kindMember, kindAssignment, kindOffset, kindOffsetBatch:
	default:
		return
	}
	g := st.groups[pk.group]
	if g == nil {
		return
	}
	g.version = version
	if pk.kind != kindOffset && pk.kind != kindOffsetBatch {
		g.state = version
	}
	st.forget(g, pk, key)
	if g.empty() {
		delete(st.groups, pk.group)
		delete(st.byShard[g.shard], pk.group)
	}
}

func (st *state) groupOf(pk parsedKey) *mirrorGroup {
	g := st.groups[pk.group]
	if g == nil {
		shard := -1
		if pk.sharded {
			shard = pk.shard
		}
		g = &mirrorGroup{shard: shard, members: map[string]*coordinator.MemberRecord{},
			assignments: map[string]*coordinator.AssignmentRecord{}, offsets: map[string]rawKV{}, batches: map[string]rawKV{}}
		st.groups[pk.group] = g
		if st.byShard[shard] == nil {
			st.byShard[shard] = map[string]*mirrorGroup{}
		}
		st.byShard[shard][pk.group] = g
	}
	return g
}

// Sync waits until the mirror has applied every write etcd acknowledged
// before Sync was called: it reads etcd's current revision (a
// linearizable read) and waits for the watch to reach it, asking etcd for
// a progress notification while it has no events to send. A node that
// takes a term over calls it after its term began, so the mirror then
// holds every write of the previous coordinator, whose writes stopped
// before that.
func (m *Mirror) Sync(ctx context.Context) (int64, error) {
	resp, err := m.cli.Get(ctx, m.keys.format(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcdstore: mirror: reading the revision: %w", err)
	}
	want := resp.Header.Revision
	for {
		m.mu.Lock()
		rev, advanced, err := m.rev, m.advanced, m.err
		m.mu.Unlock()
		if rev >= want {
			return rev, nil
		}
		if err != nil {
			return 0, err
		}
		// Ignored by etcd while the watch is catching up: ask again.
		_ = m.cli.RequestProgress(m.wctx)
		select {
		case <-advanced:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return 0, fmt.Errorf("etcdstore: mirror: at revision %d, waiting for %d: %w", rev, want, ctx.Err())
		case <-m.done:
			return 0, ErrMirrorClosed
		}
	}
}

// Revision returns the revision up to which the mirror has applied every
// write.
func (m *Mirror) Revision() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev
}

// Versions returns the groups of shard (-1: of the unsharded layout) with
// the version of their records: a group's version changes whenever its
// records do, so a standby that rebuilt a group at a version knows whether
// it is still current.
func (m *Mirror) Versions(shard int) map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]uint64, len(m.byShard[shard]))
	for name, g := range m.byShard[shard] {
		out[name] = g.version
	}
	return out
}

// StateVersions returns the groups of shard (-1: of the unsharded layout)
// with the version (a Versions version, or less) at which their records
// other than offsets last changed: a standby that rebuilt a group at a
// state version knows whether only offsets were committed since.
func (m *Mirror) StateVersions(shard int) map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]uint64, len(m.byShard[shard]))
	for name, g := range m.byShard[shard] {
		out[name] = g.state
	}
	return out
}

// Group returns one group's records in load order, as LoadGroup returns
// them, with their version; nil records if the mirror has none.
func (m *Mirror) Group(name string) ([]coordinator.Record, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[name]
	if g == nil {
		return nil, 0, nil
	}
	recs, err := g.records(m.keys, nil)
	if err != nil {
		return nil, g.version, err
	}
	return recs, g.version, nil
}

// Records returns the records of shard's groups (-1: the unsharded
// layout's) in load order, topics first, as a store of that shard's Load
// returns them.
func (m *Mirror) Records(shard int) ([]coordinator.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []coordinator.Record
	for _, name := range slices.Sorted(maps.Keys(m.topics)) {
		out = append(out, m.topics[name])
	}
	for _, name := range slices.Sorted(maps.Keys(m.byShard[shard])) {
		var err error
		if out, err = m.groups[name].records(m.keys, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MirrorStats is what a mirror has done, for tests and logs.
type MirrorStats struct {
	Loads   int // full reads, the first included
	Resumes int // watches started again from the revision after the last applied
	Groups  int
}

// Stats returns the mirror's counts.
func (m *Mirror) Stats() MirrorStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MirrorStats{Loads: m.loads, Resumes: m.resumes, Groups: len(m.groups)}
}

// records appends g's records in RecordSet's load order, decoding its
// offsets; a value that does not decode fails the group, naming its key.
func (g *mirrorGroup) records(k keys, out []coordinator.Record) ([]coordinator.Record, error) {
	for _, key := range slices.Sorted(maps.Keys(g.bad)) {
		return out, g.bad[key]
	}
	gr := groupRecords{group: g.group, offsets: make(offsetMerge, len(g.offsets))}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		gr.members = append(gr.members, g.members[id])
	}
	for _, id := range slices.Sorted(maps.Keys(g.assignments)) {
		gr.assignments = append(gr.assignments, g.assignments[id])
	}
	for key, kv := range g.offsets {
		pk, err := k.parse(key)
		if err == nil {
			err = gr.offsets.addKey(pk.group, tp{pk.name, pk.partition}, kv.rev, kv.val)
		}
		if err != nil {
			return out, fmt.Errorf("etcdstore: key %q: %w", key, err)
		}
	}
	for key, kv := range g.batches {
		pk, err := k.parse(key)
		if err == nil {
			err = gr.offsets.addBatch(pk.group, kv.rev, kv.val)
		}
		if err != nil {
			return out, fmt.Errorf("etcdstore: key %q: %w", key, err)
		}
	}
	return gr.appendRecords(out), nil
}

// Close stops following; the mirror's methods fail afterwards, but the
// records already read stay readable.
func (m *Mirror) Close() error {
	m.cancel()
	<-m.done
	m.mu.Lock()
	m.err = ErrMirrorClosed
	m.mu.Unlock()
	return nil
}

// pages reads every key in [start, end) in pages of size, all at revision
// rev (0: the first page's), calling fn for each; it returns the revision
// read.
func pages(ctx context.Context, cli *clientv3.Client, start, end string, rev int64, size int, fn func(*mvccpb.KeyValue)) (int64, error) {
	key := start
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(size))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, key, opts...)
		if err != nil {
			return rev, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			fn(kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
