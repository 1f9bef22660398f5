package server

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	xscram "github.com/xdg-go/scram"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// attackEnv is a server with a SASL_PLAINTEXT listener (SASL) and an mTLS
// one (MTLS), user alice (password "right", every SCRAM mechanism), and a
// short authentication timeout.
type attackEnv struct {
	ts      *testServer
	tt      *testTLS
	clients *testCA
	logs    *observer.ObservedLogs
}

// attackAuthTimeout is short, for the slow clients' cases, yet long
// enough for the legitimate clients each case runs (a PLAIN or SCRAM check
// of 4096 PBKDF2 rounds, an mTLS handshake) on a loaded machine under
// -race: their time counts from the accept, and a stall past it closes
// them for real.
const attackAuthTimeout = 2 * time.Second

func newAttackEnv(t *testing.T) *attackEnv {
	tt := newTestTLS(t)
	clients := newTestCA(t, "clients")
	ts, logs := observed(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "SASL", Protocol: SASLPlaintext}, {Name: "MTLS", Protocol: SSL}}
		c.TLS = tt.serverConfig(clients)
		c.SASLMechanisms = []string{Plain, ScramSHA256, ScramSHA512}
		c.AuthTimeout = attackAuthTimeout
		c.AuthFailureDelay = 10 * time.Millisecond
		c.MaxAuthFrameSize = 16 << 10
	})
	for _, m := range []string{ScramSHA256, ScramSHA512} {
		addUser(t, ts.creds.cs, "alice", "right", m)
	}
	return &attackEnv{ts: ts, tt: tt, clients: clients, logs: logs}
}

// state renders everything an attack must not change: groups, topics,
// credentials, and who authenticated.
func (e *attackEnv) state(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	var groups []coordinator.GroupSummary
	// The server's term may still be starting when the first case reads.
	eventually(t, 5*time.Second, "the server to coordinate", func() bool {
		var err error
		groups, err = e.ts.Groups()
		return err == nil
	})
	for _, g := range groups {
		fmt.Fprintf(&b, "group %s members=%d\n", g.Name, g.Members)
	}
	for _, name := range e.ts.topics.Names() {
		fmt.Fprintf(&b, "topic %s\n", name)
	}
	creds, err := e.ts.creds.cs.Credentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range creds {
		fmt.Fprintf(&b, "credential %s %s %x %x\n", c.User, c.Mechanism, c.Salt, c.StoredKey)
	}
	for _, l := range []string{"SASL", "MTLS"} {
		fmt.Fprintf(&b, "authenticated on %s: %q\n", l, principals(e.logs, l))
	}
	return b.String()
}

// scramFirst starts a SCRAM exchange on c: handshake, client-first; it
// returns the conversation, the client-first message and the server-first
// one.
func scramFirst(t *testing.T, c *rawClient, mech *scramMechanism, user, pass string) (*xscram.ClientConversation, string, string) {
	t.Helper()
	if r := c.saslHandshake(mech.name); r.ErrorCode != 0 {
		t.Fatalf("handshake: %s", errName(r.ErrorCode))
	}
	cl, err := mech.hash.NewClientUnprepped(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	r := c.saslAuthenticate([]byte(first))
	if r.ErrorCode != 0 {
		t.Fatalf("client-first: %s", errName(r.ErrorCode))
	}
	return conv, first, string(r.SASLAuthBytes)
}

// expectAuthFailed asserts a SASL_AUTHENTICATION_FAILED answer that does
// not tell a wrong password from an unknown user.
func expectAuthFailed(t *testing.T, r *kmsg.SASLAuthenticateResponse) {
	t.Helper()
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != string(errAuthFailed) {
		t.Fatalf("answer %s %v, want SASL_AUTHENTICATION_FAILED %q", errName(r.ErrorCode), r.ErrorMessage, errAuthFailed)
	}
}

// TestAttacks: each attack on authentication gets its error, closes its
// connection (counted under its reason), and changes nothing: no group,
// topic or credential appears or changes, nobody new authenticates, and a
// legitimate client is still served.
func TestAttacks(t *testing.T) {
	e := newAttackEnv(t)
	saslAddr, mtlsAddr := e.ts.addrs["SASL"], e.ts.addrs["MTLS"]
	for _, tc := range []struct {
		name string
		// setup runs before the state is taken; attack returns the
		// attacker's connection, which must end closed.
		setup  func(t *testing.T) any
		attack func(t *testing.T, setup any) net.Conn
		reason string // tenure_connections_closed_total's label
	}{
		{
			name: "no credentials: a group request",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				c.send(cgHeartbeat("victim", "member-a-000000000000000", 0))
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "no credentials: Metadata that would create a topic",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				c.send(metadataRequest(12, "created-by-nobody"))
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "no credentials: a request between handshake and authentication",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				c.saslHandshake(ScramSHA512)
				c.send(metadataRequest(12, "created-by-nobody"))
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "wrong password (SCRAM-SHA-512)",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				conv, _, serverFirst := scramFirst(t, c, scram512, "alice", "wrong")
				final, err := conv.Step(serverFirst)
				if err != nil {
					t.Fatal(err)
				}
				expectAuthFailed(t, c.saslAuthenticate([]byte(final)))
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "unknown user (SCRAM-SHA-256) fails as a wrong password does",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				conv, _, serverFirst := scramFirst(t, c, scram256, "mallory", "right")
				if !strings.Contains(serverFirst, ",i=4096") {
					t.Errorf("server-first of an unknown user %q does not look like a user's", serverFirst)
				}
				final, err := conv.Step(serverFirst)
				if err != nil {
					t.Fatal(err)
				}
				expectAuthFailed(t, c.saslAuthenticate([]byte(final)))
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "wrong password (PLAIN)",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				c.saslHandshake(Plain)
				expectAuthFailed(t, c.saslAuthenticate([]byte("\x00alice\x00wrong")))
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "unknown mechanism",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				r := c.saslHandshake("GSSAPI")
				if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(r.SupportedMechanisms, []string{Plain, ScramSHA256, ScramSHA512}) {
					t.Fatalf("handshake: %s %q", errName(r.ErrorCode), r.SupportedMechanisms)
				}
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "SASL before handshake",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				if r := c.saslAuthenticate([]byte("\x00alice\x00right")); r.ErrorCode != kerr.IllegalSaslState.Code {
					t.Fatalf("answer %s, want ILLEGAL_SASL_STATE", errName(r.ErrorCode))
				}
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "a second handshake",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				c.saslHandshake(ScramSHA256)
				if r := c.saslHandshake(Plain); r.ErrorCode != kerr.IllegalSaslState.Code {
					t.Fatalf("answer %s, want ILLEGAL_SASL_STATE", errName(r.ErrorCode))
				}
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "replayed SCRAM client-final",
			// alice authenticates; an eavesdropper replays her
			// client-first and client-final messages on its own
			// connection. The server's nonce differs, so the proof does
			// not verify.
			setup: func(t *testing.T) any {
				c := dial(t, saslAddr)
				conv, first, serverFirst := scramFirst(t, c, scram512, "alice", "right")
				final, err := conv.Step(serverFirst)
				if err != nil {
					t.Fatal(err)
				}
				r := c.saslAuthenticate([]byte(final))
				if r.ErrorCode != 0 {
					t.Fatalf("alice: %s", errName(r.ErrorCode))
				}
				if _, err := conv.Step(string(r.SASLAuthBytes)); err != nil || !conv.Valid() {
					t.Fatalf("alice's client does not accept the server's signature: %v", err)
				}
				return [2]string{first, final}
			},
			attack: func(t *testing.T, setup any) net.Conn {
				msgs := setup.([2]string)
				c := dial(t, saslAddr)
				c.saslHandshake(ScramSHA512)
				if r := c.saslAuthenticate([]byte(msgs[0])); r.ErrorCode != 0 {
					t.Fatalf("replayed client-first: %s", errName(r.ErrorCode))
				}
				expectAuthFailed(t, c.saslAuthenticate([]byte(msgs[1])))
				return c.nc
			},
			reason: closeAuth,
		},
		{
			name: "oversized SASL payload",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				c.saslHandshake(ScramSHA256)
				req := kmsg.NewPtrSASLAuthenticateRequest()
				req.Version, req.SASLAuthBytes = 2, make([]byte, 64<<10)
				c.send(req)
				if _, _, err := c.tryRecv(2 * time.Second); err == nil {
					t.Fatal("an oversized SaslAuthenticate was answered")
				}
				return c.nc
			},
			reason: closeProtocol,
		},
		{
			name: "no client certificate where mTLS is required",
			attack: func(t *testing.T, _ any) net.Conn {
				c, err := dialTLS(t, mtlsAddr, e.tt.clientConfig())
				if err == nil {
					// TLS 1.3: the refusal comes with the first read.
					_, _, err = c.tryRecv(2 * time.Second)
					if err == nil {
						t.Fatal("a client without a certificate was served")
					}
					return c.nc
				}
				return nil
			},
			reason: closeTLS,
		},
		{
			name: "a certificate of another CA where mTLS is required",
			attack: func(t *testing.T, _ any) net.Conn {
				other := newTestCA(t, "other").Issue(pkix.Name{CommonName: "alice"})
				c, err := dialTLS(t, mtlsAddr, e.tt.clientConfig(other.TLS))
				if err == nil {
					c.send(metadataRequest(12, "created-by-nobody"))
					if _, _, err = c.tryRecv(2 * time.Second); err == nil {
						t.Fatal("a client with a foreign certificate was served")
					}
					return c.nc
				}
				return nil
			},
			reason: closeTLS,
		},
		{
			name: "a slow client that never finishes authenticating",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, saslAddr)
				c.saslHandshake(ScramSHA256)
				start := time.Now()
				c.expectClosed(10 * attackAuthTimeout)
				if d := time.Since(start); d > 5*attackAuthTimeout {
					t.Errorf("closed after %v; the authentication timeout is %v", d, attackAuthTimeout)
				}
				return c.nc
			},
			reason: closeAuthTimeout,
		},
		{
			name: "a slow client that never finishes its TLS handshake",
			attack: func(t *testing.T, _ any) net.Conn {
				c := dial(t, mtlsAddr)
				c.write([]byte{0x16, 0x03, 0x01}) // a record header, and nothing more
				return c.nc
			},
			reason: closeAuthTimeout,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var setup any
			if tc.setup != nil {
				setup = tc.setup(t)
			}
			before := e.state(t)
			closed := e.ts.metric(t, "tenure_connections_closed_total", "reason", tc.reason)
			if nc := tc.attack(t, setup); nc != nil {
				(&rawClient{t: t, nc: nc, br: nil}).expectClosedRaw(10 * attackAuthTimeout)
			}
			eventually(t, 5*time.Second, "the close counted under "+tc.reason, func() bool {
				return e.ts.metric(t, "tenure_connections_closed_total", "reason", tc.reason) == closed+1
			})
			if after := e.state(t); after != before {
				t.Errorf("the attack changed the state:\n%s\nbefore:\n%s", after, before)
			}
			// A legitimate client is still served, on both listeners.
			c := dial(t, saslAddr)
			c.saslHandshake(Plain)
			if r := c.saslAuthenticate([]byte("\x00alice\x00right")); r.ErrorCode != 0 {
				t.Fatalf("alice after the attack: %s", errName(r.ErrorCode))
			}
			checkServes(t, c)
			alice := e.clients.Issue(pkix.Name{CommonName: "alice"})
			m, err := dialTLS(t, mtlsAddr, e.tt.clientConfig(alice.TLS))
			if err != nil {
				t.Fatal(err)
			}
			checkServes(t, m)
		})
	}
}

// expectClosedRaw asserts that the server closes c's connection within
// timeout, whatever it sends first.
func (c *rawClient) expectClosedRaw(timeout time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 4096)
	for {
		if _, err := c.nc.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				c.t.Fatalf("connection still open after %v", timeout)
			}
			return
		}
	}
}

// gatedCredentials is a credential store whose lookups wait until the
// test opens the gate, so an exchange can be held past the
// authentication timeout.
type gatedCredentials struct {
	store.CredentialStore
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedCredentials) Credential(ctx context.Context, user, mechanism string) (*store.Credential, error) {
	g.entered <- struct{}{}
	<-g.open
	return g.CredentialStore.Credential(ctx, user, mechanism)
}

// TestAuthTimeoutDuringExchange: a SASL exchange that succeeds only after
// the authentication timer closed its connection does not authenticate:
// nothing logs the connection as authenticated or counts it a success,
// and the close counts as an authentication timeout.
func TestAuthTimeoutDuringExchange(t *testing.T) {
	mem := store.NewMemory()
	addUser(t, mem, "alice", "right", ScramSHA256)
	gate := &gatedCredentials{CredentialStore: mem, entered: make(chan struct{}, 1), open: make(chan struct{})}
	ts, logs := observed(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "SASL", Protocol: SASLPlaintext}}
		c.SASLMechanisms = []string{Plain, ScramSHA256}
		c.Credentials = gate
		c.AuthTimeout = 200 * time.Millisecond
	})
	c := dial(t, ts.addr)
	c.saslHandshake(Plain)
	c.send(func() kmsg.Request {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, []byte("\x00alice\x00right")
		return req
	}())
	<-gate.entered
	// The timer closes the connection while the lookup waits.
	c.expectClosed(5 * time.Second)
	close(gate.open)
	eventually(t, 5*time.Second, "the close counted", func() bool {
		return ts.metric(t, "tenure_connections_closed_total", "reason", closeAuthTimeout) == 1
	})
	if p := principals(logs, "SASL"); len(p) != 0 {
		t.Errorf("logged as authenticated: %q", p)
	}
	if n := ts.metric(t, "tenure_authentications_total", "mechanism", Plain, "result", "ok"); n != 0 {
		t.Errorf("%v successful authentications counted", n)
	}
}
