package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicHeartbeat handles Heartbeat (Kafka's
// classicGroupHeartbeatToClassicGroup). It is the hot path of a classic
// group: O(1), and allocation-free when the caller supplies Request.Resp.
func (g *Group) classicHeartbeat(now time.Time, req Request, m *kmsg.HeartbeatRequest) {
	resp := response[kmsg.HeartbeatResponse](req.Resp, m.Version)
	resp.ErrorCode = g.classicHeartbeatCode(now, m)
	var gr *Grants
	if resp.ErrorCode == 0 {
		if mem := g.classic.members[m.MemberID]; mem != nil && mem.regrant {
			gr = g.classicGrants(mem, resp)
		}
	}
	g.replyGranting(req, resp, gr)
}

func (g *Group) classicHeartbeatCode(now time.Time, m *kmsg.HeartbeatRequest) int16 {
	if g.deleted {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.typ != Classic {
		return kerr.UnknownMemberID.Code
	}
	c := &g.classic
	mem, code := c.validateMember(m.MemberID, m.InstanceID)
	if code != 0 {
		return code
	}
	if m.Generation != g.epoch {
		return kerr.IllegalGeneration.Code
	}
	// The session is refreshed even while a rebalance prepares: the
	// member is alive and is being told to rejoin.
	c.setDeadline(mem, now.Add(mem.session))
	if c.phase == classicPreparing {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
