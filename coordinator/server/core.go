package server

import (
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

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
	s.gateTargets(e.g)
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
	s.gateTargets(e.g)
	fn(e.g)
	return true
}

// gateTargets tells g whether its GroupRecords may carry targets
// (Config.GroupTargets), before anything steps it.
func (s *Server) gateTargets(g *coordinator.Group) {
	g.SetGroupTargets(s.cfg.GroupTargets == nil || s.cfg.GroupTargets())
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
