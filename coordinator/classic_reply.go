package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// emptyConsumerAssignment is an encoded ConsumerMemberAssignment with no
// partitions. A "consumer" group member the leader assigned nothing gets
// it instead of zero bytes, which some clients fail to decode (kfake does
// the same). It is shared and never modified.
var emptyConsumerAssignment = func() []byte {
	var a kmsg.ConsumerMemberAssignment
	return a.AppendTo(nil)
}()

func classicJoinResponse(r kmsg.Response, version int16) *kmsg.JoinGroupResponse {
	return response[kmsg.JoinGroupResponse](r, version)
}

func classicSyncResponse(r kmsg.Response, version int16) *kmsg.SyncGroupResponse {
	return response[kmsg.SyncGroupResponse](r, version)
}

// classicReplyJoinError answers a JoinGroup with an error. As in Kafka, the
// member ID is cleared with UNKNOWN_MEMBER_ID (the client must join anew)
// and kept otherwise.
func (g *Group) classicReplyJoinError(p *classicParked, code int16, memberID string) {
	resp := classicJoinResponse(p.resp, p.version)
	resp.ErrorCode = code
	if code != kerr.UnknownMemberID.Code && code != kerr.GroupMaxSizeReached.Code {
		resp.MemberID = memberID
	}
	g.reply(Request{Ref: p.ref}, resp)
}

func (g *Group) classicReplySyncError(p *classicParked, code int16) {
	resp := classicSyncResponse(p.resp, p.version)
	resp.ErrorCode = code
	g.reply(Request{Ref: p.ref}, resp)
}

// classicJoinSuccess answers m's JoinGroup with the current generation;
// members is the member list for the leader (nil for the others).
func (g *Group) classicJoinSuccess(p *classicParked, m *classicMember, members []kmsg.JoinGroupResponseMember) {
	c := &g.classic
	resp := classicJoinResponse(p.resp, p.version)
	resp.Generation = g.epoch
	resp.ProtocolType = kmsg.StringPtr(c.protocolType)
	resp.Protocol = kmsg.StringPtr(c.protocol)
	resp.LeaderID = c.leader
	resp.MemberID = m.id
	resp.Members = members
	g.reply(Request{Ref: p.ref}, resp)
}

// classicSyncSuccess answers m's SyncGroup with its assignment.
func (g *Group) classicSyncSuccess(p *classicParked, m *classicMember) {
	c := &g.classic
	resp := classicSyncResponse(p.resp, p.version)
	resp.ProtocolType = kmsg.StringPtr(c.protocolType)
	resp.Protocol = kmsg.StringPtr(c.protocol)
	resp.MemberAssignment = m.assignment
	g.replyGranting(Request{Ref: p.ref}, resp, g.classicGrants(m, resp))
}

// classicLeaderMembers is the member list a leader receives: every member,
// sorted by ID, with its metadata for the chosen protocol.
func (g *Group) classicLeaderMembers(ms []*classicMember) []kmsg.JoinGroupResponseMember {
	c := &g.classic
	out := make([]kmsg.JoinGroupResponseMember, len(ms))
	for i, m := range ms {
		out[i] = kmsg.NewJoinGroupResponseMember()
		out[i].MemberID = m.id
		if m.static {
			out[i].InstanceID = kmsg.StringPtr(m.instanceID)
		}
		out[i].ProtocolMetadata = m.metadata(c.protocol)
	}
	return out
}
