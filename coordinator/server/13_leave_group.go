package server

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-5.
//
// Stepped into the group's core (coordinator/classic_leave.go); it never
// creates a group. v3+ names a batch of members, each answered with its
// own code.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.

func init() {
	register(api{
		key: 13, min: 0, max: 5,
		member:    func(req kmsg.Request) string { return req.(*kmsg.LeaveGroupRequest).MemberID },
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			name := sl.req.(*kmsg.LeaveGroupRequest).Group
			if s.groupDenied(c, sl, name, opRead) {
				return
			}
			s.step(c, sl, name, false, now)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			r := resp.(*kmsg.LeaveGroupResponse)
			return cmp.Or(r.ErrorCode, firstCode(r.Members, func(m *kmsg.LeaveGroupResponseMember) int16 { return m.ErrorCode }))
		},
	})
}
