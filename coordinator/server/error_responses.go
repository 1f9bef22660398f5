package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorResponse answers req with code in every place the response kind
// carries an error, without consulting any group. The server uses it for
// requests it refuses before a group sees them (an invalid or unknown
// group, the group limit), for replies it must not send because the store
// failed, and for requests still parked at shutdown.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
		r.Generation = -1
		r.MemberID = req.(*kmsg.JoinGroupRequest).MemberID
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.OffsetCommitResponse:
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
			r.Topics = append(r.Topics, st)
		}
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.FetchResponse:
		// A Fetch is never refused: at shutdown it gets its empty answer.
		return emptyFetch(req.(*kmsg.FetchRequest), nil)
	}
	return resp
}

// shutdownCode is the error for a group request still parked when the
// server shuts down: a retriable coordinator error, so the client looks the
// coordinator up again and retries there.
var shutdownCode = kerr.CoordinatorNotAvailable.Code
