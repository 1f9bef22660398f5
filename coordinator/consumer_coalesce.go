package coordinator

import "time"

// Coalesced joins.
//
// Every epoch bump costs each member a heartbeat that moves it to the new
// epoch and an AssignmentRecord, so a fleet of n members starting together
// costs O(n²) reconciliations and records if every join bumps. With
// Config.ConsumerJoinCoalesce = w > 0, a join bumps the epoch at once only
// if no join did within the last w; otherwise it waits for the bump due w
// after the last one, which every join until then shares (Tick performs
// it). Joins therefore bump the epoch at most once per w, and a lone join
// into a quiet group is not delayed at all. (Kafka 4.3's assignment
// batching, consumer.assignment.interval.ms, delays the target computation
// in the same way, but still bumps the group epoch per join.)
//
// A member that joins while the bump is pending is answered as KIP-848
// answers a member joining a group whose target is still being computed:
// it stands at the current target epoch with an empty assignment, and
// gets its partitions on a heartbeat after the bump. Meanwhile the group
// is "Assigning", and its GroupRecord says so, so that a restored group
// performs the bump at its first Tick instead of leaving the new members
// without partitions. Any other bump that recomputes the target (a
// leave, an eviction, a subscription change) includes the waiting members
// and so serves their bump too; its reason then starts with theirs.

// consumerAssigning is the state of a group whose joins wait for their
// epoch bump, as ConsumerGroupDescribe and the GroupRecord name it.
const consumerAssigning = "Assigning"

// joinReason is the reason of the bumps joins cause.
const joinReason = "member-joined"

// joinsWaiting reports whether members wait for a coalesced epoch bump.
func (c *consumerState) joinsWaiting() bool { return !c.joinDue.IsZero() }

// bumpForJoin bumps the epoch for a member that just joined, now or, when
// joins are coalesced and one bumped less than the window ago, at the end
// of the window.
func (g *Group) bumpForJoin(now time.Time) {
	c := &g.consumer
	if c.joinsWaiting() {
		return
	}
	w := g.cfg.ConsumerJoinCoalesce
	// lastJoinBump is zero until a join bumped the epoch of this
	// consumer group, so a member never waits at target epoch 0.
	if w > 0 && !c.lastJoinBump.IsZero() && now.Before(c.lastJoinBump.Add(w)) {
		c.joinDue = c.lastJoinBump.Add(w)
		g.persistGroup()
		return
	}
	c.lastJoinBump = now
	g.bumpEpoch(joinReason, true)
}

// joinBumpDue reports whether the coalesced bump is due at now; Tick then
// performs it.
func (c *consumerState) joinBumpDue(now time.Time) bool {
	return c.joinsWaiting() && !now.Before(c.joinDue)
}

// takeWaitingJoins ends the wait of the joins for their bump, which the
// bump about to happen for reason serves, and returns that bump's reason.
func (c *consumerState) takeWaitingJoins(reason string) string {
	if !c.joinsWaiting() {
		return reason
	}
	c.joinDue = time.Time{}
	if reason == "" {
		return joinReason
	}
	return joinReason + "," + reason
}
