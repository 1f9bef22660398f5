package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// takeover is a term's groups as the standby hands them over: every
// group the store held at the revision the mirror synced to, each
// installed in the term by run, and served from then on while the rest
// are still to come (groupRegistry.pending).
type takeover struct {
	sb       *standby
	tm       *term
	rev      int64
	versions map[string]uint64
	built    map[string]*builtGroup
	names    []string // sorted
}

// prepare readies tm's takeover once the mirror holds every write up to
// now, and marks every group of tm's shard pending in tm, before the term
// serves anyone: a request for one of them is then answered
// COORDINATOR_LOAD_IN_PROGRESS until run installs it, and any other name
// is a group the store does not hold. It returns an error, having marked
// nothing, if the mirror cannot say so; the caller then loads the store.
func (sb *standby) prepare(ctx context.Context, tm *term) (*takeover, error) {
	sctx, cancel := context.WithTimeout(ctx, sb.s.cfg.StoreTimeout)
	rev, err := sb.src.Sync(sctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("server: the standby cannot catch up: %w", err)
	}
	to := &takeover{sb: sb, tm: tm, rev: rev, versions: sb.src.Versions(tm.shard)}
	sb.mu.Lock()
	to.built = make(map[string]*builtGroup, len(to.versions))
	for name := range to.versions {
		if b := sb.built[name]; b != nil {
			to.built[name] = b
			delete(sb.built, name)
		}
	}
	sb.mu.Unlock()
	to.names = slices.Sorted(maps.Keys(to.versions))
	tm.groups.expect(to.names)
	return to, nil
}

// run installs the takeover's groups one by one, each resumed (its
// sessions start) when it is installed and served from then on, until
// every one is or the term ends (ctx, or the term no longer valid: its
// requests are refused anyway). A group rebuilt ahead against the
// records and topics of now is resumed; any other is restored from the
// mirror's records.
func (to *takeover) run(ctx context.Context) (warm, cold, offline int) {
	s, tm := to.sb.s, to.tm
	gen0 := s.topics.gen.Load()
	for _, name := range to.names {
		now := time.Now()
		if ctx.Err() != nil || !tm.valid(now) {
			return
		}
		gen := s.topics.gen.Load()
		var g *coordinator.Group
		var err error
		if b := to.built[name]; b != nil && b.version == to.versions[name] && b.topics == gen {
			delete(to.built, name)
			if b.g == nil {
				tm.groups.settle(name) // a tombstone
				continue
			}
			g = b.g
			g.Step(now, coordinator.Resume{})
			s.restoredGroup(name, now, g)
			warm++
		} else {
			var recs []coordinator.Record
			recs, _, err = to.sb.src.Group(name)
			if err == nil && tombstone(recs) {
				tm.groups.settle(name)
				continue
			}
			if err == nil {
				g, err = s.restoreGroup(name, now, recs)
			}
			cold++
		}
		if !s.installGroup(tm, name, now, g, err) {
			offline++
		}
	}
	if s.topics.gen.Load() != gen0 {
		// Topics changed while groups were being installed: a group
		// installed after a refresh told the term's groups may have
		// resolved its subscriptions before the change.
		to.topicsMoved(time.Now())
	}
	s.log.Debug("standby caught up", zap.Int64("revision", to.rev))
	return warm, cold, offline
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
