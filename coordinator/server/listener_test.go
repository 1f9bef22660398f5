package server

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestSecurityConfig: what the listeners need is checked by Validate,
// with a message naming the setting.
func TestSecurityConfig(t *testing.T) {
	withCert := &tls.Config{Certificates: []tls.Certificate{{}}}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" for a valid config
	}{
		{"default", func(*Config) {}, ""},
		{"every protocol", func(c *Config) {
			c.Listeners = []Listener{{Name: "A", Protocol: Plaintext}, {Name: "B", Protocol: SSL, Advertise: "b:1"},
				{Name: "C", Protocol: SASLPlaintext}, {Name: "D_2", Protocol: SASLSSL}}
			c.TLS = withCert
		}, ""},
		{"advertise beside listeners", func(c *Config) {
			c.Advertise = "a:1"
			c.Listeners = []Listener{{Name: "A", Protocol: Plaintext}}
		}, "each advertises its own"},
		{"lower-case name", func(c *Config) { c.Listeners = []Listener{{Name: "a", Protocol: Plaintext}} }, "upper-case"},
		{"name twice", func(c *Config) {
			c.Listeners = []Listener{{Name: "A", Protocol: Plaintext}, {Name: "A", Protocol: SSL}}
			c.TLS = withCert
		}, "given twice"},
		{"no protocol", func(c *Config) { c.Listeners = []Listener{{Name: "A"}} }, "invalid security protocol"},
		{"bad advertised port", func(c *Config) { c.Listeners = []Listener{{Name: "A", Protocol: Plaintext, Advertise: "a:0"}} }, "not in 1..65535"},
		{"TLS listener without TLS", func(c *Config) { c.Listeners = []Listener{{Name: "A", Protocol: SSL}} }, "needs a TLS configuration"},
		{"TLS without a certificate", func(c *Config) { c.TLS = &tls.Config{} }, "has no certificate"},
		{"unknown mechanism", func(c *Config) { c.SASLMechanisms = []string{"GSSAPI"} }, "unknown SASL mechanism"},
		{"mechanism twice", func(c *Config) { c.SASLMechanisms = []string{Plain, Plain} }, "given twice"},
		{"SASL without mechanisms", func(c *Config) {
			c.Listeners = []Listener{{Name: "A", Protocol: SASLPlaintext}}
			c.SASLMechanisms = nil
		}, "at least one SASL mechanism"},
		{"SASL without credentials", func(c *Config) {
			c.Listeners = []Listener{{Name: "A", Protocol: SASLPlaintext}}
			c.Store, c.TopicStore = &topicsOnly{store.NewMemory()}, store.NewMemory()
		}, "needs a credential store"},
		{"listener principal", func(c *Config) {
			c.Listeners = []Listener{{Name: "ADMIN", Protocol: Plaintext, Principal: "User:admin"}}
		}, ""},
		{"principal on a SASL listener", func(c *Config) {
			c.Listeners = []Listener{{Name: "A", Protocol: SASLPlaintext, Principal: "User:admin"}}
		}, "a principal is for PLAINTEXT listeners"},
		{"principal without a type", func(c *Config) {
			c.Listeners = []Listener{{Name: "A", Protocol: Plaintext, Principal: "admin"}}
		}, "not of the form User:name"},
		{"zero auth timeout", func(c *Config) { c.AuthTimeout = 0 }, "authentication timeout"},
		{"small auth frames", func(c *Config) { c.MaxAuthFrameSize = 10 }, "max authentication frame size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Store = store.NewMemory()
			tc.mutate(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want ErrInvalidConfig with %q", err, tc.want)
			}
		})
	}
}

// topicsOnly is a store that keeps no credentials.
type topicsOnly struct{ store.Store }

// TestAuthenticatedStaysOpen: once authenticated, a connection outlives
// the authentication timeout, on a SASL listener and on a TLS one.
func TestAuthenticatedStaysOpen(t *testing.T) {
	// Long enough for a SASL exchange and a TLS handshake under -race on
	// a loaded machine: the timeout must not cut the set-up itself.
	const timeout = 2 * time.Second
	ts, tt, _ := saslServer(t, func(c *Config) {
		c.AuthTimeout = timeout
		c.Listeners = append(c.Listeners, Listener{Name: "TLS", Protocol: SSL})
	})
	addUser(t, ts.creds.cs, "alice", "pw", ScramSHA512)
	s := dial(t, ts.addrs["SASL"])
	s.saslHandshake(Plain)
	if r := s.saslAuthenticate([]byte("\x00alice\x00pw")); r.ErrorCode != 0 {
		t.Fatalf("PLAIN: %s", errName(r.ErrorCode))
	}
	c, err := dialTLS(t, ts.addrs["TLS"], tt.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(timeout + timeout/2)
	checkServes(t, s)
	checkServes(t, c)
	if n := ts.metric(t, "tenure_connections_closed_total", "reason", closeAuthTimeout); n != 0 {
		t.Errorf("%v connections closed for the authentication timeout", n)
	}
}
