package server

import (
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// heldReply is a reply waiting for its group's writes up to seq.
type heldReply struct {
	seq uint64
	r   coordinator.Reply
}

// replyWhenDurable sends r now if no write of e is in flight, else holds it
// until the writes issued so far are durable. e.mu must be held.
func (s *Server) replyWhenDurable(e *groupEntry, r coordinator.Reply, self *conn) {
	if e.durable == e.issued {
		s.reply(e.tm, r, self)
		return
	}
	if sl, ok := r.Ref.(*slot); ok {
		// No longer parked in the core: the reply is decided.
		sl.unpark()
	}
	e.waiting.push(heldReply{seq: e.issued, r: r})
}

// reply sends one reply of a group of term tm now. A node of an HA set
// checks its term once more: the request was admitted under a valid term,
// but a pause between then and now (a long GC, SIGSTOP) may have let
// another node take over, and this reply must not tell a member anything
// the new leader may have changed.
func (s *Server) reply(tm *term, r coordinator.Reply, self *conn) {
	sl, ok := r.Ref.(*slot)
	if !ok || r.Msg == nil {
		s.log.Error("group replied to a request the server did not give it", zap.Any("ref", r.Ref))
		return
	}
	sl.unpark()
	msg := r.Msg
	if tm.t != nil {
		if now := time.Now(); !tm.t.Valid(now) {
			msg = errorResponse(sl.req, tm.notLeadingCode(now))
		}
	}
	sl.c.deliver(sl, msg, 0, sl.c != self)
}
