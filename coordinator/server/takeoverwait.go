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
//
// A connection's waiting requests queue, in arrival order, for one
// goroutine of the connection (waitLoop), which steps each once what it
// waits for has ended. A takeover's surge is thousands of such requests
// at once: a request of every member that asked while the term loaded,
// released together when the load ends. A goroutine and a timer each
// cost their stacks and timers in allocations and GC, and let the
// members of one group, stepped in parallel, claim each other's
// install and wait again; in a profile of BenchmarkTakeover/one-leader
// (10,000 groups of 16) the 55,000 waits' goroutines starved the term's
// install loop, and the GC took a third of the winner's CPU. Their
// responses leave in order anyway, so stepping them in order costs no
// response its place.

// takeoverWaiter is a request of a connection waiting for its group's
// term to load or its group's install to end.
type takeoverWaiter struct {
	sl       *slot
	seq      uint64
	clientID string
	name     string
	create   bool
	ended    <-chan struct{}
	deadline time.Time
}

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
	defer c.mu.Unlock()
	c.waiters = append(c.waiters, takeoverWaiter{sl: sl, seq: sl.seq, clientID: c.clientID, name: name,
		create: create, ended: ended, deadline: time.Now().Add(wait)})
	if !c.waitLooping {
		c.waitLooping = true
		go s.waitLoop(c)
	}
}

// waitLoop steps c's waiting requests in order, each once what it waits
// for ends (or answers it at its deadline), until none is left or c
// ends.
func (s *Server) waitLoop(c *conn) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		c.mu.Lock()
		if len(c.waiters) == 0 || c.closed {
			c.waiters, c.waitLooping = nil, false
			c.mu.Unlock()
			return
		}
		w := c.waiters[0]
		c.waiters[0] = takeoverWaiter{}
		c.waiters = c.waiters[1:]
		c.mu.Unlock()
		if !s.awaitTakeover(c, w, &t) {
			return // the connection ended: nobody to answer
		}
	}
}

// awaitTakeover waits for what w waits for to end and steps w, waiting
// again if need be, or answers it at its deadline. A request whose wait
// has ended is stepped even if its deadline passed behind another's
// wait. It reports false if c ended. t is the loop's timer, made on
// first use.
func (s *Server) awaitTakeover(c *conn, w takeoverWaiter, t **time.Timer) bool {
	for ended := w.ended; ended != nil; {
		select {
		case <-ended:
		default:
			d := time.Until(w.deadline)
			if d <= 0 {
				s.m.takeoverWaits.WithLabelValues("timeout").Inc()
				c.deliver(w.sl, errorResponse(w.sl.req, kerr.CoordinatorLoadInProgress.Code), w.seq, true)
				return true
			}
			if *t == nil {
				*t = time.NewTimer(d)
			} else {
				(*t).Reset(d)
			}
			select {
			case <-ended:
				(*t).Stop() // no stale tick after Stop (Go 1.23)
			case <-(*t).C:
				continue // the deadline: answered above unless ended meanwhile
			case <-c.done:
				return false
			}
		}
		if !c.holds(w.sl, w.seq) {
			return true // answered at shutdown
		}
		var last *groupEntry
		ended = s.stepOn(c, w.sl, w.clientID, w.name, w.create, time.Now(), &last, nil)
	}
	s.m.takeoverWaits.WithLabelValues("served").Inc()
	return true
}

// holds reports whether sl still waits for the response of the request
// it took at seq on an open connection.
func (c *conn) holds(sl *slot, seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && sl.seq == seq && sl.state == slotWaiting
}
