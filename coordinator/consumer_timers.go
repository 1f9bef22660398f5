package coordinator

import (
	"slices"
	"strings"
	"time"
)

// consumerTick performs the coalesced epoch bump of waiting joins when it
// is due (consumer_coalesce.go), evicts the members whose session expired,
// whose connection closed a grace ago (connloss.go) or who held revoked
// partitions beyond their rebalance timeout, and
// recomputes the earliest deadline. The scan is O(members), but it runs
// only when the cached deadline is due, which a group of heartbeating
// members reaches about once per session timeout.
//
// All members evicted by one Tick share one epoch bump (Kafka bumps once
// per eviction), and so do the waiting joins when their bump is due;
// tokens and safety do not depend on the count.
func (g *Group) consumerTick(now time.Time) {
	c := &g.consumer
	joinsDue := c.joinBumpDue(now)
	var reasons []string
	if !c.nextDeadline.IsZero() && !now.Before(c.nextDeadline) {
		reasons = g.evictDue(now)
	}
	if g.connLossDue(now) && g.expireConnLost(now) {
		reasons = append(reasons, connLossReason)
	}
	if !joinsDue && len(reasons) == 0 {
		return
	}
	if joinsDue {
		c.lastJoinBump = now
	}
	// The waiting joins' reason leads (bumpEpoch).
	g.bumpEpoch(strings.Join(reasons, ","), true)
	g.consumerCheckStable()
}

// evictDue removes the members whose deadline passed, recomputes the
// earliest deadline, and returns the reasons of the removals.
func (g *Group) evictDue(now time.Time) []string {
	c := &g.consumer
	var expired, timedOut []*consumerMember
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, m := range c.members {
		if m.deadline.IsZero() {
			m.deadline = g.deadlineOf(m)
		}
		switch {
		case !now.Before(m.deadline):
			expired = append(expired, m)
		case !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			timedOut = append(timedOut, m)
		default:
			earliest(m.deadline)
			earliest(m.revokeDeadline)
		}
	}
	c.nextDeadline = next
	byID := func(a, b *consumerMember) int { return strings.Compare(a.id, b.id) }
	slices.SortFunc(expired, byID)
	slices.SortFunc(timedOut, byID)
	var reasons []string
	for _, m := range expired {
		g.removeMember(m, EventMemberExpired, "session-timeout")
	}
	if len(expired) > 0 {
		reasons = append(reasons, "member-expired")
	}
	for _, m := range timedOut {
		g.removeMember(m, EventMemberRemoved, "revocation-timeout")
	}
	if len(timedOut) > 0 {
		reasons = append(reasons, "revocation-timeout")
	}
	return reasons
}
