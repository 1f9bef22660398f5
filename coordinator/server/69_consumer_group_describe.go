package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// ConsumerGroupDescribe: v0-1.
//
// A KIP-848 group is described by the group core (Group.DescribeConsumer)
// while the server owns it. A group that does not exist, or a classic
// group, is GROUP_ID_NOT_FOUND, as in Kafka.
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
	e := s.groups.lookup(name)
	if e == nil {
		return failed(kerr.GroupIDNotFound.Code, "")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.failed:
		return failed(kerr.CoordinatorNotAvailable.Code, "")
	case e.gone:
		return failed(kerr.GroupIDNotFound.Code, "")
	case e.g.Type() != coordinator.Consumer:
		return failed(kerr.GroupIDNotFound.Code, "group "+name+" is not a consumer group")
	}
	dg := e.g.DescribeConsumer()
	dg.Group = name
	return dg
}
