package server

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// ListGroups: v0-5.
//
// Lists every group, sorted by name, with its protocol type, state (v4+)
// and type (v5+: "classic" or "consumer"). The state (v4) and type (v5)
// filters match case-insensitively, as in Kafka. Each group is read while
// the server owns it, one at a time. A node of an HA set that does not lead
// lists no group.
//
// Authorization, as Kafka's: a client that may DESCRIBE the cluster sees
// every group; any other sees the groups it may DESCRIBE.

func init() {
	register(api{
		key: 16, min: 0, max: 5,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			c.respond(sl, s.handleListGroups(c, sl.req.(*kmsg.ListGroupsRequest), now))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.ListGroupsResponse).ErrorCode },
	})
}

func (s *Server) handleListGroups(c *conn, req *kmsg.ListGroupsRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	// A node that coordinates no group answers an empty list, like a
	// Kafka broker: kadm asks every node and merges the answers.
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	all := s.visible(c, resCluster, acl.ClusterName, opDescribe)
	for _, e := range s.ledGroups(now) {
		if !all && !s.visible(c, resGroup, e.name, opDescribe) {
			continue
		}
		e.mu.Lock()
		if e.gone || e.offline || e.g.Deleted() {
			e.mu.Unlock()
			continue
		}
		lg := e.g.Listing()
		e.mu.Unlock()
		if !match(req.StatesFilter, lg.GroupState) || !match(req.TypesFilter, lg.GroupType) {
			continue
		}
		lg.Group = e.name
		resp.Groups = append(resp.Groups, lg)
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return resp
}
