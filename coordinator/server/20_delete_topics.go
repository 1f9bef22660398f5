package server

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6.
//
// Deletes topics by name (v0-5) or by name or ID (v6). A deletion is done
// when it is answered: the topic is gone from Metadata, every group's
// committed offsets of it are deleted, durably, and KIP-848 groups have
// revoked its partitions at a new epoch (topics_delete.go has the order
// and what a failure leaves). A topic created again under the name is a
// new topic, with a new ID.
//
// As in Kafka, a deletion goes to the controller, which in an HA set is
// the leader (Metadata names it): another node answers every topic
// NOT_CONTROLLER, which kgo and the Java client retry on the controller.
// Unlike CreateTopics, which any node serves, a deletion needs the groups,
// which only the leader holds.
//
// Per topic: an unknown name is UNKNOWN_TOPIC_OR_PARTITION (an empty name
// included), an unknown ID UNKNOWN_TOPIC_ID, a name and an ID together, or
// neither, INVALID_REQUEST; a topic named more than once (by name, by ID,
// or both) is INVALID_REQUEST for each way it was named, and is not
// deleted. Store failures are KAFKA_STORAGE_ERROR, retriable. Each distinct
// name or ID is answered once, in request order. TimeoutMillis is ignored:
// a deletion is answered when it is done, within the store timeout.
//
// Authorization, as Kafka's: DELETE on each topic, else
// TOPIC_AUTHORIZATION_FAILED; a topic named by ID also needs DESCRIBE,
// without which its name is not revealed.

func init() {
	register(api{
		key: 20, min: 0, max: 6,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			c.respond(sl, s.handleDeleteTopics(c, sl.req.(*kmsg.DeleteTopicsRequest), now))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
			for _, rt := range deleteTopicsRequested(req.(*kmsg.DeleteTopicsRequest)) {
				st := kmsg.NewDeleteTopicsResponseTopic()
				st.Topic, st.TopicID, st.ErrorCode = rt.Topic, rt.TopicID, code
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.DeleteTopicsResponse).Topics, func(t *kmsg.DeleteTopicsResponseTopic) int16 { return t.ErrorCode })
		},
	})
}

// deleteTopicsRequested returns the topics a request names, v0-5's names
// as v6's entries.
func deleteTopicsRequested(req *kmsg.DeleteTopicsRequest) []kmsg.DeleteTopicsRequestTopic {
	if req.Version >= 6 {
		return req.Topics
	}
	out := make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
	for i := range req.TopicNames {
		out[i].Topic = &req.TopicNames[i]
	}
	return out
}

func (s *Server) handleDeleteTopics(c *conn, req *kmsg.DeleteTopicsRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	requested := deleteTopicsRequested(req)
	if s.cfg.Cluster != nil {
		if s.controllerTerm(now) == nil {
			return errorResponse(req, kerr.NotController.Code)
		}
		// Another node of the HA set may have just created a topic
		// asked for: look it up before calling it unknown.
		var names []string
		var ids [][16]byte
		for _, rt := range requested {
			switch {
			case rt.Topic != nil:
				names = append(names, *rt.Topic)
			case rt.TopicID != [16]byte{}:
				ids = append(ids, rt.TopicID)
			}
		}
		s.knowTopics(names, ids)
	}

	fail := func(st *kmsg.DeleteTopicsResponseTopic, code int16, msg string) {
		st.ErrorCode = code
		if req.Version >= 5 && msg != "" {
			st.ErrorMessage = &msg
		}
	}
	// answers[i] answers the i-th distinct name or ID; of[i] is the
	// topic it names, if it exists.
	var answers []kmsg.DeleteTopicsResponseTopic
	var of []*topic
	seen := make(map[string]int)    // distinct request key -> answer
	named := make(map[*topic][]int) // topic -> the answers naming it
	for _, rt := range requested {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var key string
		switch {
		case rt.Topic != nil && rt.TopicID != [16]byte{}:
			fail(&st, kerr.InvalidRequest.Code, "give the topic's name or its ID, not both")
		case rt.Topic == nil && rt.TopicID == [16]byte{}:
			fail(&st, kerr.InvalidRequest.Code, "give the topic's name or its ID")
		case rt.Topic != nil:
			key = "n" + *rt.Topic
		default:
			key = "i" + string(rt.TopicID[:])
		}
		if key != "" {
			if i, dup := seen[key]; dup {
				fail(&answers[i], kerr.InvalidRequest.Code, "the topic is named more than once")
				continue
			}
			seen[key] = len(answers)
		}
		var t *topic
		switch {
		case st.ErrorCode != 0:
		case rt.Topic != nil:
			if !s.authorized(c, kmsg.DeleteTopics, resTopic, *rt.Topic, opDelete) {
				fail(&st, kerr.TopicAuthorizationFailed.Code, "")
			} else if t = s.topics.get(*rt.Topic); t == nil {
				fail(&st, kerr.UnknownTopicOrPartition.Code, "")
			}
		default:
			if t = s.topics.getID(rt.TopicID); t == nil {
				fail(&st, kerr.UnknownTopicID.Code, "")
			} else if !s.authorized(c, kmsg.DeleteTopics, resTopic, t.name, opDescribe) {
				t = nil
				fail(&st, kerr.TopicAuthorizationFailed.Code, "")
			} else if !s.authorized(c, kmsg.DeleteTopics, resTopic, t.name, opDelete) {
				if req.Version >= 6 {
					name := t.name
					st.Topic = &name
				}
				t = nil
				fail(&st, kerr.TopicAuthorizationFailed.Code, "")
			}
		}
		if t != nil {
			if req.Version >= 6 {
				name := t.name
				st.Topic, st.TopicID = &name, t.id
			}
			named[t] = append(named[t], len(answers))
		}
		answers = append(answers, st)
		of = append(of, t)
	}

	var del []*topic
	for i, t := range of {
		switch {
		case t == nil || answers[i].ErrorCode != 0:
		case len(named[t]) > 1:
			for _, j := range named[t] {
				fail(&answers[j], kerr.InvalidRequest.Code, "the topic is named more than once")
			}
		default:
			del = append(del, t)
		}
	}
	if len(del) > 0 {
		errs, restored := s.deleteTopics(del)
		for _, t := range del {
			i := named[t][0]
			err := errs[0]
			errs = errs[1:]
			if err != nil {
				code, msg := deleteTopicCode(err)
				fail(&answers[i], code, msg)
			}
		}
		if restored {
			s.topicsChanged(time.Now())
		}
	}
	resp.Topics = answers
	return resp
}

// deleteTopicCode is the Kafka code and message of a deletion's error.
func deleteTopicCode(err error) (int16, string) {
	switch {
	case errors.Is(err, errNotController):
		return kerr.NotController.Code, "this node no longer leads the HA set"
	case errors.Is(err, errTopicUnknown):
		return kerr.UnknownTopicOrPartition.Code, ""
	case errors.Is(err, errTopicGroups):
		return kerr.KafkaStorageError.Code, "the deletion of the topic's offsets could not be stored; the topic is kept"
	case errors.Is(err, errTopicStore):
		return kerr.KafkaStorageError.Code, "the topic could not be deleted from the store; its offsets are deleted"
	}
	return kerr.UnknownServerError.Code, ""
}
