package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/coordinator"
)

// acquire finds the named group of term tm and locks it with its core
// loaded, for a request that may create it. last caches the group the
// caller found last (the connection's, on its reader). It returns nil and
// the code to answer with if the group cannot serve the request now, and
// with COORDINATOR_LOAD_IN_PROGRESS possibly a channel closed once the
// takeover's install of the group ends (groupRegistry.get).
func (s *Server) acquire(tm *term, last **groupEntry, name string, create bool, now time.Time) (*groupEntry, int16, <-chan struct{}) {
	for range 3 {
		e := *last
		if e == nil || e.name != name || e.tm != tm {
			var code int16
			var installed <-chan struct{}
			if e, code, installed = tm.groups.get(name, create); e == nil {
				return nil, code, installed
			}
		}
		e.mu.Lock()
		if e.gone {
			e.mu.Unlock()
			*last = nil
			continue
		}
		*last = e
		if e.offline && !s.reload(e, now) {
			e.mu.Unlock()
			return nil, kerr.CoordinatorNotAvailable.Code, nil
		}
		return e, 0, nil
	}
	// The group was deleted under us three times in a row.
	return nil, kerr.CoordinatorNotAvailable.Code, nil
}

// step hands a group request to its group and performs the group's Ready.
// create says whether the request may create the group (JoinGroup,
// ConsumerGroupHeartbeat and OffsetCommit do, as in Kafka). A request for
// a group whose term this node is loading, or that another is installing
// at a takeover, waits for that to end (waitTakeover) rather than be
// refused.
func (s *Server) step(c *conn, sl *slot, name string, create bool, now time.Time) {
	if name == "" {
		c.respond(sl, errorResponse(sl.req, kerr.InvalidGroupID.Code))
		return
	}
	if ended := s.stepOn(c, sl, c.clientID, name, create, now, &c.lastGroup, c); ended != nil {
		s.waitTakeover(c, sl, name, create, ended)
	}
}

// stepOn is step's work for a request of c: on c's reader (self is c,
// last is c.lastGroup), or for a request that waited (self nil: the
// responses kick c's writer). If the group's term is loading, or another
// installs the group, it returns a channel closed when that ends, without
// answering.
func (s *Server) stepOn(c *conn, sl *slot, clientID, name string, create bool, now time.Time, last **groupEntry, self *conn) <-chan struct{} {
	respond := func(code int16) { c.deliver(sl, errorResponse(sl.req, code), 0, c != self) }
	tm := s.termFor(name, now)
	if tm == nil {
		if ended := s.loadingGate(name).ended(); ended != nil {
			return ended
		}
		respond(s.notLeadingCode(name, now))
		return nil
	}
	parks := apis[sl.key].parks
	if parks && !s.parkAllowed(c) {
		respond(parkedCode)
		return nil
	}
	e, code, installed := s.acquire(tm, last, name, create, now)
	if e == nil {
		if installed != nil {
			return installed
		}
		respond(code)
		return nil
	}
	defer e.mu.Unlock()
	if parks && !s.parkGroupAllowed(e) {
		respond(parkedCode)
		return nil
	}
	sl.enterGroup(e)
	req := coordinator.Request{
		Ref:        sl,
		Msg:        sl.req,
		Resp:       sl.response(),
		ClientID:   clientID,
		ClientHost: c.host,
	}
	if s.stepCore(e, sl, now, req) {
		s.trackMember(e, c, sl.req)
		s.performReady(e, self)
	}
	return nil
}
