package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// How a group's replies wait for its writes (raft's rule for asynchronous
// storage writes): every Ready with records is one write, numbered by the
// group (issued); the writer acknowledges them in order (durable). A reply
// may reveal anything its group decided up to its Ready, so it is held
// until every write issued before it is durable; when none is in flight it
// goes out at once, which is the common case of a heartbeat that changed
// nothing. Reads (OffsetFetch, DescribeGroups, ConsumerGroupDescribe,
// DeleteGroups) wait the same way before they answer.
//
// A failed write, or a panic in the core, takes the group offline: the
// core is dropped with everything it decided since the store last agreed
// with it, every reply and read waiting on it is answered
// COORDINATOR_NOT_AVAILABLE (retriable: the client retries), its queued
// writes are skipped, and the next request rebuilds the core from the
// store (coordinator.Restore) once no write of the old core is in flight.

// heldReply is a reply waiting for its group's writes up to seq.
type heldReply struct {
	seq uint64
	r   coordinator.Reply
}

// barrier is a read waiting for its group's writes up to seq; done gets
// nil once they are durable, or the error that took the group offline.
type barrier struct {
	seq  uint64
	done chan error
}

// reloadBackoff spaces the attempts to rebuild a group whose store is
// failing, so that a flood of retries does not become a flood of loads.
const reloadBackoff = 250 * time.Millisecond

// queueWrite hands recs, the records of one Ready, to the writer. e.mu
// must be held.
func (s *Server) queueWrite(e *groupEntry, recs []coordinator.Record) {
	e.issued++
	e.inflight++
	seq, inc := e.issued, e.inc
	e.tm.writer.submit(&write{
		recs:  recs,
		group: e,
		live: func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.inc == inc
		},
		done: func(err error) { s.written(e, seq, inc, err) },
	})
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
	e.waiting = append(e.waiting, heldReply{seq: e.issued, r: r})
}

// written is the writer's acknowledgement of write seq of e's core inc.
func (s *Server) written(e *groupEntry, seq, inc uint64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight--
	if inc != e.inc {
		// The core that wrote this is gone; whoever dropped it answered
		// what waited on it.
		return
	}
	if err != nil {
		s.takeOffline(e, "store write failed", zap.Error(err))
		return
	}
	s.landed(e, seq)
	s.release(e)
	if e.g != nil && e.g.Deleted() && e.durable == e.issued && !e.gone {
		e.tm.groups.remove(e)
	}
}

// landed records that write seq of e is durable, and moves e.durable as
// far as every write up to it is. e.mu must be held.
func (s *Server) landed(e *groupEntry, seq uint64) {
	if seq != e.durable+1 {
		i, _ := slices.BinarySearch(e.landed, seq)
		e.landed = slices.Insert(e.landed, i, seq)
		return
	}
	e.durable = seq
	n := 0
	for n < len(e.landed) && e.landed[n] == e.durable+1 {
		e.durable++
		n++
	}
	e.landed = shift(e.landed, n)
}

// release sends the held replies and ends the barriers that e's durable
// writes now cover. e.mu must be held.
func (s *Server) release(e *groupEntry) {
	n := 0
	for n < len(e.waiting) && e.waiting[n].seq <= e.durable {
		s.reply(e.tm, e.waiting[n].r, nil)
		n++
	}
	e.waiting = shift(e.waiting, n)
	n = 0
	for n < len(e.barriers) && e.barriers[n].seq <= e.durable {
		e.barriers[n].done <- nil
		n++
	}
	e.barriers = shift(e.barriers, n)
}

// shift drops the first n elements of s, keeping its memory.
func shift[T any](s []T, n int) []T {
	if n == 0 {
		return s
	}
	k := copy(s, s[n:])
	clear(s[k:])
	return s[:k]
}

// waitDurable returns a channel that gets nil once every write e has
// issued so far is durable, or nil if none is in flight. e.mu must be
// held.
func (s *Server) waitDurable(e *groupEntry) <-chan error {
	if e.durable == e.issued {
		return nil
	}
	ch := make(chan error, 1)
	e.barriers = append(e.barriers, barrier{seq: e.issued, done: ch})
	return ch
}

// errGroupOffline ends the barriers of a group taken offline.
var errGroupOffline = fmt.Errorf("server: group offline")

// takeOffline drops e's core after a failed write or a panic: what it
// decided that the store may not have is forgotten, every reply and read
// waiting on it and every request parked in it is answered
// COORDINATOR_NOT_AVAILABLE, and its queued writes will be skipped. The
// next request reloads the core from the store. e.mu must be held.
func (s *Server) takeOffline(e *groupEntry, why string, fields ...zap.Field) {
	s.log.Error("group offline: "+why+"; it is reloaded from the store on its next request",
		append([]zap.Field{zap.String("group", e.name)}, fields...)...)
	s.m.groupsOffline.WithLabelValues(offlineReason(why)).Inc()
	e.inc++
	e.offline, e.offlineAt = true, time.Now()
	e.g = nil
	s.stopTimer(e)
	code := kerr.CoordinatorNotAvailable.Code
	s.answerWaiting(e, code, errGroupOffline)
	s.answerParked(func(p *groupEntry) bool { return p == e }, code)
}

// answerWaiting answers e's held replies with code and ends its barriers
// with err. e.mu must be held.
func (s *Server) answerWaiting(e *groupEntry, code int16, err error) {
	for _, h := range e.waiting {
		if sl, ok := h.r.Ref.(*slot); ok {
			sl.c.deliver(sl, errorResponse(sl.req, code), 0, true)
		}
	}
	clear(e.waiting)
	e.waiting = e.waiting[:0]
	for _, b := range e.barriers {
		b.done <- err
	}
	clear(e.barriers)
	e.barriers = e.barriers[:0]
}

// answerParked answers with code every request parked in a group that
// match selects, on every connection.
func (s *Server) answerParked(match func(*groupEntry) bool, code int16) {
	s.eachConn(func(c *conn) {
		c.mu.Lock()
		var parked []*slot
		for _, sl := range c.q[c.head:] {
			if e := sl.group.Load(); sl.state == slotWaiting && e != nil && match(e) {
				parked = append(parked, sl)
			}
		}
		c.mu.Unlock()
		for _, sl := range parked {
			sl.unpark()
			c.deliver(sl, errorResponse(sl.req, code), 0, true)
		}
	})
}

func offlineReason(why string) string {
	if why == "core panicked" {
		return "panic"
	}
	return "store"
}

// reload rebuilds e's core from the store: a new entry's (the name's
// records, if any: a deleted group's tombstone makes the new group
// continue above its epochs), or one taken offline. It reports whether
// the group is online. It does nothing while a write of the old core is in
// flight (the store may not hold its outcome yet) or within reloadBackoff
// of the last failure. e.mu must be held.
func (s *Server) reload(e *groupEntry, now time.Time) bool {
	if e.inflight > 0 || !e.offlineAt.IsZero() && time.Since(e.offlineAt) < reloadBackoff {
		return false
	}
	ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
	defer cancel()
	recs, err := e.tm.store.LoadGroup(ctx, e.name)
	var g *coordinator.Group
	if err == nil {
		g, err = s.restoreGroup(e.name, now, recs)
	}
	if err != nil {
		e.offlineAt = time.Now()
		s.m.groupLoads.WithLabelValues("error").Inc()
		s.log.Error("group cannot be loaded from the store; it stays offline", zap.String("group", e.name), zap.Error(err))
		return false
	}
	if !e.offlineAt.IsZero() {
		s.m.groupLoads.WithLabelValues("reloaded").Inc()
		s.log.Info("group reloaded from the store", zap.String("group", e.name), zap.Int32("epoch", g.Epoch()), zap.Int("records", len(recs)))
	} else if len(recs) > 0 {
		s.log.Debug("group continues from its tombstone", zap.String("group", e.name), zap.Int32("epoch", g.Epoch()))
	}
	e.g, e.offline, e.offlineAt = g, false, time.Time{}
	e.durable = e.issued
	e.landed = e.landed[:0]
	s.performReady(e, nil)
	return true
}

// The core panics on a broken invariant, as raft does: it is a bug, and
// the group's state can no longer be trusted. The server contains it to
// the group: the panic is logged with its stack and the request, counted,
// and the group goes offline and is reloaded from the store, while every
// other group goes on.

// stepCore steps e's core with in (sl is the request's slot, nil for any
// other input); it reports false if the core panicked. e.mu must be held.
func (s *Server) stepCore(e *groupEntry, sl *slot, now time.Time, in coordinator.Input) (ok bool) {
	defer s.recoverCore(e, sl, &ok)
	if s.coreHook != nil {
		s.coreHook(e.name)
	}
	e.g.Step(now, in)
	return true
}

// useCore runs fn on e's core (a read, or inputs stepped under one
// containment); it reports false if the core panicked.
func (s *Server) useCore(e *groupEntry, fn func(g *coordinator.Group)) (ok bool) {
	defer s.recoverCore(e, nil, &ok)
	if s.coreHook != nil {
		s.coreHook(e.name)
	}
	fn(e.g)
	return true
}

// recoverCore is deferred around every use of a core.
func (s *Server) recoverCore(e *groupEntry, sl *slot, ok *bool) {
	r := recover()
	if r == nil {
		return
	}
	*ok = false
	s.m.corePanics.Inc()
	fields := []zap.Field{zap.Any("panic", r), zap.ByteString("stack", debug.Stack())}
	if sl != nil {
		fields = append(fields, zap.String("request", kmsg.NameForKey(sl.key)), zap.Int16("version", sl.version),
			zap.String("client", sl.c.clientID), zap.String("remote", sl.c.addr))
		if m := memberOf(sl.req); m != "" {
			fields = append(fields, zap.String("member", m))
		}
	}
	s.takeOffline(e, "core panicked", fields...)
}

// memberOf returns the member ID a request names (api.member), "" for
// none.
func memberOf(req kmsg.Request) string {
	if f := apis[req.Key()].member; f != nil {
		return f(req)
	}
	return ""
}

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
