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
// the answer waited.
func (s *Server) withGroup(name string, now time.Time, fn func(g *coordinator.Group)) int16 {
	tm := s.termFor(name, now)
	if tm == nil {
		return s.notLeadingCode(name, now)
	}
	e := tm.groups.lookup(name)
	if e == nil {
		return tm.groups.missingCode(name)
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
