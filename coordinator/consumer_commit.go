package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerCommitMember validates an OffsetCommit to a KIP-848 group, in
// the order of Kafka's ConsumerGroup.validateOffsetCommit: a commit with a
// negative epoch to a group without members is an admin commit (member
// ""); otherwise the member must exist (UNKNOWN_MEMBER_ID), the request
// must be v9+ (UNSUPPORTED_VERSION: older versions carry a generation, not
// a member epoch) and its epoch must not be above the member's
// (STALE_MEMBER_EPOCH). An epoch below the member's is checked per
// partition against the epoch at which the member received it (KIP-1251),
// in commitPartition. A static member parked by a -2 leave has epoch -2,
// so all its commits are stale.
func (g *Group) consumerCommitMember(m *kmsg.OffsetCommitRequest) (member string, code int16) {
	c := &g.consumer
	if m.Generation < 0 && len(c.members) == 0 {
		return "", 0
	}
	mem, ok := c.members[m.MemberID]
	if !ok {
		return "", kerr.UnknownMemberID.Code
	}
	if m.Version < 9 {
		return "", kerr.UnsupportedVersion.Code
	}
	if m.Generation > mem.epoch {
		return "", kerr.StaleMemberEpoch.Code
	}
	return mem.id, 0
}
