package server

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// DeleteACLs: v0-3.
//
// Deletes, in the ACL store, every binding one of the filters selects
// (acl.Filter), and answers each filter with the bindings it matched, once
// this node's authorizer no longer holds them. It needs ALTER on the
// cluster, else every filter is CLUSTER_AUTHORIZATION_FAILED; a filter
// with an UNKNOWN element is INVALID_REQUEST; a store failure
// KAFKA_STORAGE_ERROR for every valid filter. With authorization off every
// filter is SECURITY_DISABLED. v0 has no pattern type: its filters select
// LITERAL bindings.

func init() {
	register(api{
		key: 31, min: 0, max: 3,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleDeleteACLs(c, sl.req.(*kmsg.DeleteACLsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
			for range req.(*kmsg.DeleteACLsRequest).Filters {
				r := kmsg.NewDeleteACLsResponseResult()
				r.ErrorCode = code
				resp.Results = append(resp.Results, r)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.DeleteACLsResponse).Results, func(r *kmsg.DeleteACLsResponseResult) int16 { return r.ErrorCode })
		},
	})
}

func (s *Server) handleDeleteACLs(c *conn, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	fail := func(i int, code int16, msg string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, &msg
	}
	refused, why := s.aclChangeRefused(c, kmsg.DeleteACLs, "delete")
	var valid []acl.Filter
	var at []int
	for i, rf := range req.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		if refused != 0 {
			fail(i, refused, why)
			continue
		}
		f := acl.Filter{
			ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType,
		}
		if err := f.Validate(); err != nil {
			fail(i, kerr.InvalidRequest.Code, err.Error())
			continue
		}
		valid = append(valid, f)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	var matched [][]acl.Binding
	err := s.changeACLs(func(ctx context.Context) (err error) {
		matched, err = s.authz.store.DeleteACLs(ctx, valid)
		return err
	})
	if err != nil {
		s.log.Error("ACLs not deleted: the store failed", zap.Int("filters", len(valid)), zap.Error(err))
		for _, i := range at {
			fail(i, kerr.KafkaStorageError.Code, "the ACL store failed; retry")
		}
		return resp
	}
	for j, i := range at {
		for _, b := range matched[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			s.log.Info("ACL deleted", zap.Stringer("binding", b), zap.String("by", c.principal))
		}
	}
	return resp
}
