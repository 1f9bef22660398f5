package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/tenure-dev/tenure/coordinator"
)

// A Mirror is a warm standby's copy of the group records of a prefix,
// kept current by the store's watch: a node that does not coordinate a
// group (an HA follower, or a node of a sharded set for the shards it
// may take from others) follows what their coordinators write, so that
// when it takes them over it loads nothing but checks, with Sync, that
// it has seen every write up to now.
//
// It follows the topics and the unsharded layout's groups from the
// start, and of a sharded prefix only the shards given to Follow: a
// node of a set follows the shards it is next in line for, not those it
// writes itself nor those another node would take, so that a write of
// the set reaches one standby's watch instead of every node's. Each
// followed range (the topics, the groups, a shard) is read once, at one
// revision, and from then on follows its own watch from the revision
// after, with a revision of its own. A watch that breaks (etcd
// unreachable, a leader election) is started again from the revision
// after the last one applied: the range catches up, never starting from
// scratch, unless etcd compacted that revision meanwhile, when that
// range is read again (logged). A Mirror writes nothing and is safe for
// concurrent use.
type Mirror struct {
	cli  *clientv3.Client
	cfg  cfg
	keys keys

	ctx    context.Context // the watches'
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// hold, when set, keeps a broken watch from starting again until it
	// is closed (tests' fell-behind).
	hold chan struct{}

	mu       sync.Mutex
	units    map[int]*unit // by shard: topicsUnit, -1 (the unsharded layout) and the shards followed
	advanced chan struct{} // closed when a unit's revision moves
	state
	version uint64 // of the last change applied to a group
	watches uint64 // watches started, each on a stream of its own
	loads   int    // reads of a range, the first ones included
	resumes int    // watches started again from rev+1
	err     error  // why the mirror stopped, once it has
}

// topicsUnit is the unit of the topics.
const topicsUnit = -2

// A unit is one range the mirror follows: the topics, the unsharded
// groups, or a shard's groups. Its fields but the range's are guarded by
// Mirror.mu.
type unit struct {
	shard      int
	start, end string
	stop       context.CancelFunc // ends the unit's follow
	rev        int64              // every write of the range up to it is applied; 0 until read
	watch      context.Context    // the current watch's (RequestProgress needs its stream); nil between watches
	breakWatch context.CancelFunc // ends the current watch
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
// write of the shards it may take, and most of them are offset commits, of which it
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

// ErrNotFollowed is Sync's error for a shard the mirror does not follow
// (Follow): it holds none of its groups, and a node that takes the shard
// loads it from the store.
var ErrNotFollowed = errors.New("etcdstore: the mirror does not follow the shard")

// NewMirror reads the topics and the unsharded layout's group records
// under the prefix of cli's cluster (Prefix; Logger and PageSize apply
// too, the other options do not) and follows them, and the shards given
// to Follow, until Close. cli stays the caller's.
func NewMirror(ctx context.Context, cli *clientv3.Client, opts ...Opt) (*Mirror, error) {
	c := newCfg(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	m := &Mirror{cli: cli, cfg: c, keys: prefixKeys(c.prefix), advanced: make(chan struct{}), units: map[int]*unit{},
		state: newState()}
	m.ctx, m.cancel = context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	start := time.Now()
	var base []*unit
	for _, shard := range []int{topicsUnit, -1} {
		u := m.newUnitLocked(shard)
		if err := m.read(ctx, u); err != nil {
			m.cancel()
			return nil, err
		}
		base = append(base, u)
	}
	m.loads = 1 // the two ranges read as one
	m.cfg.log.Info("etcd store mirror: read the topics and groups", zap.String("prefix", m.keys.prefix),
		zap.Int("groups", len(m.groups)), zap.Duration("took", time.Since(start)))
	for _, u := range base {
		m.startLocked(u, true)
	}
	return m, nil
}

// newUnitLocked adds the unit of shard, not started.
func (m *Mirror) newUnitLocked(shard int) *unit {
	var dir string
	switch {
	case shard == topicsUnit:
		dir = m.keys.prefix + topicsDir
	case shard < 0:
		dir = m.keys.prefix + groupsDir
	default:
		dir = m.keys.prefix + shardsDir + strconv.Itoa(shard) + "/"
	}
	u := &unit{shard: shard, start: dir, end: prefixEnd(dir)}
	m.units[shard] = u
	return u
}

// startLocked starts following u (read tells whether it is read already).
func (m *Mirror) startLocked(u *unit, read bool) {
	ctx, stop := context.WithCancel(m.ctx)
	u.stop = stop
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.follow(ctx, u, read)
	}()
}

// Follow makes the shards the mirror follows those given (of a sharded
// prefix; the topics and the unsharded layout are always followed): a
// shard not followed yet is read, in the background, and then followed
// (Sync waits for it), and one no longer given is dropped with its
// groups. A node calls it with the shards it may take.
func (m *Mirror) Follow(shards []int) {
	want := make(map[int]bool, len(shards))
	for _, s := range shards {
		if s >= 0 {
			want[s] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	for s, u := range m.units {
		if s >= 0 && !want[s] {
			u.stop()
			delete(m.units, s)
			m.dropShardLocked(s)
		}
	}
	for s := range want {
		if m.units[s] == nil {
			m.startLocked(m.newUnitLocked(s), false)
		}
	}
}

// Followed returns the shards the mirror follows, sorted.
func (m *Mirror) Followed() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for s := range m.units {
		if s >= 0 {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// dropShardLocked forgets the groups of shard.
func (m *Mirror) dropShardLocked(shard int) {
	for name, g := range m.byShard[shard] {
		if m.groups[name] == g {
			delete(m.groups, name)
		}
	}
	delete(m.byShard, shard)
}

// read reads u's range at one revision and replaces what the mirror
// holds of it. It gives up if u is no longer followed.
func (m *Mirror) read(ctx context.Context, u *unit) error {
	for attempt := 1; ; attempt++ {
		st := newState()
		rev, err := pages(ctx, m.cli, u.start, u.end, 0, m.cfg.pageSize, func(kv *mvccpb.KeyValue) {
			st.applyKV(m.keys, kv, 0)
		})
		if isCompacted(err) && attempt < maxLoadAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("etcdstore: mirror: reading %q: %w", u.start, err)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.units[u.shard] != u {
			return ErrNotFollowed
		}
		m.version++
		if u.shard == topicsUnit {
			m.topics = st.topics
		} else {
			m.dropShardLocked(u.shard)
			for name, g := range st.groups {
				g.version, g.state = m.version, m.version
				m.groups[name] = g
			}
			if len(st.groups) > 0 {
				m.byShard[u.shard] = st.byShard[u.shard]
			}
		}
		m.loads++
		m.setRevLocked(u, rev)
		return nil
	}
}

func isCompacted(err error) bool { return errors.Is(err, rpctypes.ErrCompacted) }

// setRevLocked records that every write of u's range up to rev is
// applied.
func (m *Mirror) setRevLocked(u *unit, rev int64) {
	if rev <= u.rev {
		return
	}
	u.rev = rev
	close(m.advanced)
	m.advanced = make(chan struct{})
}

// follow reads u's range unless read says it is read, and applies its
// watch's events until ctx ends, starting the watch again from the
// revision after the last applied when it breaks, and reading the range
// again when that revision is compacted.
//
// Each watch has a gRPC stream of its own: etcd answers a progress
// request for every watcher of a stream at once, on behalf of all
// (WatchId -1), so a watcher created on a stream while a notification
// was on its way could take that notification, made before it existed,
// for its own; alone on its stream, a watcher only gets notifications
// made for it.
func (m *Mirror) follow(ctx context.Context, u *unit, read bool) {
	resumed := false
	for ctx.Err() == nil {
		if !read {
			start := time.Now()
			if err := m.read(ctx, u); err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrNotFollowed) {
					return
				}
				m.cfg.log.Warn("etcd store mirror: cannot read a range yet", zap.String("range", u.start), zap.Error(err))
				select {
				case <-ctx.Done():
					return
				case <-time.After(watchRetry):
				}
				continue
			}
			read, resumed = true, false
			m.cfg.log.Debug("etcd store mirror: read a range", zap.String("range", u.start), zap.Duration("took", time.Since(start)))
		}
		m.mu.Lock()
		from := u.rev + 1
		if resumed {
			m.resumes++
		}
		m.watches++
		wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, "tenure-mirror-watch", strconv.FormatUint(m.watches, 10)))
		u.breakWatch = cancel
		hold := m.hold
		m.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		m.mu.Lock()
		u.watch = wctx
		m.mu.Unlock()
		compacted := false
		for wr := range m.cli.Watch(wctx, u.start, clientv3.WithRange(u.end), clientv3.WithRev(from)) {
			if wr.CompactRevision != 0 {
				compacted = true
				break
			}
			if err := wr.Err(); err != nil {
				m.cfg.log.Warn("etcd store mirror: watch failed; starting it again from the last revision applied",
					zap.String("range", u.start), zap.Int64("from", from), zap.Error(err))
				break
			}
			m.apply(u, wr)
		}
		cancel()
		m.mu.Lock()
		u.watch = nil
		behind := u.rev
		m.mu.Unlock()
		resumed = true
		if ctx.Err() != nil {
			return
		}
		if compacted {
			m.cfg.log.Warn("etcd store mirror: fell behind a compaction; reading the range again",
				zap.String("range", u.start), zap.Int64("applied", behind))
			read = false
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchRetry):
		}
	}
}

// apply applies one watch response of u: its events, or, for a progress
// notification, the revision up to which the watch has sent everything.
func (m *Mirror) apply(u *unit, wr clientv3.WatchResponse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.units[u.shard] != u {
		return // dropped by Follow; its groups are gone
	}
	if wr.IsProgressNotify() {
		m.setRevLocked(u, wr.Header.Revision)
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
	m.setRevLocked(u, wr.Events[len(wr.Events)-1].Kv.ModRevision)
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

// Sync waits until the mirror holds every write etcd acknowledged
// before Sync was called to shard's groups (-1: the unsharded layout's)
// and to the topics, and returns the shard's revision: it reads etcd's
// current revision (a linearizable read) and waits for the shard's watch
// and the topics' to reach it, asking etcd for a progress notification
// while they have no events to send. A node that takes a term over calls
// it after its term began, so the mirror then holds every write of the
// previous coordinator, whose writes stopped before that. A shard not
// followed fails with ErrNotFollowed at once; one followed only lately
// is waited for until it is read.
func (m *Mirror) Sync(ctx context.Context, shard int) (int64, error) {
	return m.SyncTo(ctx, shard, 0)
}

// SyncTo is Sync up to revision want, which the caller knows covers every
// write it must see (ha.Term.HandoverRevision: the previous leader's
// writes are all below it), so that no read of etcd's current revision
// comes first; want 0 is Sync. It returns the shard's revision, want or
// more.
func (m *Mirror) SyncTo(ctx context.Context, shard int, want int64) (int64, error) {
	m.mu.Lock()
	_, followed := m.units[shard]
	m.mu.Unlock()
	if !followed {
		return 0, fmt.Errorf("%w: shard %d", ErrNotFollowed, shard)
	}
	if want <= 0 {
		resp, err := m.cli.Get(ctx, m.keys.format(), clientv3.WithCountOnly())
		if err != nil {
			return 0, fmt.Errorf("etcdstore: mirror: reading the revision: %w", err)
		}
		want = resp.Header.Revision
	}
	for {
		m.mu.Lock()
		g, t := m.units[shard], m.units[topicsUnit]
		advanced, err := m.advanced, m.err
		if g == nil && err == nil {
			err = fmt.Errorf("%w: shard %d", ErrNotFollowed, shard)
		}
		var rev, trev int64
		var behind []context.Context
		if err == nil {
			rev, trev = g.rev, t.rev
			for _, u := range []*unit{g, t} {
				if u.rev < want && u.watch != nil {
					behind = append(behind, u.watch)
				}
			}
		}
		m.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if rev >= want && trev >= want {
			return rev, nil
		}
		for _, w := range behind {
			// Ignored by etcd while the watch is catching up: ask again.
			_ = m.cli.RequestProgress(w)
		}
		select {
		case <-advanced:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return 0, fmt.Errorf("etcdstore: mirror: shard %d at revision %d, waiting for %d: %w", shard, rev, want, ctx.Err())
		}
	}
}

// Revision returns the revision up to which the mirror has applied every
// write to shard's groups (-1: the unsharded layout's); 0 if it does not
// follow the shard or has not read it yet.
func (m *Mirror) Revision(shard int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u := m.units[shard]; u != nil {
		return u.rev
	}
	return 0
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
	recs, err := g.records(m.keys, name, nil)
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
		if out, err = m.groups[name].records(m.keys, name, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MirrorStats is what a mirror has done, for tests and logs.
type MirrorStats struct {
	Loads   int // reads of a range: the first (the topics and groups), a shard followed, a range compacted under its watch
	Resumes int // watches started again from the revision after the last applied
	Groups  int
}

// Stats returns the mirror's counts.
func (m *Mirror) Stats() MirrorStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MirrorStats{Loads: m.loads, Resumes: m.resumes, Groups: len(m.groups)}
}

var mergePool = sync.Pool{New: func() any { return newOffsetMerge(0) }}

// records appends the records of g, group name's, in RecordSet's load
// order, decoding its offsets; a value that does not decode fails the
// group, naming its key.
func (g *mirrorGroup) records(k keys, name string, out []coordinator.Record) ([]coordinator.Record, error) {
	for _, key := range slices.Sorted(maps.Keys(g.bad)) {
		return out, g.bad[key]
	}
	// The merge's table is taken from a pool and given back: a takeover
	// reads the records of every group, and a table of every group's
	// partitions, made new for each, was most of what it allocated.
	merge := mergePool.Get().(*offsetMerge)
	defer mergePool.Put(merge)
	defer merge.reset()
	gr := groupRecords{name: name, group: g.group, offsets: merge}
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
		err := gr.offsets.addBatch(name, kv.rev, kv.val)
		if err != nil {
			return out, fmt.Errorf("etcdstore: key %q: %w", key, err)
		}
	}
	return gr.appendRecords(out)
}

// Close stops following; the mirror's methods fail afterwards, but the
// records already read stay readable.
func (m *Mirror) Close() error {
	// Closed first, under the lock Follow takes: a Follow after it starts
	// no follower, which the wait below could miss (an Add racing the
	// Wait) and which would watch on after Close, on a client its owner
	// closes next.
	m.mu.Lock()
	m.err = ErrMirrorClosed
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
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
