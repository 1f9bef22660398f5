package server

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// term is what this node holds while it coordinates groups: the group
// store of the term, its writer, and every group loaded from it. A single
// node (no Cluster) has one term for its whole life; a node of an HA set
// has one per leadership term it wins, and drops it whole when the term
// ends, so nothing of a term survives into the next but what the store
// holds.
type term struct {
	s      *Server
	t      Term // nil for a single node
	store  store.Store
	writer *writer
	groups *groupRegistry
}

func (s *Server) newTerm(t Term, st store.Store) *term {
	tm := &term{s: s, t: t, store: st}
	tm.writer = newWriter(s, st)
	tm.groups = newGroupRegistry(s, tm)
	return tm
}

// valid reports whether the term still holds at now.
func (tm *term) valid(now time.Time) bool { return tm.t == nil || tm.t.Valid(now) }

// leading returns the current term if this node may coordinate groups at
// now, else nil. It is on every group request's path: an atomic load and,
// in an HA set, one comparison of monotonic times.
func (s *Server) leading(now time.Time) *term {
	tm := s.lead.Load()
	if tm == nil || !tm.valid(now) {
		return nil
	}
	return tm
}

// runTerms serves each term the cluster hands this node, one at a time,
// until ctx ends or the cluster closes its terms.
func (s *Server) runTerms(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case t, ok := <-s.cfg.Cluster.Terms():
			if !ok {
				return
			}
			s.runTerm(ctx, t)
		}
	}
}

// runTerm loads every group from the term's store, coordinates them until
// the term ends, then drops them all.
func (s *Server) runTerm(ctx context.Context, t Term) {
	start := time.Now()
	tm := s.newTerm(t, t.Store())
	go tm.writer.run()
	defer tm.writer.close()
	if err := s.load(ctx, tm); err != nil {
		// The term is useless without its groups: wait for it to end, and
		// for the next one.
		s.log.Error("leading, but the store cannot be loaded; serving nothing this term", zap.Error(err))
		select {
		case <-t.Done():
		case <-ctx.Done():
		}
		return
	}
	if !s.lead.CompareAndSwap(nil, tm) {
		panic("server: two terms at once")
	}
	s.m.leading.Set(1)
	s.log.Info("leading: coordinating every group", zap.Int32("node", s.self().ID), zap.Duration("took", time.Since(start)))
	select {
	case <-t.Done():
		s.log.Warn("leadership ended: dropping every group; clients go to the next leader", zap.Int32("node", s.self().ID))
	case <-ctx.Done():
	}
	s.endTerm(tm, kerr.NotCoordinator.Code)
}

// endTerm stops coordinating tm's groups: requests that reach them from
// now on, and every request parked in them or waiting for their writes,
// are answered with code.
func (s *Server) endTerm(tm *term, code int16) {
	s.lead.CompareAndSwap(tm, nil)
	s.m.leading.Set(0)
	tm.groups.drop(code)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	tm.writer.drain(ctx)
}
