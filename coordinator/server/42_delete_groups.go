package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// DeleteGroups: v0-2.
//
// Each group is deleted by the group core (coordinator.DeleteGroup: NON_EMPTY_GROUP
// unless it has no members) while the server owns it; the deletion is
// persisted like any other change and answered once durable. The group is
// then forgotten, but for its tombstone in the store: a group re-created
// under the name continues above its epochs. A group that does not exist
// is GROUP_ID_NOT_FOUND.
//
// Authorization: DELETE on each group, else GROUP_AUTHORIZATION_FAILED.

func init() {
	register(api{
		key: 42, min: 0, max: 2,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			c.respond(sl, s.handleDeleteGroups(c, sl.req.(*kmsg.DeleteGroupsRequest), now))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
			for _, name := range req.(*kmsg.DeleteGroupsRequest).Groups {
				dg := kmsg.NewDeleteGroupsResponseGroup()
				dg.Group, dg.ErrorCode = name, code
				resp.Groups = append(resp.Groups, dg)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.DeleteGroupsResponse).Groups, func(g *kmsg.DeleteGroupsResponseGroup) int16 { return g.ErrorCode })
		},
	})
}

func (s *Server) handleDeleteGroups(c *conn, req *kmsg.DeleteGroupsRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		if !s.authorized(c, kmsg.DeleteGroups, resGroup, name, opDelete) {
			dg.ErrorCode = kerr.GroupAuthorizationFailed.Code
		} else {
			dg.ErrorCode = s.deleteGroup(name, now)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (s *Server) deleteGroup(name string, now time.Time) int16 {
	a := new(adminAnswer)
	if c := s.withGroup(name, now, func(g *coordinator.Group) { g.Step(now, coordinator.DeleteGroup{Ref: a}) }); c != 0 {
		return c
	}
	code := errorCode(a.err)
	if code == 0 {
		s.log.Info("group deleted", zap.String("group", name))
	}
	return code
}
