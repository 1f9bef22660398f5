package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// takeover is a term's groups as the standby hands them over: every
// group the store held at the revision the mirror synced to, each
// installed in the term by run in name order, or ahead of its turn by
// the first request for it (groupRegistry.get), and served from then on
// while the rest are still to come (groupRegistry.pending).
type takeover struct {
	sb       *standby
	tm       *term
	rev      int64
	versions map[string]uint64 // read-only once prepared
	states   map[string]uint64 // the groups' state versions (Standby.StateVersions); read-only once prepared
	names    []string          // sorted

	mu    sync.Mutex
	built map[string]*builtGroup
	// claimed holds every group claimed for its install: nil while
	// nobody waits for the install to end, else a channel closed when it
	// ends (closedChan once it has).
	claimed map[string]chan struct{}
	warm    int
	cold    int
	offline int
	// installing counts the claimed groups not installed yet, so that
	// run returns only once a request that claimed one has installed it.
	installing sync.WaitGroup
}

// catchUp waits until the mirror holds every write of the terms before
// tm (up to tm's handover revision when the term knows it, else up to the
// store's revision now) and pins tm's shard followed; it returns the
// mirror's revision. Once it has returned without error the caller must
// call prepare, or unpin the shard. It fails, pinning nothing, if the
// mirror cannot say so; the caller then loads the store.
func (sb *standby) catchUp(ctx context.Context, tm *term) (int64, error) {
	if !sb.pin(tm.shard) {
		return 0, errNotFollowed
	}
	var since int64
	if ht, ok := tm.t.(HandoverTerm); ok {
		since = ht.HandoverRevision()
	}
	sctx, cancel := context.WithTimeout(ctx, sb.s.cfg.StoreTimeout)
	rev, err := sb.src.SyncTo(sctx, tm.shard, since)
	cancel()
	if err != nil {
		sb.unpin(tm.shard)
		return 0, fmt.Errorf("server: the standby cannot catch up: %w", err)
	}
	return rev, nil
}

// prepare readies tm's takeover once catchUp has returned rev, and marks
// every group of tm's shard pending in tm, before the term serves anyone:
// a request for one of them then installs it, or, while it is being
// installed, waits for the install; any other name is a group the store
// does not hold.
func (sb *standby) prepare(tm *term, rev int64) *takeover {
	// States first, as a pass reads them: a state version is at most
	// the version read after it.
	states := sb.src.StateVersions(tm.shard)
	to := &takeover{sb: sb, tm: tm, rev: rev, versions: sb.src.Versions(tm.shard), states: states}
	sb.mu.Lock()
	to.built = make(map[string]*builtGroup, len(to.versions))
	for name := range to.versions {
		if b := sb.built[name]; b != nil {
			to.built[name] = b
			delete(sb.built, name)
		}
	}
	sb.mu.Unlock()
	to.claimed = make(map[string]chan struct{}, len(to.versions))
	to.names = slices.Sorted(maps.Keys(to.versions))
	tm.groups.expect(to.names)
	tm.takeover.Store(to)
	return to
}

// run installs the takeover's groups one by one, each resumed (its
// sessions start) when it is installed and served from then on, until
// every one is or the term ends (ctx, or the term no longer valid: its
// requests are refused anyway), and returns where they came from.
func (to *takeover) run(ctx context.Context) (warm, cold, offline int) {
	s, tm := to.sb.s, to.tm
	defer to.sb.unpin(tm.shard)
	gen0 := s.topics.gen.Load()
	for _, name := range to.names {
		if ctx.Err() != nil || !tm.valid(time.Now()) {
			break
		}
		if to.claim(name) {
			to.install(name)
		}
	}
	to.installing.Wait()
	tm.takeover.Store(nil)
	if s.topics.gen.Load() != gen0 {
		// Topics changed while groups were being installed: a group
		// installed after a refresh told the term's groups may have
		// resolved its subscriptions before the change.
		to.topicsMoved(time.Now())
	}
	s.log.Debug("standby caught up", zap.Int64("revision", to.rev))
	to.mu.Lock()
	defer to.mu.Unlock()
	return to.warm, to.cold, to.offline
}

// claim reports whether the caller is the one to install name (then it
// must call install), false if another has claimed it.
func (to *takeover) claim(name string) bool {
	to.mu.Lock()
	defer to.mu.Unlock()
	if _, ok := to.claimed[name]; ok {
		return false
	}
	to.claimed[name] = nil
	to.installing.Add(1)
	return true
}

// installed returns a channel closed once the install of name, which
// another has claimed, ends: a request for the group waits on it rather
// than be refused while the claimer is off-core (takeoverwait.go).
func (to *takeover) installed(name string) <-chan struct{} {
	to.mu.Lock()
	defer to.mu.Unlock()
	ch, ok := to.claimed[name]
	if !ok {
		return closedChan // not claimed after all: look again
	}
	if ch == nil {
		ch = make(chan struct{})
		to.claimed[name] = ch
	}
	return ch
}

// release ends the install of name: whoever waits for it looks again.
func (to *takeover) release(name string) {
	to.mu.Lock()
	defer to.mu.Unlock()
	if ch := to.claimed[name]; ch != nil && ch != closedChan {
		close(ch)
	}
	to.claimed[name] = closedChan
}

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// install installs one claimed group in the term, resumed now: the group
// rebuilt ahead if it was rebuilt against the records and topics of now,
// or against those but for the offsets committed since (given the
// offsets of now: consumers commit every few seconds, so a busy group's
// copy is rarely current in its offsets), else restored from the
// mirror's records; a tombstone is left to the store (a request that
// re-creates the group loads it).
func (to *takeover) install(name string) {
	defer to.installing.Done()
	defer to.release(name)
	s, tm := to.sb.s, to.tm
	now := time.Now()
	gen := s.topics.gen.Load()
	to.mu.Lock()
	b := to.built[name]
	delete(to.built, name)
	to.mu.Unlock()
	var g *coordinator.Group
	var err error
	warm := b != nil && b.version == to.versions[name] && b.topics == gen
	if !warm && b != nil && b.g != nil && b.topics == gen && b.state == to.states[name] {
		warm = to.giveOffsets(name, b)
	}
	if warm {
		if b.g == nil {
			tm.groups.settle(name)
			return
		}
		g = b.g
		s.gateTargets(g)
		g.Step(now, coordinator.Resume{})
		// Resuming changes no topic the group names: the rebuild's
		// lookups, against the topics of now, stand.
		s.readyRestored(name, now, g, b.gone)
	} else {
		var recs []coordinator.Record
		recs, _, err = to.sb.src.Group(name)
		if err == nil && tombstone(recs) {
			tm.groups.settle(name)
			return
		}
		if err == nil {
			g, err = s.restoreGroup(name, now, recs)
		}
	}
	online := s.installGroup(tm, name, now, g, err)
	to.mu.Lock()
	defer to.mu.Unlock()
	switch {
	case !online:
		to.offline++
	case warm:
		to.warm++
	default:
		to.cold++
	}
}

// giveOffsets gives b, rebuilt ahead from records that differ from the
// mirror's of now in their offsets alone, the offsets of now, and reports
// whether b is then current; if not (the records no longer read), the
// group is restored from the mirror's records instead.
func (to *takeover) giveOffsets(name string, b *builtGroup) bool {
	recs, _, err := to.sb.src.Group(name)
	if err != nil || tombstone(recs) || b.g.RestoreOffsets(recs) != nil {
		return false
	}
	// The topics the group names now include its offsets'.
	b.gone = b.g.UnknownTopics()
	return true
}

// topicsMoved tells every group of the term what a topic refresh tells
// the groups it finds: the topics deleted (restoredGroup's check) and
// created since.
func (to *takeover) topicsMoved(now time.Time) {
	s := to.sb.s
	for _, e := range to.tm.groups.snapshot() {
		e.mu.Lock()
		if !e.gone && !e.offline && s.useCore(e, func(g *coordinator.Group) {
			if gone := g.UnknownTopics(); len(gone) > 0 {
				g.Step(now, coordinator.TopicsDeleted{Names: gone})
			}
			g.Step(now, coordinator.TopicsChanged{})
		}) {
			s.performReady(e, nil)
		}
		e.mu.Unlock()
	}
}
