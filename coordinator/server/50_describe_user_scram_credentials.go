package server

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// DescribeUserScramCredentials: v0.
//
// Lists the SCRAM mechanisms and iterations of the users asked for, or of
// every user with a credential when none is named (kadm
// DescribeUserSCRAMs), as Kafka does: a user without any credential is
// RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE. Salts and
// keys are never shown. A credential store failure is
// UNKNOWN_SERVER_ERROR for the request.

func init() {
	register(api{
		key: 50, min: 0, max: 0,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			// Kafka: DESCRIBE on the cluster.
			if !s.authorized(c, kmsg.DescribeUserSCRAMCredentials, resCluster, acl.ClusterName, opDescribe) {
				c.respond(sl, errorResponse(sl.req, kerr.ClusterAuthorizationFailed.Code))
				return
			}
			c.respond(sl, s.handleDescribeUserScramCredentials(sl.req.(*kmsg.DescribeUserSCRAMCredentialsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			r := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
			return cmp.Or(r.ErrorCode, firstCode(r.Results, func(res *kmsg.DescribeUserSCRAMCredentialsResponseResult) int16 { return res.ErrorCode }))
		},
	})
}

func (s *Server) handleDescribeUserScramCredentials(req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	creds, err := s.allCredentials()
	if err != nil {
		s.log.Error("describing user credentials: the credential store failed", zap.Error(err))
		resp.ErrorCode = kerr.UnknownServerError.Code
		resp.ErrorMessage = kmsg.StringPtr("the credential store is unavailable")
		return resp
	}
	byUser := make(map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo)
	var users []string // sorted: creds are
	for _, c := range creds {
		m := mechanisms[c.Mechanism]
		if m == nil {
			continue // not a SCRAM credential
		}
		if _, ok := byUser[c.User]; !ok {
			users = append(users, c.User)
		}
		info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		info.Mechanism, info.Iterations = m.kind, int32(c.Iterations)
		byUser[c.User] = append(byUser[c.User], info)
	}
	if len(req.Users) > 0 {
		users = users[:0]
		count := make(map[string]int, len(req.Users))
		for _, u := range req.Users {
			if count[u.Name]++; count[u.Name] == 1 {
				users = append(users, u.Name)
			}
		}
		for _, u := range users {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User = u
			switch {
			case count[u] > 1:
				r.ErrorCode = kerr.DuplicateResource.Code
				r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
			case len(byUser[u]) == 0:
				r.ErrorCode = kerr.ResourceNotFound.Code
				r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
			default:
				r.CredentialInfos = byUser[u]
			}
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	for _, u := range users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.CredentialInfos = u, byUser[u]
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// allCredentials reads every credential, bounded by StoreTimeout.
func (s *Server) allCredentials() ([]*store.Credential, error) {
	if s.creds.cs == nil {
		return nil, errors.New("server: no credential store")
	}
	ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
	defer cancel()
	return s.creds.cs.Credentials(ctx)
}
