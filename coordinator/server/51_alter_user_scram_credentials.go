package server

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// AlterUserScramCredentials: v0.
//
// Creates, replaces and deletes users' SCRAM credentials (kadm
// AlterUserSCRAMs). The client sends the salt and the salted password,
// never the password; the server keeps the salt, the iterations and the
// two keys RFC 5802 derives (scramKeys), never the salted password. One
// result per user, in request order; Kafka's checks: an empty user name,
// iterations outside 4096..16384, or an empty salt or salted password
// (or one not of the hash's size) is UNACCEPTABLE_CREDENTIAL, a mechanism
// other than SCRAM-SHA-256 and SCRAM-SHA-512 UNSUPPORTED_SASL_MECHANISM, a
// user and mechanism altered twice DUPLICATE_RESOURCE, the deletion of a
// credential that does not exist RESOURCE_NOT_FOUND. A user with any
// error has none of its changes made; the others' are written in one
// step. A credential store failure is UNKNOWN_SERVER_ERROR for the users
// it would have changed.

func init() {
	register(api{
		key: 51, min: 0, max: 0,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			// Kafka: ALTER on the cluster; every user is refused.
			if !s.authorized(c, kmsg.AlterUserSCRAMCredentials, resCluster, acl.ClusterName, opAlter) {
				c.respond(sl, errorResponse(sl.req, kerr.ClusterAuthorizationFailed.Code))
				return
			}
			c.respond(sl, s.handleAlterUserScramCredentials(c, sl.req.(*kmsg.AlterUserSCRAMCredentialsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
			resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
			seen := make(map[string]bool)
			add := func(user string) {
				if !seen[user] {
					seen[user] = true
					res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
					res.User, res.ErrorCode = user, code
					resp.Results = append(resp.Results, res)
				}
			}
			for _, d := range r.Deletions {
				add(d.Name)
			}
			for _, u := range r.Upsertions {
				add(u.Name)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results, func(r *kmsg.AlterUserSCRAMCredentialsResponseResult) int16 { return r.ErrorCode })
		},
	})
}

// userAlteration is what one request asks for one user.
type userAlteration struct {
	creds []*store.Credential
	code  int16
	msg   string
}

func (a *userAlteration) fail(code int16, msg string) {
	if a.code == 0 {
		a.code, a.msg = code, msg
	}
}

func (s *Server) handleAlterUserScramCredentials(c *conn, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	alts := make(map[string]*userAlteration)
	type change struct {
		user string
		kind int8
	}
	changed := make(map[change]bool)
	alt := func(user string, kind int8) *userAlteration {
		a := alts[user]
		if a == nil {
			a = &userAlteration{}
			alts[user] = a
			order = append(order, user)
		}
		if user == "" {
			a.fail(kerr.UnacceptableCredential.Code, "Username must not be empty")
		}
		if changed[change{user, kind}] {
			a.fail(kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		}
		changed[change{user, kind}] = true
		return a
	}

	for _, d := range req.Deletions {
		a := alt(d.Name, d.Mechanism)
		m := scramByKind(d.Mechanism)
		if m == nil {
			a.fail(kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
			continue
		}
		a.creds = append(a.creds, &store.Credential{User: d.Name, Mechanism: m.name, Deleted: true})
	}
	for _, u := range req.Upsertions {
		a := alt(u.Name, u.Mechanism)
		m := scramByKind(u.Mechanism)
		switch {
		case m == nil:
			a.fail(kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
			continue
		case u.Iterations < minScramIterations:
			a.fail(kerr.UnacceptableCredential.Code, "Too few iterations")
			continue
		case u.Iterations > maxScramIterations:
			a.fail(kerr.UnacceptableCredential.Code, "Too many iterations")
			continue
		case len(u.Salt) == 0 || len(u.SaltedPassword) != m.hash().Size():
			a.fail(kerr.UnacceptableCredential.Code, "The salt must not be empty and the salted password must be of the mechanism's hash size")
			continue
		}
		storedKey, serverKey := scramKeys(m.hash, u.SaltedPassword)
		a.creds = append(a.creds, &store.Credential{User: u.Name, Mechanism: m.name, Salt: u.Salt,
			Iterations: int(u.Iterations), StoredKey: storedKey, ServerKey: serverKey})
	}
	// The salted password authenticates as the user: drop it now.
	for i := range req.Upsertions {
		clear(req.Upsertions[i].SaltedPassword)
	}

	err := s.alterCredentials(order, alts)
	for _, user := range order {
		a := alts[user]
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, a.code
		if a.msg != "" {
			r.ErrorMessage = kmsg.StringPtr(a.msg)
		}
		if a.code == 0 && err != nil {
			r.ErrorCode, r.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr("the credential store is unavailable")
		}
		if r.ErrorCode == 0 {
			for _, cred := range a.creds {
				action := "set"
				if cred.Deleted {
					action = "deleted"
				}
				s.log.Info("user credential "+action, zap.String("user", cred.User), zap.String("mechanism", cred.Mechanism),
					zap.Int("iterations", cred.Iterations), zap.String("by", c.principal), zap.String("remote", c.addr))
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// alterCredentials writes the alterations without an error in one step,
// after checking that each deletion deletes something (a user whose
// deletion does not gets RESOURCE_NOT_FOUND and none of its changes).
func (s *Server) alterCredentials(order []string, alts map[string]*userAlteration) error {
	if s.creds.cs == nil {
		for _, a := range alts {
			a.fail(kerr.UnknownServerError.Code, "no credential store")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
	defer cancel()
	var all []*store.Credential
	for _, user := range order {
		a := alts[user]
		if a.code != 0 {
			continue
		}
		for _, cred := range a.creds {
			if !cred.Deleted {
				continue
			}
			_, err := s.creds.cs.Credential(ctx, cred.User, cred.Mechanism)
			switch {
			case errors.Is(err, store.ErrNoCredential):
				a.fail(kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			case err != nil:
				s.log.Error("altering user credentials: the credential store failed", zap.Error(err))
				return err
			}
		}
		if a.code == 0 {
			all = append(all, a.creds...)
		}
	}
	if err := s.creds.cs.AlterCredentials(ctx, all); err != nil {
		s.log.Error("altering user credentials: the credential store failed", zap.Error(err))
		return err
	}
	return nil
}
