package coordinator

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicLeave handles LeaveGroup (Kafka's classicGroupLeaveToClassicGroup).
// Version 3 and later name a batch of members, each by member ID or by
// instance ID (an admin removing static members sends only the instance
// ID), and get an error code per member; earlier versions name one member
// and get its code as the top-level code. Members that leave answer their
// parked requests UNKNOWN_MEMBER_ID, release their partitions, and the
// group rebalances once for the whole batch.
func (g *Group) classicLeave(now time.Time, req Request, m *kmsg.LeaveGroupRequest) {
	resp := response[kmsg.LeaveGroupResponse](req.Resp, m.Version)
	if g.deleted {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		g.reply(req, resp)
		return
	}
	if m.Version < 3 {
		code, left := g.classicLeaveOne(kmsg.LeaveGroupRequestMember{MemberID: m.MemberID})
		resp.ErrorCode = code
		if left {
			g.classicAfterRemoval(now, "member-left")
		} else {
			// A pending member may have held up the join phase.
			g.classicMaybeCompleteJoin(now)
		}
		g.reply(req, resp)
		return
	}
	removed, reason := false, "member-left"
	resp.Members = make([]kmsg.LeaveGroupResponseMember, len(m.Members))
	for i, lm := range m.Members {
		code, left := g.classicLeaveOne(lm)
		removed = removed || left
		if left && lm.Reason != nil && strings.Contains(*lm.Reason, adminRemovalReason) {
			reason = "admin-removal"
		}
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID = lm.MemberID
		r.InstanceID = lm.InstanceID
		r.ErrorCode = code
		resp.Members[i] = r
	}
	if removed {
		g.classicAfterRemoval(now, reason)
	} else {
		g.classicMaybeCompleteJoin(now)
	}
	g.reply(req, resp)
}

// adminRemovalReason is what Kafka's admin client puts in the reason of a
// LeaveGroup that removes members (KIP-800), and `tenure groups drain
// --remove` too: the generation log then says "admin-removal".
const adminRemovalReason = "removed by an admin"

// classicLeaveOne removes one member; left reports whether a member (not
// merely a pending one) was removed.
func (g *Group) classicLeaveOne(lm kmsg.LeaveGroupRequestMember) (code int16, left bool) {
	if g.typ != Classic {
		return kerr.UnknownMemberID.Code, false
	}
	c := &g.classic
	id := lm.MemberID
	if lm.InstanceID != nil {
		known, ok := c.static[*lm.InstanceID]
		if !ok {
			return kerr.UnknownMemberID.Code, false
		}
		if id != "" && id != known {
			return kerr.FencedInstanceID.Code, false
		}
		id = known
	} else if _, ok := c.pending[id]; ok {
		c.dropPending(id)
		return 0, false
	}
	mem, ok := c.members[id]
	if !ok {
		return kerr.UnknownMemberID.Code, false
	}
	g.classicRemove(mem, kerr.UnknownMemberID.Code, EventMemberLeft, "")
	return 0, true
}
