package server

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v0-1.
//
// Chooses the SASL mechanism of a SASL listener's connection, among
// Config.SASLMechanisms, which the response lists. After v1, SaslAuthenticate
// requests carry the exchange that follows (36_sasl_authenticate.go).
// After v0, which librdkafka 2.0 (kcat) and kafka-python 2.0 send, the
// exchange follows as raw SASL tokens, each a frame of its own (a 4-byte
// length and the token, no request header), answered the same way
// (sasl_raw.go); Kafka 4 dropped v0 (KIP-896), but the clients in Debian
// still speak it. A mechanism not offered is UNSUPPORTED_SASL_MECHANISM
// and closes the connection, as a second handshake does
// (ILLEGAL_SASL_STATE). On a listener without SASL, or once the
// connection has authenticated, it is ILLEGAL_SASL_STATE and the
// connection stays, as Kafka answers there (no re-authentication,
// KIP-368).

func init() {
	register(api{
		key: 17, min: 0, max: 1,
		preAuth:   true,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleSaslHandshake(c, sl.req.(*kmsg.SASLHandshakeRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.SASLHandshakeResponse).ErrorCode },
	})
}

func (s *Server) handleSaslHandshake(c *conn, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if !c.ln.Protocol.SASL() || c.auth.done {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	}
	resp.SupportedMechanisms = s.cfg.SASLMechanisms
	if c.auth.mechanism != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.auth.fail = fmt.Errorf("a second SaslHandshake (%s after %s)", req.Mechanism, c.auth.mechanism)
		return resp
	}
	for _, m := range s.cfg.SASLMechanisms {
		if m == req.Mechanism {
			c.auth.mechanism = m
			c.auth.raw = req.Version == 0
			return resp
		}
	}
	resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	c.auth.fail = fmt.Errorf("SASL mechanism %q is not offered", req.Mechanism)
	s.m.authentications.WithLabelValues("unsupported", "failed").Inc()
	return resp
}
