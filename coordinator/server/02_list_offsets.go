package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v0-7.
//
// Topics hold no records, so every offset asked for (earliest, latest, max
// timestamp, or by timestamp) is 0, and a consumer without a committed
// offset starts cleanly at 0. Leader epochs are -1: the server does not
// serve OffsetForLeaderEpoch, so clients skip epoch validation. A partition
// that does not exist is UNKNOWN_TOPIC_OR_PARTITION.
//
// Authorization: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED
// for its partitions.

func init() {
	register(api{
		key: 2, min: 0, max: 7,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleListOffsets(c, sl.req.(*kmsg.ListOffsetsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, rt := range req.(*kmsg.ListOffsetsRequest).Topics {
				st := kmsg.NewListOffsetsResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewListOffsetsResponseTopicPartition()
					sp.Partition = rp.Partition
					sp.ErrorCode = code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.ListOffsetsResponse).Topics, func(t *kmsg.ListOffsetsResponseTopic) int16 {
				return firstCode(t.Partitions, func(p *kmsg.ListOffsetsResponseTopicPartition) int16 { return p.ErrorCode })
			})
		},
	})
}

func (s *Server) handleListOffsets(c *conn, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t := s.topics.get(rt.Topic)
		allowed := s.authorized(c, kmsg.ListOffsets, resTopic, rt.Topic, opDescribe)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch = -1
			switch {
			case !allowed:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || rp.Partition < 0 || rp.Partition >= t.partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case req.Version == 0:
				sp.OldStyleOffsets = []int64{0}
			default:
				sp.Offset = 0
				sp.Timestamp = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
