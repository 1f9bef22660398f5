package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/coordinator"
)

// withGroup runs fn on the named group's core, performs what the core then
// asks (a deletion writes its tombstone), and waits until everything fn
// could have seen or done is durable, so that an answer never reveals a
// decision the store does not hold yet. It returns the error code to
// answer for the group instead: GROUP_ID_NOT_FOUND, or
// COORDINATOR_NOT_AVAILABLE for a group that is offline or failed while
// the answer waited. A group that the term's takeover has still to
// install is installed first, as for any other request, and one that the
// term is loading or another is installing is waited for (readyForRead).
func (s *Server) withGroup(name string, now time.Time, fn func(g *coordinator.Group)) int16 {
	tm, e, code := s.readyForRead(name, now)
	if e == nil {
		return code
	}
	e.mu.Lock()
	switch {
	case e.gone:
		e.mu.Unlock()
		return kerr.GroupIDNotFound.Code
	case e.offline && !s.reload(e, now):
		e.mu.Unlock()
		return kerr.CoordinatorNotAvailable.Code
	}
	if !s.useCore(e, fn) {
		e.mu.Unlock()
		return kerr.CoordinatorNotAvailable.Code
	}
	s.performReady(e, nil)
	wait := s.waitDurable(e)
	e.mu.Unlock()
	if wait != nil && <-wait != nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	if now := time.Now(); !tm.valid(now) {
		// Deposed while the answer waited (reply has the same check).
		return tm.notLeadingCode(now)
	}
	return 0
}

// readyForRead returns the named group and its term for a request that
// reads it (or deletes it), or the code to answer with. While the node
// loads the group's term, or another installs the group at a takeover,
// it waits for that to end, up to Config.TakeoverWait, as a group
// request does (takeoverwait.go), but on the caller's goroutine: these
// requests already hold their connection's reader until their answer is
// durable. A group the takeover has still to install it installs now:
// answering COORDINATOR_LOAD_IN_PROGRESS would only send the client back
// after a back-off, while the install takes microseconds.
func (s *Server) readyForRead(name string, now time.Time) (*term, *groupEntry, int16) {
	var deadline time.Time
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	waited := false
	// wait waits for ended, up to the deadline; false past it.
	wait := func(ended <-chan struct{}) bool {
		if deadline.IsZero() {
			deadline = now.Add(s.cfg.TakeoverWait)
		}
		d := time.Until(deadline)
		if d <= 0 {
			return false
		}
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-ended:
			t.Stop()
			waited = true
			return true
		case <-t.C:
			return false
		}
	}
	for {
		tm := s.termFor(name, now)
		if tm == nil {
			if ended := s.loadingGate(name).ended(); ended != nil && s.cfg.TakeoverWait > 0 {
				if wait(ended) {
					now = time.Now()
					continue
				}
				s.m.takeoverWaits.WithLabelValues("timeout").Inc()
			}
			return nil, nil, s.notLeadingCode(name, now)
		}
		if e := tm.groups.lookup(name); e != nil {
			s.countWait(waited)
			return tm, e, 0
		}
		if code := tm.groups.missingCode(name); code != kerr.CoordinatorLoadInProgress.Code {
			return nil, nil, code // not a group the takeover has to install
		}
		e, code, installed := tm.groups.get(name, false)
		if e != nil {
			s.countWait(waited)
			return tm, e, 0
		}
		if installed == nil || s.cfg.TakeoverWait <= 0 {
			return nil, nil, code
		}
		if !wait(installed) {
			s.m.takeoverWaits.WithLabelValues("timeout").Inc()
			return nil, nil, code
		}
		now = time.Now()
	}
}

// countWait counts a read that waited for a takeover and is served.
func (s *Server) countWait(waited bool) {
	if waited {
		s.m.takeoverWaits.WithLabelValues("served").Inc()
	}
}
