package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4.
//
// A classic member's heartbeat, stepped into its group's core
// (coordinator/classic_heartbeat.go); it never creates a group. It is the
// classic group's hot path: the request and response objects are the
// slot's own, so a steady-state heartbeat allocates only the strings it
// decodes, and its handling time is the heartbeat histogram's.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.

func init() {
	register(api{
		key: 12, min: 0, max: 4,
		member:    func(req kmsg.Request) string { return req.(*kmsg.HeartbeatRequest).MemberID },
		aliasFree: true,
		request: func(sl *slot) kmsg.Request {
			sl.hb = kmsg.HeartbeatRequest{}
			return &sl.hb
		},
		response: func(sl *slot) kmsg.Response { return &sl.hbResp },
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			name := sl.req.(*kmsg.HeartbeatRequest).Group
			if s.groupDenied(c, sl, name, opRead) {
				return
			}
			s.step(c, sl, name, false, now)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.HeartbeatResponse).ErrorCode },
	})
}
