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

func init() {
	register(api{
		key: 69, min: 0, max: 1,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleConsumerGroupDescribe(sl.req.(*kmsg.ConsumerGroupDescribeRequest)))
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
			for _, g := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
				if g.ErrorCode != 0 {
					return g.ErrorCode
				}
			}
			return 0
		},
	})
}

func (s *Server) handleConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		resp.Groups = append(resp.Groups, s.describeConsumerGroup(name))
	}
	return resp
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
