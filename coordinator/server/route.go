package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/coordinator"
)

// acquire finds the named group of term tm and locks it with its core
// loaded, for a request that may create it. It returns nil and the code
// to answer with if the group cannot serve the request now.
func (s *Server) acquire(tm *term, c *conn, name string, create bool, now time.Time) (*groupEntry, int16) {
	for range 3 {
		e := c.lastGroup
		if e == nil || e.name != name || e.tm != tm {
			var code int16
			if e, code = tm.groups.get(name, create); e == nil {
				return nil, code
			}
		}
		e.mu.Lock()
		if e.gone {
			e.mu.Unlock()
			c.lastGroup = nil
			continue
		}
		c.lastGroup = e
		if e.offline && !s.reload(e, now) {
			e.mu.Unlock()
			return nil, kerr.CoordinatorNotAvailable.Code
		}
		return e, 0
	}
	// The group was deleted under us three times in a row.
	return nil, kerr.CoordinatorNotAvailable.Code
}

// step hands a group request to its group and performs the group's Ready.
// create says whether the request may create the group (JoinGroup,
// ConsumerGroupHeartbeat and OffsetCommit do, as in Kafka).
func (s *Server) step(c *conn, sl *slot, name string, create bool, now time.Time) {
	if name == "" {
		c.respond(sl, errorResponse(sl.req, kerr.InvalidGroupID.Code))
		return
	}
	tm := s.termFor(name, now)
	if tm == nil {
		c.respond(sl, errorResponse(sl.req, s.notLeadingCode(name, now)))
		return
	}
	parks := apis[sl.key].parks
	if parks && !s.parkAllowed(c) {
		c.respond(sl, errorResponse(sl.req, parkedCode))
		return
	}
	e, code := s.acquire(tm, c, name, create, now)
	if e == nil {
		c.respond(sl, errorResponse(sl.req, code))
		return
	}
	defer e.mu.Unlock()
	if parks && !s.parkGroupAllowed(e) {
		c.respond(sl, errorResponse(sl.req, parkedCode))
		return
	}
	sl.enterGroup(e)
	s.trackMember(e, c, sl.req)
	req := coordinator.Request{
		Ref:        sl,
		Msg:        sl.req,
		Resp:       sl.response(),
		ClientID:   c.clientID,
		ClientHost: c.host,
	}
	if s.stepCore(e, sl, now, req) {
		s.performReady(e, c)
	}
}
