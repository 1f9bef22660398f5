package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// ConsumerGroupHeartbeat: v0-1 (KIP-848).
//
// Stepped into the group's core, which computes the target assignment and
// reconciles the member towards it (coordinator/consumer_heartbeat.go). It
// may create its group, as in Kafka. It is the KIP-848 group's hot path:
// the request and response objects are the slot's own, so a steady-state
// heartbeat allocates only the strings it decodes, and its handling time is
// the heartbeat histogram's.
//
// Authorization, as Kafka's: READ on the group, else
// GROUP_AUTHORIZATION_FAILED; a heartbeat naming its subscribed topics
// needs DESCRIBE on each, else TOPIC_AUTHORIZATION_FAILED. Kafka filters a
// regex subscription's topics by the member's authorization as it
// resolves them; tenure's group core resolves regexes without knowing
// who asks, so here a heartbeat carrying a regex needs DESCRIBE on every
// topic it matches when it is sent, else TOPIC_AUTHORIZATION_FAILED: a
// topic created later that it matches is assigned without a check
// (docs/SECURITY.md).

func init() {
	register(api{
		key: 68, min: 0, max: 1,
		member:    func(req kmsg.Request) string { return req.(*kmsg.ConsumerGroupHeartbeatRequest).MemberID },
		aliasFree: true,
		request: func(sl *slot) kmsg.Request {
			sl.cghb = kmsg.ConsumerGroupHeartbeatRequest{}
			return &sl.cghb
		},
		response: func(sl *slot) kmsg.Response { return &sl.cghbResp },
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			req := sl.req.(*kmsg.ConsumerGroupHeartbeatRequest)
			if s.groupDenied(c, sl, req.Group, opRead) {
				return
			}
			if s.authz.on && (len(req.SubscribedTopicNames) > 0 || req.SubscribedTopicRegex != nil) {
				if msg := s.subscriptionDenied(c, req); msg != "" {
					resp := errorResponse(req, kerr.TopicAuthorizationFailed.Code).(*kmsg.ConsumerGroupHeartbeatResponse)
					resp.ErrorMessage = &msg
					c.respond(sl, resp)
					return
				}
			}
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

// subscriptionDenied returns why c may not subscribe as req asks, or "".
func (s *Server) subscriptionDenied(c *conn, req *kmsg.ConsumerGroupHeartbeatRequest) string {
	for _, name := range req.SubscribedTopicNames {
		if !s.authorized(c, kmsg.ConsumerGroupHeartbeat, resTopic, name, opDescribe) {
			return "The group has subscribed to topics that are not authorized."
		}
	}
	if req.SubscribedTopicRegex == nil || *req.SubscribedTopicRegex == "" {
		return ""
	}
	re, err := coordinator.CompileTopicRegex(*req.SubscribedTopicRegex)
	if err != nil {
		return "" // the core answers an invalid regex
	}
	for _, name := range s.topics.Names() {
		if re.MatchString(name) && !s.authorized(c, kmsg.ConsumerGroupHeartbeat, resTopic, name, opDescribe) {
			return "The subscription regex matches topics that are not authorized."
		}
	}
	return ""
}
