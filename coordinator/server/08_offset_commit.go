package server

import (
	"time"

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

func init() {
	register(api{
		key: 8, min: 0, max: 9,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			req := sl.req.(*kmsg.OffsetCommitRequest)
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
			for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						return p.ErrorCode
					}
				}
			}
			return 0
		},
	})
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
