package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A term taken over from the standby serves from the moment its revision
// check ends, installing its groups one by one (takeover.go), each by the
// term's loop or ahead of its turn by the first request for it. A request
// that arrives while the term is loading, or for a group that another has
// claimed for its install, waits for that to end, up to
// Config.TakeoverWait, and is then handled as if it had arrived after:
// refusing it with COORDINATOR_LOAD_IN_PROGRESS costs its client a
// back-off and a new coordinator lookup, for an install that takes
// microseconds unless its claimer is off-core. The wait holds the
// request's slot, not the connection's reader: the reader goes on with
// the requests after it, whose responses follow it in order, as behind a
// parked JoinGroup.

// waitTakeover holds sl, a group request of c that found its group's
// term loading or its group being installed by another, until ended is
// closed; then it is stepped into its group off c's reader (stepOn with
// no self), waiting again if need be. Past Config.TakeoverWait in all it
// is answered COORDINATOR_LOAD_IN_PROGRESS, as it would have been at
// once; with a wait of 0, at once. Called on c's reader.
func (s *Server) waitTakeover(c *conn, sl *slot, name string, create bool, ended <-chan struct{}) {
	wait := s.cfg.TakeoverWait
	if wait <= 0 {
		c.respond(sl, errorResponse(sl.req, kerr.CoordinatorLoadInProgress.Code))
		return
	}
	c.mu.Lock()
	seq := sl.seq
	c.mu.Unlock()
	clientID := c.clientID
	go func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		for ended != nil {
			select {
			case <-ended:
			case <-t.C:
				s.m.takeoverWaits.WithLabelValues("timeout").Inc()
				c.deliver(sl, errorResponse(sl.req, kerr.CoordinatorLoadInProgress.Code), seq, true)
				return
			case <-c.done:
				return // the connection ended: nobody to answer
			}
			if !c.holds(sl, seq) {
				return // answered at shutdown
			}
			var last *groupEntry
			ended = s.stepOn(c, sl, clientID, name, create, time.Now(), &last, nil)
		}
		s.m.takeoverWaits.WithLabelValues("served").Inc()
	}()
}

// holds reports whether sl still waits for the response of the request
// it took at seq on an open connection.
func (c *conn) holds(sl *slot, seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && sl.seq == seq && sl.state == slotWaiting
}
