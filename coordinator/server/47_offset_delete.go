package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0.
//
// Stepped into the group's core, which applies Kafka's rules on whose
// offsets may be deleted (coordinator/offsets_delete.go); it never creates
// a group.

func init() {
	register(api{
		key: 47, min: 0, max: 0,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			s.step(c, sl, sl.req.(*kmsg.OffsetDeleteRequest).Group, false, now)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.OffsetDeleteResponse).ErrorCode },
	})
}
