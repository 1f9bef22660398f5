package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// Bounds on parked requests (Config.MaxParkedPerConnection and
// MaxParkedPerGroup). A request parks when its answer waits for someone
// else: a JoinGroup for the rest of the group, a SyncGroup for the
// leader's plan, a Fetch for its MaxWait. A parked request holds its slot
// and its decoded frame, so a client that parks many, on one connection
// or through many into one group, holds memory the server cannot reclaim
// until they are answered. Over the bound, a Fetch is answered at once
// (empty, as it would be after its wait) and a JoinGroup or SyncGroup is
// answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry after a
// back-off; each refusal is counted in tenure_limit_rejections_total
// (parked_connection, parked_group).

// parkedCode answers a group request refused by a parked bound.
var parkedCode = kerr.CoordinatorLoadInProgress.Code

// parked counts c's requests parked now: in a group's core, or held.
func (c *conn) parked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, sl := range c.q[c.head:] {
		if sl.state == slotWaiting && (sl.timer != nil || sl.group.Load() != nil) {
			n++
		}
	}
	return n
}

// parkAllowed reports whether c may park one more request.
func (s *Server) parkAllowed(c *conn) bool {
	if c.parked() < s.cfg.MaxParkedPerConnection {
		return true
	}
	s.m.limits.WithLabelValues("parked_connection").Inc()
	return false
}

// parkGroupAllowed reports whether e may hold one more parked request.
// e.mu must be held.
func (s *Server) parkGroupAllowed(e *groupEntry) bool {
	if int(e.parked.Load()) < s.cfg.MaxParkedPerGroup {
		return true
	}
	s.m.limits.WithLabelValues("parked_group").Inc()
	return false
}

// enterGroup records that sl is handed to e's core, where it may park;
// unpark undoes it when the core answers it or the group drops it.
func (sl *slot) enterGroup(e *groupEntry) {
	sl.group.Store(e)
	e.parked.Add(1)
}

// unpark records that sl has left the core that held it, if any.
func (sl *slot) unpark() {
	if e := sl.group.Swap(nil); e != nil {
		e.parked.Add(-1)
	}
}
