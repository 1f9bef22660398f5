package server

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// CreateTopics: v0-7.
//
// Creates virtual topics. The partition count is the request's, or
// DefaultPartitions for -1 (v4+), or the length of a manual replica
// assignment; it is fixed for the topic's life. More than MaxPartitions
// is INVALID_PARTITIONS, a creation beyond MaxTopics POLICY_VIOLATION, an
// existing topic TOPIC_ALREADY_EXISTS, a name listed twice INVALID_REQUEST,
// a replication factor of 0 or below -1 INVALID_REPLICATION_FACTOR. Any
// other replication factor is accepted and reported as 1: topics are
// virtual and hold no data to replicate. Configs are ignored. ValidateOnly
// checks without creating. Existing groups learn of new topics at once.
//
// Authorization, as Kafka's: CREATE on the cluster allows every topic;
// without it each topic needs CREATE on itself, else it is
// TOPIC_AUTHORIZATION_FAILED (after the check for names listed twice).

func init() {
	register(api{
		key: 19, min: 0, max: 7,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			c.respond(sl, s.handleCreateTopics(c, sl.req.(*kmsg.CreateTopicsRequest), now))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
			for _, rt := range req.(*kmsg.CreateTopicsRequest).Topics {
				st := kmsg.NewCreateTopicsResponseTopic()
				st.Topic, st.ErrorCode = rt.Topic, code
				st.NumPartitions, st.ReplicationFactor = -1, -1
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.CreateTopicsResponse).Topics, func(t *kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode })
		},
	})
}

func (s *Server) handleCreateTopics(c *conn, req *kmsg.CreateTopicsRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	created := false
	createAll := s.visible(c, resCluster, acl.ClusterName, opCreate)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 1 && msg != "" {
				st.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, st)
		}
		partitions := rt.NumPartitions
		if len(rt.ReplicaAssignment) > 0 {
			if partitions != -1 {
				fail(kerr.InvalidRequest.Code, "both the partition count and a replica assignment are given")
				continue
			}
			partitions = int32(len(rt.ReplicaAssignment))
		}
		if partitions == -1 {
			partitions = s.cfg.DefaultPartitions
		}
		switch {
		case count[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "topic listed more than once")
			continue
		case !createAll && !s.authorized(c, kmsg.CreateTopics, resTopic, rt.Topic, opCreate):
			fail(kerr.TopicAuthorizationFailed.Code, "Authorization failed.")
			continue
		case rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1:
			fail(kerr.InvalidReplicationFactor.Code, "replication factor must be positive or -1")
			continue
		}
		var err error
		var t *topic
		if req.ValidateOnly {
			err = s.topics.validate(rt.Topic, partitions)
		} else {
			t, err = s.createTopic(rt.Topic, partitions, "create-topics")
		}
		if err != nil {
			fail(topicCode(err), topicMessage(err, partitions, s.cfg.MaxPartitions, s.cfg.MaxTopics))
			continue
		}
		created = created || t != nil
		if t != nil {
			st.TopicID = t.id
		}
		st.NumPartitions, st.ReplicationFactor = partitions, 1
		resp.Topics = append(resp.Topics, st)
	}
	if created {
		s.topicsChanged(now)
	}
	return resp
}

func topicMessage(err error, partitions, maxPartitions int32, maxTopics int) string {
	switch err {
	case errTopicName:
		return "topic names are 1 to 249 characters of [a-zA-Z0-9._-], and neither . nor .."
	case errTopicExists:
		return "topic already exists"
	case errTopicLimit:
		return "the server holds its limit of " + strconv.Itoa(maxTopics) + " topics"
	case errPartitions:
		return "partition count " + strconv.Itoa(int(partitions)) + " must be positive or -1"
	case errPartitionsMax:
		return "partition count " + strconv.Itoa(int(partitions)) + " is above the limit of " + strconv.Itoa(int(maxPartitions))
	}
	return ""
}
