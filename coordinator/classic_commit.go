package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicCommitMember validates a classic OffsetCommit's member and
// generation (Kafka's ClassicGroup.validateOffsetCommit). It returns the
// committing member ID, or "" for an admin commit, and a group-level error
// code (0 if the commit may go on to the per-partition checks):
//
//   - generation < 0 to an Empty group: an admin commit (or a consumer
//     that does not use group management), accepted;
//   - an instance ID that maps to no member: UNKNOWN_MEMBER_ID; to another
//     member: FENCED_INSTANCE_ID;
//   - an unknown member ID: UNKNOWN_MEMBER_ID;
//   - a generation other than the current one: ILLEGAL_GENERATION;
//   - no member ID and generation < 0 to a group with members:
//     UNKNOWN_MEMBER_ID (only an empty group takes such commits);
//   - CompletingRebalance: REBALANCE_IN_PROGRESS (the member has the new
//     generation but not yet its assignment).
//
// A commit with the current generation during PreparingRebalance is
// accepted: eager clients commit while revoking, before they rejoin.
//
// For protocol type "consumer" (consumerProtocolType) the per-partition
// check then requires the member to own the partition
// (g.owners.commitToken); groups of other protocol types have no partition
// owners, so their commits are checked by member and generation only.
func (g *Group) classicCommitMember(m *kmsg.OffsetCommitRequest) (member string, code int16) {
	if g.deleted {
		return "", kerr.CoordinatorNotAvailable.Code
	}
	if g.typ != Classic {
		return "", kerr.UnknownMemberID.Code
	}
	c := &g.classic
	if m.Generation < 0 && c.phase == classicEmpty {
		return "", 0
	}
	if m.Generation < 0 && m.MemberID == "" && m.InstanceID == nil {
		return "", kerr.UnknownMemberID.Code
	}
	if m.InstanceID != nil {
		known, ok := c.static[*m.InstanceID]
		if !ok {
			return "", kerr.UnknownMemberID.Code
		}
		if known != m.MemberID {
			return "", kerr.FencedInstanceID.Code
		}
	} else if _, ok := c.members[m.MemberID]; !ok {
		return "", kerr.UnknownMemberID.Code
	}
	if m.Generation != g.epoch {
		return "", kerr.IllegalGeneration.Code
	}
	if c.phase == classicCompleting {
		return "", kerr.RebalanceInProgress.Code
	}
	return m.MemberID, 0
}
