package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// DescribeACLs: v0-3.
//
// Lists the bindings the filter selects (acl.Filter: ANY and MATCH as in
// Kafka), grouped by resource pattern, from the bindings this node holds
// (authz.go says how soon a change made through another node reaches
// it). It needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED;
// a filter with an UNKNOWN element is INVALID_REQUEST; with authorization
// off it is SECURITY_DISABLED, as on a Kafka broker without an authorizer.
// v0 has no pattern type: it filters LITERAL bindings.

func init() {
	register(api{
		key: 29, min: 0, max: 3,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleDescribeACLs(c, sl.req.(*kmsg.DescribeACLsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.DescribeACLsResponse).ErrorCode },
	})
}

func (s *Server) handleDescribeACLs(c *conn, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp
	}
	if !s.authz.on {
		return fail(kerr.SecurityDisabled.Code, errNoAuthorizer)
	}
	if !s.authorized(c, kmsg.DescribeACLs, resCluster, acl.ClusterName, opDescribe) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "DESCRIBE on the cluster is needed to describe ACLs")
	}
	f := acl.Filter{
		ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType,
	}
	if err := f.Validate(); err != nil {
		return fail(kerr.InvalidRequest.Code, err.Error())
	}
	// The bindings are sorted by resource pattern first, so each
	// resource's are consecutive.
	for _, b := range s.authz.cur.Load().Bindings() {
		if !f.Matches(&b) {
			continue
		}
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != b.ResourceType || resp.Resources[n-1].ResourcePatternType != b.PatternType ||
			resp.Resources[n-1].ResourceName != b.ResourceName {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, r)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return resp
}
