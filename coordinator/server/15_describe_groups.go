package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// DescribeGroups: v0-5.
//
// Each group is described by the group core (Group.DescribeClassic) while
// the server owns it, once what it read is durable (withGroup). A group that does not exist is reported in state
// Dead, as Kafka does; so is a KIP-848 group (which ConsumerGroupDescribe
// describes), for which the core answers GROUP_ID_NOT_FOUND, a code Kafka
// only returns from v6, so it is dropped here.
//
// Authorization: DESCRIBE on each group, else it is
// GROUP_AUTHORIZATION_FAILED with no state. The group's authorized
// operations (v3+) are reported when asked for.

func init() {
	register(api{
		key: 15, min: 0, max: 5,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleDescribeGroups(c, sl.req.(*kmsg.DescribeGroupsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
			for _, name := range req.(*kmsg.DescribeGroupsRequest).Groups {
				dg := kmsg.NewDescribeGroupsResponseGroup()
				dg.Group, dg.ErrorCode = name, code
				resp.Groups = append(resp.Groups, dg)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.DescribeGroupsResponse).Groups, func(g *kmsg.DescribeGroupsResponseGroup) int16 { return g.ErrorCode })
		},
	})
}

func (s *Server) handleDescribeGroups(c *conn, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		if !s.authorized(c, kmsg.DescribeGroups, resGroup, name, opDescribe) {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg := s.describeGroup(name)
		if req.Version < 6 && dg.ErrorCode == kerr.GroupIDNotFound.Code {
			dg.ErrorCode, dg.ErrorMessage = 0, nil
		}
		if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			dg.AuthorizedOperations = s.authorizedOps(c, resGroup, name, groupOps)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (s *Server) describeGroup(name string) kmsg.DescribeGroupsResponseGroup {
	dead := func(code int16) kmsg.DescribeGroupsResponseGroup {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = name
		dg.State = "Dead"
		dg.ErrorCode = code
		return dg
	}
	var dg kmsg.DescribeGroupsResponseGroup
	if code := s.withGroup(name, time.Now(), func(g *coordinator.Group) { dg = g.DescribeClassic() }); code != 0 {
		return dead(code)
	}
	dg.Group = name
	return dg
}
