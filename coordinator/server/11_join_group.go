package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-9.
//
// Stepped into the group's core, which parks it until the join phase of
// the classic rebalance ends (coordinator/classic_join.go). A JoinGroup may
// create its group, as in Kafka. The core keeps the members' protocol
// metadata, so the request is decoded from its own copy of the frame.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
// A connection holding MaxParkedPerConnection parked requests, or a group
// holding MaxParkedPerGroup, gets COORDINATOR_LOAD_IN_PROGRESS instead of
// parking one more (slot.go).

func init() {
	register(api{
		key: 11, min: 0, max: 9,
		member: func(req kmsg.Request) string { return req.(*kmsg.JoinGroupRequest).MemberID },
		parks:  true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			name := sl.req.(*kmsg.JoinGroupRequest).Group
			if s.groupDenied(c, sl, name, opRead) {
				return
			}
			s.step(c, sl, name, true, now)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = code
			resp.Generation = -1
			// A member keeps the ID it sent, as with Kafka's refusals.
			resp.MemberID = req.(*kmsg.JoinGroupRequest).MemberID
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.JoinGroupResponse).ErrorCode },
	})
}
