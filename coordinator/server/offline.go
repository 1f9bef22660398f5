package server

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// A failed write, or a panic in the core, takes the group offline: the
// core is dropped with everything it decided since the store last agreed
// with it, every reply and read waiting on it is answered
// COORDINATOR_NOT_AVAILABLE (retriable: the client retries), its queued
// writes are skipped, and the next request rebuilds the core from the
// store (coordinator.Restore) once no write of the old core is in flight.

// reloadBackoff spaces the attempts to rebuild a group whose store is
// failing, so that a flood of retries does not become a flood of loads.
const reloadBackoff = 250 * time.Millisecond

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
	e.connsLeft++ // the members' connection tags went with the core
	s.stopTimer(e)
	code := kerr.CoordinatorNotAvailable.Code
	s.answerWaiting(e, code, errGroupOffline)
	s.answerParked(func(p *groupEntry) bool { return p == e }, code)
}

// answerWaiting answers e's held replies with code and ends its barriers
// with err. e.mu must be held.
func (s *Server) answerWaiting(e *groupEntry, code int16, err error) {
	for _, h := range e.waiting.items() {
		if sl, ok := h.r.Ref.(*slot); ok {
			sl.c.deliver(sl, errorResponse(sl.req, code), 0, true)
		}
	}
	e.waiting.reset()
	for _, b := range e.barriers.items() {
		b.done <- err
	}
	e.barriers.reset()
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
