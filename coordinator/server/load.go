package server

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// load rebuilds the topics and groups the store holds, before the server
// accepts anyone: topics first, with their IDs (KIP-848 members name
// partitions by topic ID), then every group with coordinator.Restore, so
// that every member's session starts again now and a restart expels nobody
// and rebalances nothing. Deleted groups are left in the store as
// tombstones: a group re-created under the name loads its tombstone then.
// A group whose records cannot be restored stays offline (its requests are
// answered COORDINATOR_NOT_AVAILABLE and its error is logged), rather than
// start afresh below the tokens it handed out.
func (s *Server) load(ctx context.Context) error {
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	recs, err := s.store.Load(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("server: loading the store: %w", err)
	}
	topics, groups, members, offline := 0, 0, 0, 0
	i := 0
	for ; i < len(recs); i++ {
		t, ok := recs[i].(*coordinator.TopicRecord)
		if !ok {
			break
		}
		if err := s.topics.restore(t); err != nil {
			return fmt.Errorf("server: loading topic %q: %w", t.Name, err)
		}
		topics++
	}
	s.m.topics.Set(float64(s.topics.Len()))
	now := time.Now()
	for i < len(recs) {
		name, ok := coordinator.GroupOf(recs[i])
		if !ok {
			return fmt.Errorf("server: the store returned a %T among the groups", recs[i])
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
		g, err := coordinator.Restore(name, &s.core, newGroupRand(), now, grecs)
		s.groups.mu.Lock()
		e := s.groups.add(name, g)
		s.groups.mu.Unlock()
		if err != nil {
			offline++
			e.offlineAt = now
			s.m.groupLoads.WithLabelValues("error").Inc()
			s.log.Error("group cannot be loaded from the store; it stays offline", zap.String("group", name), zap.Error(err))
			continue
		}
		groups++
		members += g.MemberCount()
		e.mu.Lock()
		s.performReady(e, nil)
		e.mu.Unlock()
	}
	s.log.Info("loaded the store",
		zap.Int("topics", topics), zap.Int("groups", groups), zap.Int("members", members),
		zap.Int("offline_groups", offline), zap.Int("records", len(recs)), zap.Duration("took", time.Since(start)))
	return nil
}
