package server

import (
	"context"
	"sync"
	"sync/atomic"
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
// holds. With shards (ShardedCluster) a node holds one term per shard it
// owns, each with the shard's groups only.
type term struct {
	s      *Server
	t      Term // nil for a single node
	shard  int  // -1 without shards
	home   *atomic.Pointer[term]
	store  store.Store
	writer *writer
	groups *groupRegistry
	// takeover, while set, installs the groups the term took over from
	// the standby and has not installed yet (takeover.go).
	takeover atomic.Pointer[takeover]
}

func (s *Server) newTerm(t Term, st store.Store, shard int, home *atomic.Pointer[term]) *term {
	tm := &term{s: s, t: t, store: st, shard: shard, home: home}
	tm.writer = newWriter(s, st)
	tm.groups = newGroupRegistry(s, tm)
	return tm
}

// valid reports whether the term still holds at now.
func (tm *term) valid(now time.Time) bool { return tm.t == nil || tm.t.Valid(now) }

// notLeadingCode is the answer to a request for one of tm's groups once
// tm no longer holds.
func (tm *term) notLeadingCode(now time.Time) int16 {
	var known bool
	if tm.shard >= 0 {
		_, known = tm.s.shardOwner(tm.shard, now)
	} else {
		_, known = tm.s.leaderNode(now)
	}
	return redirectCode(known)
}

// leading returns the current term if this node may coordinate groups at
// now, else nil. It is on every group request's path: an atomic load and,
// in an HA set, one comparison of monotonic times. With shards it is
// always nil: termFor names the term of a group.
func (s *Server) leading(now time.Time) *term {
	tm := s.lead.Load()
	if tm == nil || !tm.valid(now) {
		return nil
	}
	return tm
}

// termFor returns the term under which this node coordinates group at
// now, nil if it does not.
func (s *Server) termFor(group string, now time.Time) *term {
	if s.sharded == nil {
		return s.leading(now)
	}
	return s.shardTerm(s.sharded.ShardOf(group), now)
}

// shardTerm returns the valid term of shard sh, nil if none.
func (s *Server) shardTerm(sh int, now time.Time) *term {
	if sh < 0 || sh >= len(s.shards) {
		return nil
	}
	tm := s.shards[sh].tm.Load()
	if tm == nil || !tm.valid(now) {
		return nil
	}
	return tm
}

// ledTerms returns every term valid at now: the one term, or a term per
// shard held.
func (s *Server) ledTerms(now time.Time) []*term {
	if s.sharded == nil {
		if tm := s.leading(now); tm != nil {
			return []*term{tm}
		}
		return nil
	}
	var out []*term
	for i := range s.shards {
		if tm := s.shardTerm(i, now); tm != nil {
			out = append(out, tm)
		}
	}
	return out
}

// ledGroups returns the groups of every term valid at now.
func (s *Server) ledGroups(now time.Time) []*groupEntry {
	terms := s.ledTerms(now)
	if len(terms) == 1 {
		return terms[0].groups.snapshot()
	}
	var out []*groupEntry
	for _, tm := range terms {
		out = append(out, tm.groups.snapshot()...)
	}
	return out
}

// controllerTerm is the term under which this node serves topic
// deletions: its leadership term, or its term of shard 0.
func (s *Server) controllerTerm(now time.Time) *term {
	if s.sharded != nil {
		return s.shardTerm(0, now)
	}
	return s.leading(now)
}

// shardSlot is one shard's place on this node: the term being served,
// and a lock held for a term's whole life, so that a shard won again
// waits until its previous term here has dropped everything.
type shardSlot struct {
	mu      sync.Mutex
	tm      atomic.Pointer[term]
	loading loadGate
}

// runTerms serves each term the cluster hands this node, one at a time,
// until ctx ends or the cluster closes its terms.
func (s *Server) runTerms(ctx context.Context) {
	if s.sharded != nil {
		s.runShardTerms(ctx)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case t, ok := <-s.cfg.Cluster.Terms():
			if !ok {
				return
			}
			s.runTerm(ctx, t, -1, &s.lead)
		}
	}
}

// runShardTerms serves each shard term the cluster hands this node, all
// at once, until ctx ends or the cluster closes its terms, and returns
// once every one has ended.
func (s *Server) runShardTerms(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case t, ok := <-s.sharded.ShardTerms():
			if !ok {
				return
			}
			sh := t.Shard()
			if sh < 0 || sh >= len(s.shards) {
				s.log.Error("the cluster handed out a term of a shard that does not exist", zap.Int("shard", sh))
				t.Release()
				continue
			}
			wg.Go(func() {
				defer t.Release()
				slot := &s.shards[sh]
				slot.mu.Lock()
				defer slot.mu.Unlock()
				s.runTerm(ctx, t, sh, &slot.tm)
			})
		}
	}
}

// runTerm loads every group from the term's store, coordinates them until
// the term ends, then drops them all.
func (s *Server) runTerm(ctx context.Context, t Term, shard int, home *atomic.Pointer[term]) {
	start := time.Now()
	if !t.Valid(start) {
		// Ended before its turn: a shard's terms may reach their slot
		// out of order when the first ended with the node's lease.
		return
	}
	tm := s.newTerm(t, t.Store(), shard, home)
	go tm.writer.run()
	defer tm.writer.close()
	log := s.log
	if shard >= 0 {
		log = log.With(zap.Int("shard", shard))
	}
	loading := s.loadingFlag(shard)
	loading.Store(true)
	to, err := s.loadTerm(ctx, tm, log)
	if err != nil {
		loading.Store(false)
		return // the term ended first
	}
	if !home.CompareAndSwap(nil, tm) {
		panic("server: two terms at once")
	}
	loading.Store(false)
	if s.ledCount.Add(1) == 1 {
		s.m.leading.Set(1)
	}
	// Operators and the README's HA recipe look for this line; a term
	// taken over from the standby serves from here too, group by group.
	if shard < 0 {
		log.Info("leading: coordinating every group", zap.Int32("node", s.self().ID), zap.Duration("took", time.Since(start)))
	} else {
		log.Debug("coordinating the shard's groups", zap.Duration("took", time.Since(start)))
	}
	if to != nil {
		// The term serves from here: each group as soon as it is
		// installed, the others answering COORDINATOR_LOAD_IN_PROGRESS
		// meanwhile, so that the first groups need not wait for the
		// last.
		warm, cold, offline := to.run(ctx)
		s.m.takeovers.WithLabelValues("standby").Add(float64(warm))
		s.m.takeovers.WithLabelValues("mirror").Add(float64(cold))
		log.Info("took the groups over from the standby",
			zap.Int("rebuilt_ahead", warm), zap.Int("restored", cold), zap.Int("offline_groups", offline),
			zap.Duration("took", time.Since(start)))
	}
	select {
	case <-t.Done():
		if shard < 0 {
			log.Warn("leadership ended: dropping every group; clients go to the next leader", zap.Int32("node", s.self().ID))
		} else {
			log.Debug("shard term ended: dropping its groups; clients go to its next owner")
		}
	case <-ctx.Done():
	}
	s.endTerm(tm, kerr.NotCoordinator.Code)
}

// loadTerm loads tm's groups, trying again while the term holds: the
// term is useless without them, and giving it up would only hand the same
// load to another node. The load itself may last as long as the term.
func (s *Server) loadTerm(ctx context.Context, tm *term, log *zap.Logger) (*takeover, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-tm.t.Done():
			cancel()
		case <-lctx.Done():
		}
	}()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		to, err := s.load(lctx, tm)
		if err == nil {
			if attempt > 1 {
				log.Info("loaded the store after failed attempts", zap.Int("attempts", attempt))
			}
			return to, nil
		}
		if lctx.Err() != nil || !tm.valid(time.Now()) {
			return nil, err
		}
		log.Error("leading, but the store cannot be loaded yet; serving nothing until it is",
			zap.Error(err), zap.Int("attempt", attempt), zap.Duration("retry_in", backoff))
		select {
		case <-time.After(backoff):
		case <-lctx.Done():
			return nil, err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// loadingFlag is set while this node loads the groups of a term of shard
// (-1: the leadership term), so that their requests are answered
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry here, as Kafka's
// coordinator answers while it loads a partition of __consumer_offsets
// (after a wait for the load to end: takeoverwait.go).
func (s *Server) loadingFlag(shard int) *loadGate {
	if shard < 0 {
		return &s.loadingLead
	}
	return &s.shards[shard].loading
}

// loading reports whether this node is loading the term that will serve
// group.
func (s *Server) loading(group string) bool {
	return s.loadingGate(group).Load()
}

// loadingGate is the loading flag of the term that will serve group.
func (s *Server) loadingGate(group string) *loadGate {
	if s.sharded == nil {
		return &s.loadingLead
	}
	return &s.shards[s.sharded.ShardOf(group)].loading
}

// loadGate is a loading flag that a request can wait on.
type loadGate struct {
	on   atomic.Bool
	mu   sync.Mutex
	done chan struct{} // closed when the load under way ends
}

// Load reports whether a load is under way.
func (g *loadGate) Load() bool { return g.on.Load() }

// Store marks a load as started or ended.
func (g *loadGate) Store(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if on == g.on.Load() {
		return
	}
	if on {
		g.done = make(chan struct{})
	} else {
		close(g.done)
		g.done = nil
	}
	g.on.Store(on)
}

// ended returns a channel closed when the load under way ends, nil if
// none is. Without a load it takes no lock: every request a follower
// redirects asks.
func (g *loadGate) ended() <-chan struct{} {
	if !g.on.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

// endTerm stops coordinating tm's groups: requests that reach them from
// now on, and every request parked in them or waiting for their writes,
// are answered with code.
func (s *Server) endTerm(tm *term, code int16) {
	if tm.home.CompareAndSwap(tm, nil) && s.ledCount.Add(-1) == 0 {
		s.m.leading.Set(0)
	}
	tm.groups.drop(code)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	tm.writer.drain(ctx)
}
