package server

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// SaslAuthenticate: v0-2.
//
// Carries the SASL exchange of the mechanism SaslHandshake chose: PLAIN in
// one message (checked against the user's stored SCRAM credential),
// SCRAM-SHA-256 and SCRAM-SHA-512 in two (xdg-go/scram's server
// conversation on the stored credential). Success makes the connection
// act as "User:<name>"; no session lifetime is given (v1+), so clients
// never re-authenticate. A failure is SASL_AUTHENTICATION_FAILED with
// Kafka's message, sent after AuthFailureDelay, and closes the connection;
// an unknown user fails exactly as a wrong password does. Before the
// handshake it is ILLEGAL_SASL_STATE and closes the connection; on a
// listener without SASL, or once authenticated, it is ILLEGAL_SASL_STATE
// and the connection stays.

func init() {
	register(api{
		key: 36, min: 0, max: 2,
		preAuth: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleSaslAuthenticate(c, sl.req.(*kmsg.SASLAuthenticateRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.SASLAuthenticateResponse).ErrorCode },
	})
}

func (s *Server) handleSaslAuthenticate(c *conn, req *kmsg.SASLAuthenticateRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	switch {
	case !c.ln.Protocol.SASL() || c.auth.done:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	case c.auth.mechanism == "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.auth.fail = errors.New("SaslAuthenticate before SaslHandshake")
		return resp
	}
	mech := c.auth.mechanism
	reply, user, err := s.saslStep(c, mech, req.SASLAuthBytes)
	switch {
	case err != nil:
		var ae authError
		if !errors.As(err, &ae) {
			ae = errAuthFailed
		}
		msg := string(ae)
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		c.auth.fail = err
		s.m.authentications.WithLabelValues(mech, "failed").Inc()
		fields := []zap.Field{zap.String("remote", c.addr), zap.String("listener", c.ln.Name), zap.String("mechanism", mech), zap.Error(err)}
		if errors.Is(err, errCredentialStore) {
			s.log.Error("authentication failed: the credential store failed", fields...)
		} else {
			s.log.Info("authentication failed", fields...)
		}
		if d := s.cfg.AuthFailureDelay; d > 0 {
			time.Sleep(d)
		}
	case user != "":
		if !c.authenticated("User:"+user, mech) {
			// The timer closed the connection while the exchange ran;
			// the response goes nowhere, the close counts as a timeout.
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			c.auth.fail = errAuthTimeout
			break
		}
		resp.SASLAuthBytes = reply
		s.m.authentications.WithLabelValues(mech, "ok").Inc()
	default:
		resp.SASLAuthBytes = reply
	}
	return resp
}

// saslStep runs one step of the connection's SASL exchange: user is set
// when the client authenticated, err when the exchange failed.
func (s *Server) saslStep(c *conn, mech string, msg []byte) (reply []byte, user string, err error) {
	ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
	defer cancel()
	if mech == Plain {
		name, password, err := parsePlain(msg)
		if err != nil {
			return nil, "", err
		}
		ok, err := s.creds.verifyPlain(ctx, name, password)
		switch {
		case err != nil:
			return nil, "", errors.Join(errCredentialStore, err)
		case !ok:
			return nil, "", errAuthFailed
		}
		return nil, name, nil
	}
	if c.auth.scram == nil {
		c.auth.scram = s.creds.newScramExchange(mechanisms[mech])
	}
	reply, done, user, err := c.auth.scram.Step(ctx, msg)
	if done {
		c.auth.scram = nil
	}
	return reply, user, err
}
