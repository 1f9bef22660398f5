package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0.
//
// Stepped into the group's core, which applies Kafka's rules on whose
// offsets may be deleted (coordinator/offsets_delete.go); it never creates
// a group.
//
// Authorization, as Kafka's: DELETE on the group, else
// GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its
// partitions are TOPIC_AUTHORIZATION_FAILED and only the others' offsets
// are deleted (the refused topics are taken out of the request and
// their answers merged into the group's, slot.merge).

func init() {
	register(api{
		key: 47, min: 0, max: 0,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			req := sl.req.(*kmsg.OffsetDeleteRequest)
			if s.groupDenied(c, sl, req.Group, opDelete) {
				return
			}
			if s.authz.on {
				s.authorizeOffsetDelete(c, sl, req)
			}
			s.step(c, sl, req.Group, false, now)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.OffsetDeleteResponse).ErrorCode },
	})
}

// authorizeOffsetDelete takes the topics c may not read out of req and
// has their refusals merged into the response.
func (s *Server) authorizeOffsetDelete(c *conn, sl *slot, req *kmsg.OffsetDeleteRequest) {
	var kept []kmsg.OffsetDeleteRequestTopic
	var refused []kmsg.OffsetDeleteResponseTopic
	for _, rt := range req.Topics {
		if s.authorized(c, kmsg.OffsetDelete, resTopic, rt.Topic, opRead) {
			kept = append(kept, rt)
			continue
		}
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		refused = append(refused, st)
	}
	if refused == nil {
		return
	}
	req.Topics = kept
	sl.merge = func(resp kmsg.Response) {
		r := resp.(*kmsg.OffsetDeleteResponse)
		if r.ErrorCode == 0 {
			r.Topics = append(r.Topics, refused...)
		}
	}
}
