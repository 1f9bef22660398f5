package coordinator

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// classicTimer names the classic group's timers, in the order classicTick
// fires timers that fall due at the same instant.
type classicTimer uint8

const (
	_ classicTimer = iota
	classicTimerSession
	classicTimerConnLoss
	classicTimerPending
	classicTimerSync
	classicTimerJoin
)

// classicNext is the earliest classic deadline; O(1).
func (g *Group) classicNext() time.Time {
	_, at := g.classicEarliest()
	return at
}

func (g *Group) classicEarliest() (classicTimer, time.Time) {
	c := &g.classic
	var (
		kind classicTimer
		at   time.Time
	)
	consider := func(k classicTimer, t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			kind, at = k, t
		}
	}
	consider(classicTimerSession, c.sessNext)
	consider(classicTimerConnLoss, g.conn.next)
	consider(classicTimerPending, c.pendingNext)
	consider(classicTimerSync, c.syncDeadline)
	consider(classicTimerJoin, c.joinDeadline)
	return kind, at
}

// classicTick fires the timers due at now, earliest first, so that a late
// Tick sees them in the order they fell due. Each handler moves its own
// timer past now, which bounds the loop.
func (g *Group) classicTick(now time.Time) {
	for {
		kind, at := g.classicEarliest()
		if at.IsZero() || at.After(now) {
			return
		}
		switch kind {
		case classicTimerSession:
			g.classicExpireSessions(now)
		case classicTimerConnLoss:
			if g.expireConnLost(now) {
				g.classicAfterRemoval(now, connLossReason)
			}
		case classicTimerPending:
			g.classicExpirePending(now)
		case classicTimerSync:
			g.classicSyncDeadline(now)
		case classicTimerJoin:
			g.classicJoinDeadline(now)
		}
	}
}

// classicExpireSessions removes the members whose session ran out (members
// with a parked request do not expire) and recomputes sessNext; O(members),
// which a group pays at most once per session timeout less heartbeat
// interval, not per heartbeat.
func (g *Group) classicExpireSessions(now time.Time) {
	c := &g.classic
	var expired []*classicMember
	for _, mem := range c.members {
		if !mem.parked() && !now.Before(mem.deadline) {
			expired = append(expired, mem)
		}
	}
	if len(expired) > 0 {
		slices.SortFunc(expired, func(a, b *classicMember) int { return strings.Compare(a.id, b.id) })
		for _, mem := range expired {
			g.classicRemove(mem, kerr.UnknownMemberID.Code, EventMemberExpired, "")
		}
		g.classicAfterRemoval(now, "member-expired")
	}
	c.sessNext = time.Time{}
	for _, mem := range c.members {
		if !mem.parked() && (c.sessNext.IsZero() || mem.deadline.Before(c.sessNext)) {
			c.sessNext = mem.deadline
		}
	}
}

// classicExpirePending forgets the pending members whose session ran out.
func (g *Group) classicExpirePending(now time.Time) {
	c := &g.classic
	gone := false
	c.pendingNext = time.Time{}
	for id, p := range c.pending {
		if !now.Before(p.deadline) {
			delete(c.pending, id)
			gone = true
		} else if c.pendingNext.IsZero() || p.deadline.Before(c.pendingNext) {
			c.pendingNext = p.deadline
		}
	}
	if gone {
		g.classicMaybeCompleteJoin(now)
	}
}

// classicSyncDeadline removes the members that did not send SyncGroup
// within the rebalance timeout after the join phase ended, and starts a new
// rebalance (Kafka's expirePendingSync).
func (g *Group) classicSyncDeadline(now time.Time) {
	c := &g.classic
	c.syncDeadline = time.Time{}
	if c.pendingSyncs == 0 || c.phase != classicCompleting && c.phase != classicStable {
		return
	}
	var late []*classicMember
	for _, mem := range c.members {
		if mem.pendingSync {
			late = append(late, mem)
		}
	}
	slices.SortFunc(late, func(a, b *classicMember) int { return strings.Compare(a.id, b.id) })
	for _, mem := range late {
		g.classicRemove(mem, kerr.UnknownMemberID.Code, EventMemberRemoved, "sync-timeout")
	}
	g.classicPrepareRebalance(now, "sync-timeout")
}
