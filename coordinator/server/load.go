package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// load rebuilds the topics and the groups of term tm from the stores,
// before the term serves anyone (with a standby, it only readies the
// takeover, which installs the groups once the term serves: prepare): topics first, with their IDs (KIP-848
// members name partitions by topic ID), then every group with
// coordinator.Restore, so that every member's session starts again now and
// a restart or fail-over expels nobody and rebalances nothing. Deleted
// groups are left in the store as tombstones: a group re-created under the
// name loads its tombstone then. A group whose records cannot be restored
// stays offline (its requests are answered COORDINATOR_NOT_AVAILABLE and
// its error is logged), rather than start afresh below the tokens it
// handed out.
func (s *Server) load(ctx context.Context, tm *term) (*takeover, error) {
	start := time.Now()
	// The topics are read while the standby catches up: neither needs
	// the other, and both stand between the win and the first answer.
	refreshed := make(chan error, 1)
	go func() {
		_, err := s.refreshTopics(ctx)
		refreshed <- err
	}()
	log := s.log
	if tm.shard >= 0 {
		log = log.With(zap.Int("shard", tm.shard))
	}
	err := errNotFollowed
	var rev int64
	if s.standby != nil && tm.t != nil {
		rev, err = s.standby.catchUp(ctx, tm)
	}
	if rerr := <-refreshed; rerr != nil {
		if err == nil {
			s.standby.unpin(tm.shard)
		}
		return nil, rerr
	}
	if s.standby != nil && tm.t != nil {
		if err == nil {
			s.m.terms.Inc()
			return s.standby.prepare(tm, rev), nil
		}
		if errors.Is(err, errNotFollowed) {
			log.Debug("the standby does not follow the shard; loading it from the store")
		} else {
			log.Warn("the standby cannot take the term over; loading the store", zap.Error(err))
		}
	}
	// A term's load may take as long as the term lasts (runTerm ends ctx
	// with it): a large store takes longer than one write's timeout, and
	// a load cut short leaves the term serving nothing.
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if tm.t == nil {
		lctx, cancel = context.WithTimeout(ctx, s.cfg.StoreTimeout)
	}
	recs, err := tm.store.Load(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("server: loading the store: %w", err)
	}
	groups, members, offline := 0, 0, 0
	now := time.Now()
	for i := 0; i < len(recs); {
		name, ok := coordinator.GroupOf(recs[i])
		if !ok {
			i++ // a TopicRecord: topics come from the topic store
			continue
		}
		j := i + 1
		for j < len(recs) {
			if n, _ := coordinator.GroupOf(recs[j]); n != name {
				break
			}
			j++
		}
		grecs := recs[i:j]
		i = j
		if gr, ok := grecs[0].(*coordinator.GroupRecord); ok && gr.Deleted {
			continue
		}
		g, err := s.restoreGroup(name, now, grecs)
		if !s.installGroup(tm, name, now, g, err) {
			offline++
			continue
		}
		groups++
		members += g.MemberCount()
	}
	s.m.terms.Inc()
	if tm.t != nil {
		s.m.takeovers.WithLabelValues("store").Add(float64(groups))
	}
	log.Info("loaded the store",
		zap.Int("topics", s.topics.Len()), zap.Int("groups", groups), zap.Int("members", members),
		zap.Int("offline_groups", offline), zap.Int("records", len(recs)), zap.Duration("took", time.Since(start)))
	return nil, nil
}

// installGroup adds a group restored at now to tm and performs what it
// asks at once (its timers), or, if it could not be restored (err), adds
// it offline: its requests are answered COORDINATOR_NOT_AVAILABLE. It
// reports whether the group is online.
func (s *Server) installGroup(tm *term, name string, now time.Time, g *coordinator.Group, err error) bool {
	if err != nil {
		g = nil
	}
	tm.groups.mu.Lock()
	if tm.groups.closed {
		// The server is closing: it takes no group more.
		tm.groups.mu.Unlock()
		return false
	}
	e := tm.groups.add(name, g)
	tm.groups.mu.Unlock()
	if err != nil {
		e.offlineAt = now
		s.m.groupLoads.WithLabelValues("error").Inc()
		s.log.Error("group cannot be loaded from the store; it stays offline", zap.String("group", name), zap.Error(err))
		return false
	}
	e.mu.Lock()
	s.performReady(e, nil)
	e.mu.Unlock()
	return true
}

// refreshTopics makes this node's topics the topic store's (in an HA set,
// any node may create one, and the leader deletes them): it drops the
// topics the store no longer holds, or holds with another ID (deleted and
// created again), telling the groups this node coordinates that they were
// deleted (forgetTopics), then adds the topics it does not hold yet, and
// reports whether there were any.
func (s *Server) refreshTopics(ctx context.Context) (bool, error) {
	r := s.topics
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	recs, err := s.topicStore.LoadTopics(lctx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("server: loading topics: %w", err)
	}
	if gone := r.stale(recs); len(gone) > 0 {
		r.hide(gone)
		s.m.topics.Set(float64(r.Len()))
		for _, t := range gone {
			s.log.Info("topic deleted on another node", zap.String("topic", t.name), zap.String("topic_id", topicIDString(t.id)))
		}
		now := time.Now()
		if terms := s.ledTerms(now); len(terms) > 0 {
			if _, err := s.forgetTopics(terms, now, gone)(); err != nil {
				// The groups that could not write it forget the topics
				// when they are loaded again (restoreGroup).
				s.log.Warn("a deleted topic's offsets could not be deleted in every group", zap.Error(err))
			}
		}
	}
	added := false
	for _, rec := range recs {
		isNew, err := r.restore(rec)
		if err != nil {
			return added, fmt.Errorf("server: topic %q: %w", rec.Name, err)
		}
		added = added || isNew
	}
	if added {
		s.m.topics.Set(float64(r.Len()))
	}
	return added, nil
}

// refreshTopicsLoop keeps an HA node's topics up to date, and tells the
// groups it coordinates about new ones, until ctx ends.
func (s *Server) refreshTopicsLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.TopicRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		added, err := s.refreshTopics(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("topics could not be refreshed", zap.Error(err))
		}
		if added {
			s.topicsChanged(time.Now())
		}
	}
}
