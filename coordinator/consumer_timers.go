package coordinator

import (
	"slices"
	"strings"
	"time"
)

// consumerTick evicts the members whose session expired or who held
// revoked partitions beyond their rebalance timeout, and recomputes the
// earliest deadline. The scan is O(members), but it runs only when the
// cached deadline is due, which a group of heartbeating members reaches
// about once per session timeout.
//
// All members evicted by one Tick share one epoch bump (Kafka bumps once
// per eviction); tokens and safety do not depend on the count.
func (g *Group) consumerTick(now time.Time) {
	c := &g.consumer
	if c.nextDeadline.IsZero() || now.Before(c.nextDeadline) {
		return
	}
	var expired, timedOut []*consumerMember
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, m := range c.members {
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
	if len(expired)+len(timedOut) == 0 {
		return
	}
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
	g.bumpEpoch(strings.Join(reasons, ","), true)
	g.consumerCheckStable()
}
