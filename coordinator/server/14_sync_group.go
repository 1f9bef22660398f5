package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5.
//
// Stepped into the group's core, which parks it until the leader's plan
// arrives (coordinator/classic_sync.go); it never creates a group. The core
// keeps the leader's assignments, so the request is decoded from its own
// copy of the frame.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
// A connection holding MaxParkedPerConnection parked requests, or a group
// holding MaxParkedPerGroup, gets COORDINATOR_LOAD_IN_PROGRESS instead of
// parking one more (slot.go).

func init() {
	register(api{
		key: 14, min: 0, max: 5,
		member: func(req kmsg.Request) string { return req.(*kmsg.SyncGroupRequest).MemberID },
		parks:  true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			name := sl.req.(*kmsg.SyncGroupRequest).Group
			if s.groupDenied(c, sl, name, opRead) {
				return
			}
			s.step(c, sl, name, false, now)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.SyncGroupResponse).ErrorCode },
	})
}
