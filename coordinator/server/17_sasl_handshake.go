package server

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v1.
//
// Chooses the SASL mechanism of a SASL listener's connection, among
// Config.SASLMechanisms, which the response lists. SaslAuthenticate
// requests carry the exchange that follows (v1; v0, where raw SASL
// tokens followed, is gone from Kafka 4 with KIP-896, and kgo and
// librdkafka use v1). A mechanism not offered is UNSUPPORTED_SASL_MECHANISM
// and closes the connection, as a second handshake does
// (ILLEGAL_SASL_STATE). On a listener without SASL, or once the
// connection has authenticated, it is ILLEGAL_SASL_STATE and the
// connection stays, as Kafka answers there (no re-authentication,
// KIP-368).

func init() {
	register(api{
		key: 17, min: 1, max: 1,
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
			return resp
		}
	}
	resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	c.auth.fail = fmt.Errorf("SASL mechanism %q is not offered", req.Mechanism)
	s.m.authentications.WithLabelValues("unsupported", "failed").Inc()
	return resp
}
