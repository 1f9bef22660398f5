package server

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// CreateACLs: v0-3.
//
// Stores the valid creations in the ACL store, in one write, and answers
// once this node's authorizer holds them; a binding that exists already is
// kept (creation is idempotent, as in Kafka). It needs ALTER on the
// cluster, else every creation is CLUSTER_AUTHORIZATION_FAILED; an
// invalid creation (acl.Binding.Validate: ANY or MATCH types, an empty
// name, a cluster not named kafka-cluster, a principal without its type)
// is INVALID_REQUEST with the reason; a store failure KAFKA_STORAGE_ERROR
// for every valid creation, which the client may retry. With
// authorization off every creation is SECURITY_DISABLED. v0 has no pattern
// type: its bindings are LITERAL.

func init() {
	register(api{
		key: 30, min: 0, max: 3,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleCreateACLs(c, sl.req.(*kmsg.CreateACLsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
			for range req.(*kmsg.CreateACLsRequest).Creations {
				r := kmsg.NewCreateACLsResponseResult()
				r.ErrorCode = code
				resp.Results = append(resp.Results, r)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.CreateACLsResponse).Results, func(r *kmsg.CreateACLsResponseResult) int16 { return r.ErrorCode })
		},
	})
}

func (s *Server) handleCreateACLs(c *conn, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	fail := func(i int, code int16, msg string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, &msg
	}
	refused, why := s.aclChangeRefused(c, kmsg.CreateACLs, "create")
	var valid []acl.Binding
	var at []int
	for i, cr := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		if refused != 0 {
			fail(i, refused, why)
			continue
		}
		b := acl.Binding{
			ResourceType: cr.ResourceType, ResourceName: cr.ResourceName, PatternType: cr.ResourcePatternType,
			Principal: cr.Principal, Host: cr.Host, Operation: cr.Operation, Permission: cr.PermissionType,
		}
		if err := b.Validate(); err != nil {
			fail(i, kerr.InvalidRequest.Code, err.Error())
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	err := s.changeACLs(func(ctx context.Context) error { return s.authz.store.CreateACLs(ctx, valid) })
	if err != nil {
		s.log.Error("ACLs not created: the store failed", zap.Int("bindings", len(valid)), zap.Error(err))
		for _, i := range at {
			fail(i, kerr.KafkaStorageError.Code, "the ACL store failed; retry")
		}
		return resp
	}
	for _, b := range valid {
		s.log.Info("ACL created", zap.Stringer("binding", b), zap.String("by", c.principal))
	}
	return resp
}
