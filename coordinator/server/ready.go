package server

import (
	"strconv"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// performReady does what the group's Ready asks: its records go to the
// writer, its replies are sent once the group's writes up to this Ready
// are durable (at once when none is in flight), its events are logged and
// counted, and the timer is re-armed. self is the connection whose reader
// is calling (nil from elsewhere): its replies are flushed by that reader,
// others' writers are kicked. e.mu must be held.
func (s *Server) performReady(e *groupEntry, self *conn) {
	g := e.g
	if !g.HasReady() {
		return
	}
	rd := g.Ready()
	if len(rd.Persist) > 0 {
		s.queueWrite(e, rd.Persist)
	}
	for i := range rd.Replies {
		if a, ok := rd.Replies[i].Ref.(*adminAnswer); ok {
			a.err = rd.Replies[i].Err
			continue
		}
		s.sign(e.name, &rd.Replies[i])
		s.replyWhenDurable(e, rd.Replies[i], self)
	}
	for i := range rd.Events {
		s.observe(e, &rd.Events[i])
	}
	if e.unownedStale {
		// Once per Ready: Stats costs the group's subscriptions.
		e.unownedStale = false
		s.updateUnowned(e)
	}
	g.Advance(rd)
	if g.Deleted() {
		// The group leaves the registry once its tombstone is durable,
		// so that a group re-created under its name loads the
		// tombstone and continues above its epochs.
		s.stopTimer(e)
		if e.durable == e.issued {
			e.tm.groups.remove(e)
		}
		return
	}
	s.arm(e, rd.NextTick)
}

// observe logs and counts one event of e's group.
func (s *Server) observe(e *groupEntry, ev *coordinator.Event) {
	if s.cfg.PerGroupMetrics {
		if e.generation == nil {
			e.groupGauges = groupGauges{s.m.generation.WithLabelValues(groupLabel(e.name)), s.m.members.WithLabelValues(groupLabel(e.name))}
		}
		e.generation.Set(float64(ev.Epoch))
		e.members.Set(float64(ev.Members))
	}
	switch ev.Kind {
	case coordinator.EventNewGeneration:
		s.m.rebalances.WithLabelValues(e.g.Type().String(), ev.Reason).Inc()
		s.log.Debug("new generation",
			zap.String("group", ev.Group), zap.Int32("epoch", ev.Epoch), zap.Int("members", ev.Members), zap.String("reason", ev.Reason))
		e.unownedStale = true
	case coordinator.EventPartitionHandedOff:
		s.m.handoff.Observe(ev.Duration.Seconds())
		// A grant is when a partition stops being unowned: the
		// per-group gauge follows it, not only membership changes.
		e.unownedStale = true
	case coordinator.EventRebalanceCompleted:
		s.log.Info("rebalance completed",
			zap.String("group", ev.Group), zap.String("type", e.g.Type().String()),
			zap.Int32("epoch", ev.Epoch), zap.Int("members", ev.Members),
			zap.Int("moves", ev.Moves), zap.String("reason", ev.Reason))
		e.unownedStale = true
	case coordinator.EventRebalanceStarted:
		s.log.Debug("rebalance started",
			zap.String("group", ev.Group), zap.Int32("epoch", ev.Epoch), zap.String("reason", ev.Reason))
	case coordinator.EventMemberJoined, coordinator.EventMemberLeft:
		if ev.Kind == coordinator.EventMemberLeft {
			e.memberGone()
		}
		s.log.Debug(ev.Kind.String(),
			zap.String("group", ev.Group), zap.String("member", ev.MemberID),
			zap.Int32("epoch", ev.Epoch), zap.Int("members", ev.Members), zap.String("reason", ev.Reason))
	case coordinator.EventMemberExpired, coordinator.EventMemberRemoved:
		e.memberGone()
		if ev.Kind == coordinator.EventMemberExpired {
			s.m.expired(ev.Reason).Inc()
		}
		s.log.Info(ev.Kind.String(),
			zap.String("group", ev.Group), zap.String("member", ev.MemberID),
			zap.Int32("epoch", ev.Epoch), zap.Int("members", ev.Members), zap.String("reason", ev.Reason))
		e.unownedStale = true
	case coordinator.EventCommitRejected:
		s.m.commitsRejected.Inc()
		s.log.Info("commit rejected",
			zap.String("group", ev.Group), zap.String("member", ev.MemberID),
			zap.String("topic", ev.Partition.Topic), zap.Int32("partition", ev.Partition.Partition),
			zap.Int32("epoch", ev.Epoch), zap.String("reason", ev.Reason))
	}
}

// updateUnowned sets the group's unowned-partitions gauge.
func (s *Server) updateUnowned(e *groupEntry) {
	if !s.cfg.PerGroupMetrics {
		return
	}
	if e.unowned == nil {
		e.unowned = s.m.unowned.WithLabelValues(groupLabel(e.name))
	}
	e.unowned.Set(float64(e.g.Stats().Unowned))
}

// groupLabel is the metric label of a group. Kafka group IDs may be any
// bytes, but Prometheus label values must be UTF-8: an invalid name is
// labelled with its Go-quoted ASCII form, which no two names share.
func groupLabel(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	return strconv.QuoteToASCII(name)
}
