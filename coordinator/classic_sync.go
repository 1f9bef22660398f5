package coordinator

import (
	"bytes"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// classicSync handles SyncGroup (Kafka's classicGroupSyncToClassicGroup).
// In CompletingRebalance the request is parked; the leader's completes the
// rebalance. In Stable the member gets its assignment at once.
//
// Only the leader's plan counts: assignments sent by another member are
// ignored, as in Kafka.
func (g *Group) classicSync(now time.Time, req Request, m *kmsg.SyncGroupRequest) {
	c := &g.classic
	p := &classicParked{ref: req.Ref, resp: req.Resp, version: m.Version}
	if g.deleted {
		g.classicReplySyncError(p, kerr.CoordinatorNotAvailable.Code)
		return
	}
	if g.typ != Classic {
		// Kafka looks the member up among the consumer group's
		// classic members, of which tenure has none.
		g.classicReplySyncError(p, kerr.UnknownMemberID.Code)
		return
	}
	mem, code := c.validateMember(m.MemberID, m.InstanceID)
	switch {
	case code != 0:
	case m.Generation != g.epoch:
		code = kerr.IllegalGeneration.Code
	case m.ProtocolType != nil && *m.ProtocolType != c.protocolType,
		m.Protocol != nil && *m.Protocol != c.protocol:
		code = kerr.InconsistentGroupProtocol.Code
	case c.phase == classicPreparing:
		code = kerr.RebalanceInProgress.Code
	}
	if code != 0 {
		g.classicReplySyncError(p, code)
		return
	}
	switch c.phase {
	case classicCompleting:
		if mem.sync != nil {
			// A retry on a new connection: see classicParkJoin.
			g.classicReplySyncError(mem.sync, kerr.RebalanceInProgress.Code)
		}
		mem.sync = p
		c.clearPendingSync(mem)
		if mem.id == c.leader {
			g.classicCompleteSync(now, m.GroupAssignment)
		}
	case classicStable:
		c.clearPendingSync(mem)
		g.classicSyncSuccess(p, mem)
		c.setDeadline(mem, now.Add(mem.session))
	default:
		panic("coordinator: classic member " + mem.id + " in a group in state " + c.phase.String())
	}
}

// classicCompleteSync applies the leader's plan and makes the group Stable
// (Kafka's setAndPropagateAssignment): every member gets its assignment
// (an empty one if the plan names it not), parked SyncGroups are answered,
// and for protocol type "consumer" the partition owners follow the plan.
//
// Ownership: first every partition a member is no longer assigned is
// released, then every partition a member is newly assigned is given to
// it with the current generation as its token; partitions a member keeps
// keep their token. A plan that gives one partition to two members (which
// a correct leader never sends) gives it to the member that already owns
// it, or else to the first by member ID; the others' commits on it are
// refused. Assignment bytes that do not decode as a ConsumerMemberAssignment
// are relayed as they are and give the member no partitions.
//
// Groups of other protocol types ("connect", ...) have no partition
// owners: their commits are checked by member and generation only.
func (g *Group) classicCompleteSync(now time.Time, plan []kmsg.SyncGroupRequestGroupAssignment) {
	c := &g.classic
	for i := range plan {
		if mem, ok := c.members[plan[i].MemberID]; ok {
			mem.next = plan[i].MemberAssignment
		}
	}
	consumer := c.protocolType == consumerProtocolType
	ms := c.sortedMembers()
	raws := make([][]byte, len(ms))
	owned := make([][]TopicPartition, len(ms))
	same := make([]bool, len(ms))
	for i, mem := range ms {
		raw := mem.next
		mem.next = nil
		switch {
		case len(raw) == 0 && consumer:
			raw = emptyConsumerAssignment
		case len(raw) == 0:
			raw = []byte{}
		case bytes.Equal(raw, mem.assignment):
			// Unchanged (the common case with sticky assignors): the
			// member keeps what it owns, under the same tokens.
			raws[i], same[i] = mem.assignment, true
			continue
		default:
			raw = bytes.Clone(raw)
		}
		raws[i] = raw
		if consumer {
			owned[i] = decodeConsumerAssignment(raw)
		}
	}
	if consumer {
		g.classicPlanMoves(now, ms, owned, same)
	}
	for i, mem := range ms {
		if same[i] {
			continue
		}
		for _, tp := range mem.owned {
			if _, ok := slices.BinarySearchFunc(owned[i], tp, compareTP); !ok {
				g.owners.release(tp, mem.id)
			}
		}
	}
	token := epoch.Token(g.epoch)
	moves := 0
	for i, mem := range ms {
		if same[i] {
			continue
		}
		kept := owned[i][:0]
		for _, tp := range owned[i] {
			if o, ok := g.owners.owner(tp); ok {
				if o.member != mem.id {
					continue
				}
			} else {
				g.owners.assign(tp, mem.id, token)
				moves++
			}
			kept = append(kept, tp)
		}
		if len(kept) == 0 {
			kept = nil
		}
		changed := !bytes.Equal(raws[i], mem.assignment) || !slices.Equal(kept, mem.owned)
		mem.assignment, mem.owned = raws[i], kept
		if changed {
			g.persistClassicAssignment(mem)
		}
	}
	if consumer {
		g.classicPlanApplied(now)
	}
	c.phase = classicStable
	g.persistGroup()
	for _, mem := range ms {
		if mem.sync != nil {
			p := mem.sync
			mem.sync = nil
			g.classicSyncSuccess(p, mem)
			c.setDeadline(mem, now.Add(mem.session))
		}
	}
	g.event(Event{Kind: EventRebalanceCompleted, Members: len(c.members), Moves: moves})
}

// decodeConsumerAssignment returns the partitions of a
// ConsumerMemberAssignment, sorted and without duplicates or negative
// partition numbers. Bytes that do not decode give no partitions: the
// member then owns nothing, so its commits are refused until a plan it can
// be credited with arrives.
func decodeConsumerAssignment(raw []byte) []TopicPartition {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(raw); err != nil {
		return nil
	}
	n := 0
	for _, t := range a.Topics {
		n += len(t.Partitions)
	}
	if n == 0 {
		return nil
	}
	out := make([]TopicPartition, 0, n)
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			if p >= 0 {
				out = append(out, TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	slices.SortFunc(out, compareTP)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil
	}
	return out
}
