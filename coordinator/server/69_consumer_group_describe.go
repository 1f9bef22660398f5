package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// ConsumerGroupDescribe: v0-1.
//
// A KIP-848 group is described by the group core (Group.DescribeConsumer)
// while the server owns it, once what it read is durable (withGroup). A group that does not exist, or a classic
// group, is GROUP_ID_NOT_FOUND, as in Kafka.
//
// Authorization, as Kafka 4's: DESCRIBE on each group, else
// GROUP_AUTHORIZATION_FAILED; and DESCRIBE on every topic its members
// subscribe to or are assigned, else the group is
// TOPIC_AUTHORIZATION_FAILED without its members. The group's authorized
// operations are reported when asked for.

func init() {
	register(api{
		key: 69, min: 0, max: 1,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleConsumerGroupDescribe(c, sl.req.(*kmsg.ConsumerGroupDescribeRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
			for _, name := range req.(*kmsg.ConsumerGroupDescribeRequest).Groups {
				dg := kmsg.NewConsumerGroupDescribeResponseGroup()
				dg.Group, dg.ErrorCode = name, code
				resp.Groups = append(resp.Groups, dg)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.ConsumerGroupDescribeResponse).Groups, func(g *kmsg.ConsumerGroupDescribeResponseGroup) int16 { return g.ErrorCode })
		},
	})
}

func (s *Server) handleConsumerGroupDescribe(c *conn, req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		if !s.authorized(c, kmsg.ConsumerGroupDescribe, resGroup, name, opDescribe) {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg := s.describeConsumerGroup(name)
		if dg.ErrorCode == 0 && s.authz.on && !s.groupTopicsVisible(c, &dg) {
			msg := "The described group uses topics that the client is not authorized to describe."
			dg.ErrorCode, dg.ErrorMessage, dg.Members = kerr.TopicAuthorizationFailed.Code, &msg, nil
		}
		if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			dg.AuthorizedOperations = s.authorizedOps(c, resGroup, name, groupOps)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// groupTopicsVisible reports whether c may DESCRIBE every topic dg's
// members subscribe to or are assigned.
func (s *Server) groupTopicsVisible(c *conn, dg *kmsg.ConsumerGroupDescribeResponseGroup) bool {
	for i := range dg.Members {
		m := &dg.Members[i]
		for _, t := range m.SubscribedTopics {
			if !s.authorized(c, kmsg.ConsumerGroupDescribe, resTopic, t, opDescribe) {
				return false
			}
		}
		for _, a := range [2]*kmsg.Assignment{&m.Assignment, &m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if !s.authorized(c, kmsg.ConsumerGroupDescribe, resTopic, tp.Topic, opDescribe) {
					return false
				}
			}
		}
	}
	return true
}

func (s *Server) describeConsumerGroup(name string) kmsg.ConsumerGroupDescribeResponseGroup {
	failed := func(code int16, msg string) kmsg.ConsumerGroupDescribeResponseGroup {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = name
		dg.ErrorCode = code
		if msg != "" {
			dg.ErrorMessage = &msg
		}
		return dg
	}
	var dg kmsg.ConsumerGroupDescribeResponseGroup
	consumer := false
	if code := s.withGroup(name, time.Now(), func(g *coordinator.Group) {
		if consumer = g.Type() == coordinator.Consumer; consumer {
			dg = g.DescribeConsumer()
		}
	}); code != 0 {
		return failed(code, "")
	}
	if !consumer {
		return failed(kerr.GroupIDNotFound.Code, "group "+name+" is not a consumer group")
	}
	dg.Group = name
	return dg
}
