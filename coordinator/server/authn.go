package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// A connection authenticates once, before anything else:
//
//   - PLAINTEXT: at accept, as AnonymousPrincipal, or as the listener's
//     Principal;
//   - SSL: when its TLS handshake completes, as the subject of its
//     verified client certificate (certPrincipal), or AnonymousPrincipal
//     without one;
//   - SASL_PLAINTEXT and SASL_SSL: when SaslAuthenticate succeeds
//     (17_sasl_handshake.go, 36_sasl_authenticate.go), as "User:" and the
//     SASL user name.
//
// Until then it may send ApiVersions, SaslHandshake and SaslAuthenticate
// only, each frame at most MaxAuthFrameSize bytes; anything else closes
// it, as Kafka does. A connection that has not authenticated AuthTimeout
// after it was accepted (its TLS handshake included) is closed. A failed
// SASL authentication is answered after AuthFailureDelay and closes the
// connection.

// authState is a connection's authentication. The reader owns it, except
// done and expired, which the timer reads and writes under c.mu (the
// reader writes them under c.mu too, and may read them without it).
type authState struct {
	done    bool        // authenticated
	expired bool        // the timer closed the connection first
	timer   *time.Timer // AuthTimeout after accept; nil for PLAINTEXT

	// mechanism is what SaslHandshake chose: a key of mechanisms, or ""
	// before the handshake.
	mechanism string
	// raw: the handshake was v0, so the exchange comes as raw SASL
	// tokens, not SaslAuthenticate requests (sasl_raw.go).
	raw   bool
	scram *scramExchange // the SCRAM exchange under way
	// fail, once set by a SASL handler, closes the connection after the
	// handler's response is written.
	fail error
}

// Reasons an authentication closes a connection (tenure_connections_closed_total).
const (
	closeAuth        = "authentication"
	closeAuthTimeout = "authentication_timeout"
	closeTLS         = "tls_handshake"
)

var (
	// errAuthClose is wrapped by the errors that close a connection for
	// its authentication: a request before it, a failed SASL exchange.
	errAuthClose   = errors.New("server: authentication")
	errAuthTimeout = errors.New("server: not authenticated within the authentication timeout")
)

// preAuthKey reports whether a connection may send key before it has
// authenticated (api.preAuth).
func preAuthKey(key int16) bool { return key >= 0 && int(key) <= maxKey && apis[key].preAuth }

// startAuth authenticates a PLAINTEXT connection at once, and arms the
// authentication timer of the others; a TLS connection's handshake runs
// here, bounded by the timer's deadline. A non-empty reason closes the
// connection.
func (c *conn) startAuth() (reason string, err error) {
	if c.ln.Protocol == Plaintext {
		if c.ln.Principal != "" {
			c.principal = c.ln.Principal
		}
		c.auth.done = true
		return "", nil
	}
	timeout := c.s.cfg.AuthTimeout
	c.mu.Lock()
	c.auth.timer = time.AfterFunc(timeout, c.authExpired)
	c.mu.Unlock()
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return "", nil
	}
	c.raw.SetDeadline(time.Now().Add(timeout))
	err = tc.Handshake()
	c.raw.SetDeadline(time.Time{})
	var ne net.Error
	switch {
	case c.isStopping():
		return closeShutdown, nil
	case c.authTimedOut(), errors.As(err, &ne) && ne.Timeout():
		return closeAuthTimeout, errAuthTimeout
	case errors.Is(err, io.EOF):
		// Closed before a byte: a peer's probe (view.go) or a port
		// scan, not a client that failed its handshake.
		return closeEOF, nil
	case err != nil:
		return closeTLS, err
	}
	if c.ln.Protocol == SSL {
		principal := AnonymousPrincipal
		if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
			principal = certPrincipal(chains[0][0])
		}
		if !c.authenticated(principal, "TLS") {
			return closeAuthTimeout, errAuthTimeout
		}
	}
	return "", nil
}

// authenticated makes the connection act as principal from now on. It
// reports false, and changes nothing, if the authentication timer closed
// the connection first: an exchange that ends after the timeout, however
// well, neither authenticates nor is logged as authenticating.
func (c *conn) authenticated(principal, via string) bool {
	c.mu.Lock()
	if c.auth.expired {
		c.mu.Unlock()
		return false
	}
	c.principal = principal
	c.auth.done = true
	if c.auth.timer != nil {
		c.auth.timer.Stop()
		c.auth.timer = nil
	}
	c.mu.Unlock()
	c.auth.scram = nil
	c.s.log.Debug("authenticated", zap.String("remote", c.addr), zap.String("listener", c.ln.Name),
		zap.String("principal", principal), zap.String("via", via))
	return true
}

// authExpired is the authentication timer: unless the connection
// authenticated meanwhile, it closes the socket, and the reader, failing,
// finishes the connection.
func (c *conn) authExpired() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.auth.done || c.closed {
		return
	}
	c.auth.expired = true
	c.auth.timer = nil
	c.raw.Close()
}

// authTimedOut reports whether the authentication timer closed the
// connection.
func (c *conn) authTimedOut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.auth.expired
}

// stopAuthTimer stops the timer of a connection that is closing.
func (c *conn) stopAuthTimer() {
	c.mu.Lock()
	if c.auth.timer != nil {
		c.auth.timer.Stop()
		c.auth.timer = nil
	}
	c.mu.Unlock()
}

// frameLimit is the largest frame the connection may send now.
func (c *conn) frameLimit() int32 {
	if c.auth.done {
		return c.s.cfg.MaxFrameSize
	}
	return min(c.s.cfg.MaxFrameSize, c.s.cfg.MaxAuthFrameSize)
}

// admit lets a request of key through the authentication gate: anything
// once the connection authenticated, before that only ApiVersions,
// SaslHandshake and SaslAuthenticate. Its error closes the connection.
func (c *conn) admit(key int16) error {
	if c.auth.done || preAuthKey(key) {
		return nil
	}
	c.s.m.authentications.WithLabelValues("none", "refused").Inc()
	return fmt.Errorf("%w: %s before authenticating on %s listener %s", errAuthClose, kmsg.NameForKey(key), c.ln.Protocol, c.ln.Name)
}

// afterAuthRequest returns the error that closes the connection after a
// SASL request failed; its response goes out first.
func (c *conn) afterAuthRequest() error {
	if err := c.auth.fail; err != nil {
		return fmt.Errorf("%w: %w", errAuthClose, err)
	}
	return nil
}

// closeReason is the close reason of an error handling a frame.
func closeReason(err error) string {
	switch {
	case errors.Is(err, errAuthTimeout):
		return closeAuthTimeout
	case errors.Is(err, errAuthClose):
		return closeAuth
	}
	return closeProtocol
}
