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

func init() {
	register(api{
		key: 14, min: 0, max: 5,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			s.step(c, sl, sl.req.(*kmsg.SyncGroupRequest).Group, false, now)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.SyncGroupResponse).ErrorCode },
	})
}
