package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat: v0-1 (KIP-848).
//
// Stepped into the group's core, which computes the target assignment and
// reconciles the member towards it (coordinator/consumer_heartbeat.go). It
// may create its group, as in Kafka. It is the KIP-848 group's hot path:
// the request and response objects are the slot's own, so a steady-state
// heartbeat allocates only the strings it decodes, and its handling time is
// the heartbeat histogram's.

func init() {
	register(api{
		key: 68, min: 0, max: 1,
		aliasFree: true,
		request: func(sl *slot) kmsg.Request {
			sl.cghb = kmsg.ConsumerGroupHeartbeatRequest{}
			return &sl.cghb
		},
		response: func(sl *slot) kmsg.Response {
			sl.cghbResp = kmsg.ConsumerGroupHeartbeatResponse{Version: sl.version}
			sl.cghbResp.Default()
			return &sl.cghbResp
		},
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			req := sl.req.(*kmsg.ConsumerGroupHeartbeatRequest)
			if req.SubscribedTopicNames != nil {
				// Joins and full heartbeats only: not on the steady path.
				if s.knowTopics(req.SubscribedTopicNames, nil) {
					now = time.Now()
				}
				for _, name := range req.SubscribedTopicNames {
					if s.topics.get(name) == nil {
						s.unknownTopic(c.clientID, c.host, name, "consumer-group-heartbeat")
					}
				}
			}
			s.step(c, sl, req.Group, true, now)
			s.m.hbConsumer.Observe(time.Since(now).Seconds())
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
		},
	})
}
