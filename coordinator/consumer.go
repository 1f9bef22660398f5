package coordinator

// KIP-848: the consumer group protocol, in which the coordinator computes
// the assignment.
//
// A member joins with ConsumerGroupHeartbeat at epoch 0 and then heartbeats
// every Config.ConsumerHeartbeatInterval, sending only what changed (a nil
// field means "unchanged"). Every membership or subscription change bumps
// the group epoch (g.epoch) and recomputes the target assignment with the
// assignor (in the common case incrementally: consumer_incremental.go;
// joins may share one bump: consumer_coalesce.go); each member then
// reconciles towards its target on its own heartbeats:
//
//   - it keeps owned ∩ target and is asked to revoke owned − target; while
//     it still reports a revoked partition it stays at its epoch
//     (UNREVOKED_PARTITIONS) for at most its rebalance timeout, after which
//     it is evicted ("revocation-timeout");
//   - once it reports no revoked partition it advances to the group epoch
//     and is given the partitions of its target that nobody holds; the
//     others wait until their previous owner releases them
//     (UNRELEASED_PARTITIONS).
//
// A partition is therefore never held by two members in the coordinator's
// view (g.owners). A partition given to a member is given at the current
// group epoch, which is higher than the token of any earlier owner (an
// earlier owner got the partition at an epoch whose target gave it to that
// owner). Its fencing token is fixed when the member first reports owning
// it: the member epoch of that heartbeat, never below the epoch at which it
// was given. Until then it is provisional and its token follows the member
// epoch, so that a member whose response was lost, and that first hears of
// the partition at a later epoch, holds the token the coordinator records
// (consumer_tokens.go).
//
// Durable records: a GroupRecord at every epoch bump (Protocol is the
// assignor) and when joins start waiting for a coalesced bump (State
// "Assigning"); a MemberRecord when a member joins, changes its
// subscription, assignor, rack, rebalance timeout, client ID or host, and
// with Deleted when it is removed (which also ends every ownership of the
// member: no AssignmentRecord follows a deletion); an AssignmentRecord
// whenever a member's epoch, owned partitions or their tokens, pending or
// revoking partitions, or target change, except that the target changes
// of an epoch bump go out in the bump's GroupRecord (GroupRecord.Targets)
// and a member's target is written in its AssignmentRecord again only
// when something else of that changes (at the latest its move to the new
// epoch). A restored coordinator takes the targets from these records
// instead of recomputing them.
//
// Where tenure departs from Kafka (each is noted where it happens): the
// successor of a static member takes its partitions under fresh tokens,
// bumping the epoch (without moving anything) only when a fresh token would
// not exceed an inherited one; revoked partitions are released one by one
// as the member stops reporting them; evictions that fall due in the same
// Tick share one epoch bump, and so may joins (Config.ConsumerJoinCoalesce;
// Kafka bumps per join and can only delay the target computation); a
// negative rebalance timeout is INVALID_REQUEST; a static member's
// replacement is not refused by Config.MaxGroupSize; a member rejoining at
// epoch 0 with its own ID is taken back in place even when static (as
// Kafka PR #23542 proposes; Kafka 4.x answers UNRELEASED_INSTANCE_ID),
// and, as it abandoned its partitions, what it gets back is provisional
// again and takes the epoch of the answer as token; a regex subscription
// needs a Topics resolver that implements TopicLister.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/assignor"
)

// memberState is a KIP-848 member's reconciliation state.
type memberState uint8

const (
	_ memberState = iota
	// memberStable: the member owns its target, or all of it that is
	// free, and is at the target epoch.
	memberStable
	// memberUnrevoked: the member was asked to revoke partitions and still
	// reports some of them; it stays at its epoch until it releases them.
	memberUnrevoked
	// memberUnreleased: the member is at the target epoch but part of its
	// target is still held by other members.
	memberUnreleased
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "stable"
	case memberUnrevoked:
		return "unrevoked-partitions"
	case memberUnreleased:
		return "unreleased-partitions"
	}
	return "memberstate(" + itoa(int(s)) + ")"
}

// staticLeftEpoch is the member epoch of a static member that left with
// epoch -2 and may come back (Kafka's LEAVE_GROUP_STATIC_MEMBER_EPOCH).
const staticLeftEpoch = -2

// consumerMember is one KIP-848 member.
type consumerMember struct {
	id         string
	instanceID string
	rack       string
	clientID   string
	clientHost string

	rebalanceTimeout time.Duration
	serverAssignor   string
	// topics is the subscription by name, sorted and without duplicates.
	topics []string
	// regex is the subscription regex (v1+) and re its compiled, anchored
	// form; re is nil when there is none.
	regex string
	re    *regexp.Regexp
	// resolved is topics plus the topics re matches, sorted: what the
	// assignor sees as the member's subscription.
	resolved []string

	// epoch is the member epoch (staticLeftEpoch after a static leave);
	// prevEpoch the epoch before the last advance.
	epoch, prevEpoch int32
	state            memberState

	// assigned are the partitions given to the member and not being
	// revoked, with the token each was given under; revoking are those it
	// still holds but must release. Both are sorted and both are owned by
	// the member in g.owners.
	assigned []OwnedPartition
	revoking []OwnedPartition
	// target is the member's part of the target assignment; pending the
	// part of it still held by other members. Both sorted, and both
	// replaced, never changed in place: AssignmentRecords share them.
	target  []TopicPartition
	pending []TopicPartition
	// unacked are the partitions of assigned and revoking the member has
	// not reported owning yet: their tokens are provisional
	// (consumer_tokens.go). Sorted; entries of partitions the member no
	// longer holds are dropped lazily.
	unacked []provisional

	// deadline is when the session expires, zero for a member restored
	// and not heard from since the group resumed (consumerState.resumedAt);
	// revokeDeadline, when not zero, when the member is evicted if it
	// still holds revoked partitions.
	deadline time.Time
	// graced: restored with the takeover grace, not heard from since.
	graced         bool
	revokeDeadline time.Time

	// assignmentChanged is set when assigned changed since it was last
	// sent to the member.
	assignmentChanged bool
	// granted is assigned as it was when the member was last granted it
	// (Config.IssueGrants): a partition whose token differs is granted
	// again. Nil after ReissueGrants.
	granted []OwnedPartition
	// targetDirty is set when target changed since the member's last
	// AssignmentRecord: the group's GroupRecord carries the target
	// (GroupRecord.Targets) until the member writes it again
	// (consumerState.targetDirty lists such members).
	targetDirty bool
	// countedAt is the target epoch at which the member was counted as
	// reconciled in consumerState.reconciled (0: not counted).
	countedAt int32

	// drained is set by an admin's Drain: the member stays but is
	// assigned nothing; removeWhenDrained removes it once it holds
	// nothing.
	drained           bool
	removeWhenDrained bool
	// idx is the member's place in consumerState.index.
	idx indexNode
	// conn is the shell's tag, never read here (Group.SetMemberConn).
	conn any
}

// consumerState is the KIP-848 part of a Group.
type consumerState struct {
	members map[string]*consumerMember
	// replyGrants carries the grants of the heartbeat being answered from
	// answerMember to its reply.
	replyGrants *Grants
	// static maps instance IDs to member IDs.
	static map[string]string
	// assignorVotes counts the members naming each server assignor.
	assignorVotes map[string]int
	// subscribers counts the members subscribing to each topic by name;
	// regexMembers are the members with a regex subscription. Both are
	// kept up to date so that resolving subscriptions does not walk every
	// member.
	subscribers  map[string]int
	regexMembers map[*consumerMember]struct{}
	// input is reused by every target computation.
	input []assignor.Member

	// targetEpoch is the epoch of the current target assignment; it is
	// computed synchronously, so it equals the group epoch once the group
	// has had a member.
	targetEpoch int32
	assignor    string
	// index finds the members a join or leave changes the target of
	// (consumer_incremental.go).
	index targetIndex

	// joinDue, when not zero, is when the joins waiting for a coalesced
	// epoch bump get it (the group is then "Assigning"); lastJoinBump is
	// when a join last bumped the epoch (consumer_coalesce.go).
	joinDue      time.Time
	lastJoinBump time.Time
	// topics are the existing topics that some member subscribes to, as
	// resolved for the current target; topicIDs maps their IDs (and those
	// of topics resolved before) back to names.
	topics   map[string]resolvedTopic
	topicIDs map[TopicID]string
	// sole is the one topic of topics when it holds one, the common
	// case: every member's first heartbeat at a new coordinator is
	// answered with its whole assignment, and a topic's ID found here
	// costs no lookup in a map nobody touched since the standby rebuilt
	// the group.
	sole      string
	soleTopic resolvedTopic

	// reconciled counts members at the target epoch in the stable state;
	// the group is Stable when it counts every member. stable remembers
	// the last state, to emit EventRebalanceCompleted on the transition,
	// and moves counts owner changes since the last such event.
	reconciled int
	stable     bool
	moves      int

	// nextDeadline is at or before the earliest member deadline (zero when
	// there are no members); only Tick recomputes it exactly.
	nextDeadline time.Time
	// resumedAt is when the group resumed (Resume): a member whose
	// deadline is zero has not been heard from since, and its session
	// ends at restoredDeadline(resumedAt). A takeover resumes each group
	// when its first member asks, and the others ask within the surge
	// that follows: a deadline set for every member at Resume touched
	// each member's state once more, cold, in the surge (9% of the
	// winner's CPU in BenchmarkTakeover's profile).
	resumedAt time.Time

	// targetDirty lists the members whose target changed since their
	// last AssignmentRecord, for the GroupRecord's Targets (an entry whose
	// member wrote one since, or left, is dropped when the next
	// GroupRecord is made; takeTargets). targetsOwed is set when a target
	// changed after the last GroupRecord: the step then writes one more
	// (persistTargets).
	targetDirty []*consumerMember
	targetsOwed bool
	// flushOwed is set when a GroupRecord of the step could not carry
	// the targets of targetDirty (takeTargets): persistTargets writes
	// their members' AssignmentRecords at the step's end.
	flushOwed bool

	// targetMoves collects the partitions whose target owner changed
	// since the last generation log entry (noteTargetChange).
	targetMoves map[TopicPartition]string
	// drained counts the members drained by an admin (input Drain).
	drained int
	// targetSizes counts the members by the size of their target (those
	// with an empty one are not counted), for the generation log's
	// minimum moves.
	targetSizes map[int]int

	// scratch buffers reused by heartbeats.
	reported []TopicPartition

	// heard is the member the latest heartbeat found or added, nil once
	// it is dropped: the shell's SetMemberConn right after the heartbeat
	// finds it without a second lookup in members.
	heard *consumerMember
}

// resolvedTopic is a topic as the target assignment saw it.
type resolvedTopic struct {
	id         TopicID
	partitions int32
}

func (c *consumerState) init() {
	c.members = make(map[string]*consumerMember)
	c.static = make(map[string]string)
	c.assignorVotes = make(map[string]int)
	c.subscribers = make(map[string]int)
	c.regexMembers = make(map[*consumerMember]struct{})
	c.topics = make(map[string]resolvedTopic)
	c.topicIDs = make(map[TopicID]string)
	c.targetSizes = make(map[int]int)
}

// countTarget adds (delta 1) or removes (-1) a target of n partitions in
// targetSizes.
func (c *consumerState) countTarget(n, delta int) {
	if n == 0 {
		return
	}
	if c.targetSizes[n] += delta; c.targetSizes[n] <= 0 {
		delete(c.targetSizes, n)
	}
}

func (c *consumerState) empty() bool { return len(c.members) == 0 }

// stateName is the group state as ConsumerGroupDescribe reports it.
func (c *consumerState) stateName() string {
	switch {
	case len(c.members) == 0:
		return "Empty"
	case c.joinsWaiting():
		return consumerAssigning
	case c.reconciled == len(c.members):
		return "Stable"
	}
	return "Reconciling"
}

// isReconciled reports whether m counts towards a Stable group.
func (c *consumerState) isReconciled(m *consumerMember) bool {
	return m.state == memberStable && m.epoch == c.targetEpoch
}

// recount updates the reconciled count after m changed.
func (c *consumerState) recount(m *consumerMember) {
	counted := m.countedAt == c.targetEpoch && m.countedAt != 0
	switch r := c.isReconciled(m); {
	case r && !counted:
		c.reconciled++
		m.countedAt = c.targetEpoch
	case !r && counted:
		c.reconciled--
		m.countedAt = 0
	}
}

// subscribe counts m's subscription in the group's totals; unsubscribe
// takes it out. A member's subscription changes only between the two.
func (c *consumerState) subscribe(m *consumerMember) {
	for _, t := range m.topics {
		c.subscribers[t]++
	}
	if m.re != nil {
		c.regexMembers[m] = struct{}{}
	}
}

func (c *consumerState) unsubscribe(m *consumerMember) {
	for _, t := range m.topics {
		if c.subscribers[t]--; c.subscribers[t] <= 0 {
			delete(c.subscribers, t)
		}
	}
	delete(c.regexMembers, m)
}

// lowerDeadline makes sure nextDeadline is no later than t.
func (c *consumerState) lowerDeadline(t time.Time) {
	if c.nextDeadline.IsZero() || t.Before(c.nextDeadline) {
		c.nextDeadline = t
	}
}

func (g *Group) consumerNext() time.Time {
	c := &g.consumer
	next := earliest(c.nextDeadline, g.conn.next)
	if c.joinsWaiting() {
		next = earliest(next, c.joinDue)
	}
	return next
}

// consumerString renders the KIP-848 state for Group.String.
func (g *Group) consumerString(b *strings.Builder) {
	c := &g.consumer
	fmt.Fprintf(b, "assignor=%s target-epoch=%d\n", c.assignor, c.targetEpoch)
	for _, id := range c.sortedMemberIDs() {
		m := c.members[id]
		fmt.Fprintf(b, "  %s epoch=%d state=%s", m.id, m.epoch, m.state)
		if m.instanceID != "" {
			b.WriteString(" instance=" + m.instanceID)
		}
		if len(m.topics) > 0 {
			b.WriteString(" topics=" + strings.Join(m.topics, ","))
		}
		if m.re != nil {
			fmt.Fprintf(b, " regex=%q", m.regex)
		}
		b.WriteString(" owned=" + renderOwnedTPs(m.assigned))
		if len(m.revoking) > 0 {
			b.WriteString(" revoking=" + renderOwnedTPs(m.revoking))
		}
		b.WriteString(" target=" + renderTPList(m.target))
		if len(m.pending) > 0 {
			b.WriteString(" pending=" + renderTPList(m.pending))
		}
		if tps := m.provisionalTPs(); len(tps) > 0 {
			b.WriteString(" provisional=" + renderTPList(tps))
		}
		b.WriteByte('\n')
	}
}

func (c *consumerState) sortedMemberIDs() []string {
	ids := make([]string, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// renderOwnedTPs renders sorted partitions with tokens compactly:
// {t[0-3]@5 u[1]@6}.
func renderOwnedTPs(ps []OwnedPartition) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1].Topic == ps[i].Topic && ps[j+1].Partition == ps[j].Partition+1 && ps[j+1].Token == ps[i].Token {
			j++
		}
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		if j > i {
			fmt.Fprintf(&b, "%s[%d-%d]@%v", ps[i].Topic, ps[i].Partition, ps[j].Partition, ps[i].Token)
		} else {
			fmt.Fprintf(&b, "%s[%d]@%v", ps[i].Topic, ps[i].Partition, ps[i].Token)
		}
		i = j + 1
	}
	b.WriteByte('}')
	return b.String()
}

// renderTPList renders sorted partitions compactly: {t[0-3] u[1]}.
func renderTPList(tps []TopicPartition) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(tps); {
		j := i
		for j+1 < len(tps) && tps[j+1].Topic == tps[i].Topic && tps[j+1].Partition == tps[j].Partition+1 {
			j++
		}
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		if j > i {
			fmt.Fprintf(&b, "%s[%d-%d]", tps[i].Topic, tps[i].Partition, tps[j].Partition)
		} else {
			fmt.Fprintf(&b, "%s[%d]", tps[i].Topic, tps[i].Partition)
		}
		i = j + 1
	}
	b.WriteByte('}')
	return b.String()
}
