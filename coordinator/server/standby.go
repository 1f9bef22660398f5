package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
)

// A Standby follows the group store of an HA set from a node that does
// not write it (etcdstore.Mirror): the records of the groups of the
// shards it follows, current to within the store's watch.
type Standby interface {
	// SyncTo waits until the standby holds every write to shard's
	// groups (-1: one leader) up to revision rev, which covers every
	// write of the term taken over (HandoverTerm), or, rev 0, every
	// write the store acknowledged before the call; it returns its
	// revision, and fails if it does not follow the shard.
	SyncTo(ctx context.Context, shard int, rev int64) (int64, error)
	// Versions returns the groups of shard (-1: one leader) with the
	// version of their records, which changes whenever they do.
	Versions(shard int) map[string]uint64
	// Group returns a group's records in load order with their version.
	Group(name string) ([]coordinator.Record, uint64, error)
	// StateVersions returns the groups of shard with the version at
	// which their records other than offsets last changed (a Versions
	// version, or less): a group whose state version is the one it had
	// when it was rebuilt had only offsets committed since.
	StateVersions(shard int) map[string]uint64
}

// A ShardFollower is a Standby that follows only the shards it is told
// to (etcdstore.Mirror.Follow), and holds nothing of the others.
type ShardFollower interface {
	// Follow makes the shards followed those given: one not followed
	// yet is read and then followed, one no longer given is dropped.
	Follow(shards []int)
}

// A ShardSuccession is a ShardedCluster that knows which shards this
// node may take next (ha.Node.StandbyShards): those placed on it that it
// does not hold yet, and those it would take if any one other node left.
// With it, a ShardFollower standby follows those shards only, so that a
// write of the set reaches its owner and one standby, not every node.
type ShardSuccession interface {
	StandbyShards() []int
}

// errNotFollowed is prepare's error for a shard the standby does not
// follow: the term loads the store, as it would without a standby.
var errNotFollowed = errors.New("server: the standby does not follow the shard")

// standbyInterval is how often the standby rebuilds the groups whose
// records changed; standbyBudget is the most it rebuilds at a time and
// standbyPassTime the longest it spends rebuilding in one pass (wall
// time, so a loaded machine gets fewer rebuilds): a rebuild costs about
// as much as a restore (tens to hundreds of microseconds for a group of
// 16), and during a join storm a group is rebuilt again each time it
// settled for a pass and then changed, so without a bound on time the
// standbys of a set spent more of the machine than the storm's
// coordinator (on one machine, BenchmarkTakeover's join took twice as
// long). With it a standby spends at most a tenth of a core; after a
// storm of 10,000 groups it is warm again within about 20 seconds, and a
// takeover meanwhile restores the groups not rebuilt yet from the
// mirror's records.
//
// standbyOffsetsQuiet is how long a group whose offsets alone changed
// since its rebuild must go without a change before it is rebuilt again.
// The groups of a busy set get commits every few seconds, in bursts as
// their members commit together: rebuilding each one after every burst
// took 15% of a node's CPU in a profile of BenchmarkCapacity's three
// nodes at 3,000 operations per second, and rebuilding it every 30 s
// still 6%, for a copy whose offsets were stale again at the next burst.
// A group that keeps committing keeps its copy, and a takeover gives the
// copy the offsets of now (coordinator.Group.RestoreOffsets: decoding a
// group's offsets costs a fraction of restoring it whole); one whose
// commits stopped is rebuilt once they have, and stays current.
const (
	standbyInterval     = time.Second
	standbyBudget       = 2000
	standbyPassTime     = 100 * time.Millisecond
	standbyOffsetsQuiet = 30 * time.Second
)

// standby keeps, on a node of an HA set, every group this node may take
// over rebuilt from its records (coordinator.Rebuild) ahead of the
// takeover: when the node wins a term (a leadership, or a shard), it
// checks that the store's mirror has every write up to now (Sync),
// serves, and resumes the rebuilt groups one by one (coordinator.Resume:
// their sessions start then; takeover.go), each served once resumed;
// only a group whose records changed
// since its rebuild, or that was not rebuilt yet, is restored from the
// mirror's records then. Nothing is read from the store.
//
// It holds one rebuilt copy of each group of the shards this node does
// not lead (with one leader: of every group while it follows), MaxGroups
// at most: about as much memory as the groups take on their coordinator,
// on top of the mirror's records (docs/DESIGN.md gives the figures per
// member). A group is rebuilt once its records have
// not changed for one interval, so a group that keeps changing (joins on
// its leader) is rebuilt when it settles, not at every change.
type standby struct {
	s   *Server
	src Standby

	mu    sync.Mutex
	built map[string]*builtGroup
	seen  map[string]uint64    // the version each group had at the last pass
	moved map[string]time.Time // when a pass last saw each group's version change

	// followMu orders the standby's Follow calls with the takeovers'
	// pins: a shard whose takeover reads the mirror (between prepare and
	// the end of run) stays followed, or its groups would read as absent.
	followMu  sync.Mutex
	following map[int]bool // the shards last given to Follow; nil: every shard
	taking    map[int]int  // pins of the shards being taken over
}

// builtGroup is one group rebuilt ahead of a takeover.
type builtGroup struct {
	version uint64
	state   uint64    // the group's state version (StateVersions) when it was rebuilt, or less
	at      time.Time // when it was rebuilt
	topics  uint64    // the topic registry's generation it resolved against
	shard   int
	g       *coordinator.Group // nil: a tombstone, nothing to serve
	// gone are the topics g names that the registry did not hold at
	// topics (Group.UnknownTopics): looked up here, off the takeover's
	// path, which then needs no lookup while topics is current.
	gone []string
}

func newStandby(s *Server, src Standby) *standby {
	return &standby{s: s, src: src, built: map[string]*builtGroup{}, seen: map[string]uint64{}, moved: map[string]time.Time{},
		taking: map[int]int{}}
}

// run rebuilds the changed groups every standbyInterval until ctx ends.
func (sb *standby) run(ctx context.Context) {
	t := time.NewTicker(standbyInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		sb.pass(now, now.Add(standbyPassTime))
	}
}

// shards are the shards this node may take over, which the standby
// follows: with one leader, -1; with shards, those the cluster says this
// node may take next (ShardSuccession) and those being taken over, or
// every shard if the cluster cannot say or the standby follows every
// shard anyway. A ShardFollower is told to follow them.
func (sb *standby) shards() []int {
	if sb.s.sharded == nil {
		return []int{-1}
	}
	f, ok := sb.src.(ShardFollower)
	next, nok := sb.s.sharded.(ShardSuccession)
	if !ok || !nok {
		out := make([]int, len(sb.s.shards))
		for i := range out {
			out[i] = i
		}
		if ok {
			f.Follow(out)
		}
		return out
	}
	sb.followMu.Lock()
	defer sb.followMu.Unlock()
	out := next.StandbyShards()
	if len(sb.taking) > 0 {
		// No shard starts being followed while one is taken over: its
		// read would compete with the takeover (a node that took a dead
		// node's shards is next in line for all of another's). A pass
		// after the takeover adds it.
		out = slices.DeleteFunc(out, func(shard int) bool { return !sb.following[shard] })
	}
	for shard, n := range sb.taking {
		if n > 0 && !slices.Contains(out, shard) {
			out = append(out, shard)
		}
	}
	// A followed shard this node now owns but does not serve yet stays
	// followed: StandbyShards leaves out the shards a node holds, so a
	// pass between the win and the takeover's pin dropped the shard and
	// the takeover loaded the store (TestShards, under load).
	self, now := sb.s.self().ID, time.Now()
	for shard := range sb.following {
		if slices.Contains(out, shard) || sb.s.shardTerm(shard, now) != nil {
			continue
		}
		if o, ok := sb.s.sharded.ShardOwner(shard); ok && o.ID == self {
			out = append(out, shard)
		}
	}
	slices.Sort(out)
	f.Follow(out)
	sb.s.m.standbyShards.Set(float64(len(out)))
	sb.following = make(map[int]bool, len(out))
	for _, shard := range out {
		sb.following[shard] = true
	}
	return out
}

// pin keeps shard followed until unpin, and reports whether it is
// followed now: a shard not followed is loaded from the store.
func (sb *standby) pin(shard int) bool {
	sb.followMu.Lock()
	defer sb.followMu.Unlock()
	if shard >= 0 && sb.following != nil && !sb.following[shard] {
		return false
	}
	sb.taking[shard]++
	return true
}

func (sb *standby) unpin(shard int) {
	sb.followMu.Lock()
	defer sb.followMu.Unlock()
	if sb.taking[shard]--; sb.taking[shard] <= 0 {
		delete(sb.taking, shard)
	}
}

// led reports whether this node leads shard at now.
func (sb *standby) led(shard int, now time.Time) bool {
	if shard < 0 {
		return sb.s.leading(now) != nil || sb.s.loadingLead.Load()
	}
	return sb.s.shardTerm(shard, now) != nil || sb.s.shards[shard].loading.Load()
}

// pass rebuilds, within standbyBudget and until the wall clock passes
// stop (at least one group a pass, so that every group is rebuilt in
// time whatever the machine's load), the groups of the shards this node
// does not lead whose records have not changed since the last pass but
// since their rebuild, and drops what it holds of the shards it leads
// and of the groups gone from the store.
func (sb *standby) pass(now, stop time.Time) {
	budget := standbyBudget
	shards := sb.shards()
	sb.mu.Lock()
	for name, b := range sb.built {
		if !slices.Contains(shards, b.shard) {
			delete(sb.built, name)
			delete(sb.seen, name)
			delete(sb.moved, name)
		}
	}
	sb.mu.Unlock()
	for _, shard := range shards {
		if sb.led(shard, now) {
			// Dropped once a term serves the shard, not while one loads
			// it: the load catches the mirror up and then takes them
			// (prepare), and a pass in between had the takeover restore
			// every group from the mirror's records.
			if !sb.s.loadingFlag(shard).Load() {
				sb.mu.Lock()
				for name, b := range sb.built {
					if b.shard == shard {
						delete(sb.built, name)
					}
				}
				sb.mu.Unlock()
			}
			continue
		}
		// States first: read before the versions and the records, a
		// state version is at most theirs, so a change it misses makes
		// the next pass rebuild.
		states := sb.src.StateVersions(shard)
		versions := sb.src.Versions(shard)
		gen := sb.s.topics.gen.Load()
		sb.mu.Lock()
		var due []string
		for name, v := range versions {
			b := sb.built[name]
			seen, known := sb.seen[name]
			quiet := known && seen == v
			sb.seen[name] = v
			if !quiet {
				sb.moved[name] = now
			}
			offsetsOnly := b != nil && b.topics == gen && b.state == states[name] && now.Sub(sb.moved[name]) < standbyOffsetsQuiet
			if quiet && (b == nil || b.version != v || b.topics != gen) && !offsetsOnly {
				due = append(due, name)
			}
		}
		for name, b := range sb.built {
			if _, ok := versions[name]; !ok && b.shard == shard {
				delete(sb.built, name)
				delete(sb.seen, name)
				delete(sb.moved, name)
			}
		}
		sb.mu.Unlock()
		slices.Sort(due)
		for _, name := range due {
			if budget == 0 || budget < standbyBudget && !time.Now().Before(stop) {
				return
			}
			sb.mu.Lock()
			full := len(sb.built) >= sb.s.cfg.MaxGroups
			sb.mu.Unlock()
			if full {
				return // no term holds more groups than this
			}
			budget--
			b, err := sb.rebuild(name, shard, gen, states[name], now)
			if err != nil {
				// The takeover restores it from its records, and logs
				// there what keeps it offline.
				continue
			}
			sb.mu.Lock()
			if sb.seen[name] == b.version {
				sb.built[name] = b
			}
			sb.mu.Unlock()
		}
	}
}

// rebuild rebuilds one group from the mirror's records.
func (sb *standby) rebuild(name string, shard int, gen, state uint64, now time.Time) (*builtGroup, error) {
	recs, v, err := sb.src.Group(name)
	if err != nil {
		return nil, err
	}
	b := &builtGroup{version: v, state: state, at: now, topics: gen, shard: shard}
	if tombstone(recs) {
		return b, nil
	}
	b.g, err = coordinator.Rebuild(name, &sb.s.core, newGroupRand(), recs)
	if err == nil {
		// Lookups that see a topic change see gen moved past the gen
		// read before them (both change under the registry's lock), so
		// the takeover does not take gone as current.
		b.gone = b.g.UnknownTopics()
	}
	return b, err
}

// tombstone reports whether recs are a deleted group's: nothing to serve.
func tombstone(recs []coordinator.Record) bool {
	if len(recs) == 0 {
		return true
	}
	gr, ok := recs[0].(*coordinator.GroupRecord)
	return ok && gr.Deleted
}
