package server

import (
	"time"

	"github.com/tenure-dev/tenure/coordinator"
)

// arm sets the group's timer for next (zero: no timer). A NextTick that
// has already passed fires after a millisecond, never in a busy loop.
func (s *Server) arm(e *groupEntry, next time.Time) {
	if next.Equal(e.armed) {
		return
	}
	e.armed = next
	if next.IsZero() {
		if e.timer != nil {
			e.timer.Stop()
		}
		return
	}
	d := max(time.Until(next), time.Millisecond)
	if e.timer == nil {
		e.timer = time.AfterFunc(d, func() { s.fire(e) })
		return
	}
	e.timer.Reset(d)
}

func (s *Server) stopTimer(e *groupEntry) {
	if e.timer != nil {
		e.timer.Stop()
	}
	e.armed = time.Time{}
}

// fire is the group's timer: it ticks the core and performs its Ready.
func (s *Server) fire(e *groupEntry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if e.gone || e.offline || !e.tm.valid(now) {
		return
	}
	e.armed = time.Time{}
	if s.stepCore(e, nil, now, coordinator.Tick{}) {
		s.performReady(e, nil)
	}
}
