package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-9.
//
// Stepped into the group's core, which checks the committer against Kafka's
// rules for the group's protocol and then every partition against its
// owner and fencing token (coordinator/offsets.go); an accepted commit is
// persisted before its answer. A commit may create its group, as in Kafka
// (an admin or a consumer outside group management commits to a group
// nobody joined). Consumer-protocol groups need v9, which carries the
// member epoch.
//
// Authorization, as Kafka's: READ on the group, else every partition is
// GROUP_AUTHORIZATION_FAILED and nothing is committed; then READ on each
// topic, else its partitions are TOPIC_AUTHORIZATION_FAILED while the
// other topics' commits go ahead (the refused topics are taken out of the
// request and their answers merged into the group's, slot.merge). A
// commit none of whose topics may be read does not reach the group.

func init() {
	register(api{
		key: 8, min: 0, max: 9,
		member:    func(req kmsg.Request) string { return req.(*kmsg.OffsetCommitRequest).MemberID },
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			req := sl.req.(*kmsg.OffsetCommitRequest)
			if s.authz.on && !s.authorizeCommit(c, sl, req) {
				return
			}
			if s.cfg.Cluster != nil {
				names, ids := make([]string, 0, len(req.Topics)), make([][16]byte, 0, len(req.Topics))
				for _, t := range req.Topics {
					if req.Version >= 10 {
						ids = append(ids, t.TopicID)
					} else {
						names = append(names, t.Topic)
					}
				}
				if s.knowTopics(names, ids) {
					now = time.Now()
				}
			}
			s.step(c, sl, req.Group, true, now)
		},
		errorResponse: offsetCommitErrorResponse,
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.OffsetCommitResponse).Topics, func(t *kmsg.OffsetCommitResponseTopic) int16 {
				return firstCode(t.Partitions, func(p *kmsg.OffsetCommitResponseTopicPartition) int16 { return p.ErrorCode })
			})
		},
	})
}

// authorizeCommit applies the commit's authorization: it answers the
// request and reports false if nothing of it may go to the group, and
// otherwise takes the topics the client may not read out of req and has
// their refusals merged into the response.
func (s *Server) authorizeCommit(c *conn, sl *slot, req *kmsg.OffsetCommitRequest) bool {
	if !s.authorized(c, kmsg.OffsetCommit, resGroup, req.Group, opRead) {
		c.respond(sl, offsetCommitErrorResponse(req, kerr.GroupAuthorizationFailed.Code))
		return false
	}
	var kept []kmsg.OffsetCommitRequestTopic
	var refused []kmsg.OffsetCommitResponseTopic
	for i, rt := range req.Topics {
		if s.authorized(c, kmsg.OffsetCommit, resTopic, rt.Topic, opRead) {
			if refused != nil {
				kept = append(kept, rt)
			}
			continue
		}
		if refused == nil {
			kept = append(kept, req.Topics[:i]...)
		}
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		refused = append(refused, st)
	}
	if refused == nil {
		return true
	}
	if len(kept) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = refused
		c.respond(sl, resp)
		return false
	}
	req.Topics = kept
	sl.merge = func(resp kmsg.Response) {
		r := resp.(*kmsg.OffsetCommitResponse)
		r.Topics = append(r.Topics, refused...)
	}
	return true
}

// offsetCommitErrorResponse refuses every partition of req with code:
// OffsetCommit has no top-level error.
func offsetCommitErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.(*kmsg.OffsetCommitRequest).Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
