package server

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// SecurityProtocol is how the clients of a listener connect and
// authenticate, under Kafka's names (security.protocol). The zero value is
// invalid.
type SecurityProtocol uint8

const (
	// Plaintext: TCP, no authentication; every client is
	// AnonymousPrincipal.
	Plaintext SecurityProtocol = iota + 1
	// SSL: TLS; with client certificates required (Config.TLS with
	// RequireAndVerifyClientCert), the certificate's subject is the
	// principal, else AnonymousPrincipal.
	SSL
	// SASLPlaintext: SASL authentication over TCP.
	SASLPlaintext
	// SASLSSL: SASL authentication over TLS; the SASL user is the
	// principal, whatever certificate the client showed.
	SASLSSL
)

var protocolNames = [...]string{Plaintext: "PLAINTEXT", SSL: "SSL", SASLPlaintext: "SASL_PLAINTEXT", SASLSSL: "SASL_SSL"}

func (p SecurityProtocol) String() string {
	if p == 0 || int(p) >= len(protocolNames) {
		return "SecurityProtocol(" + strconv.Itoa(int(p)) + ")"
	}
	return protocolNames[p]
}

// ParseSecurityProtocol returns the protocol of a Kafka name
// (case-insensitive): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
func ParseSecurityProtocol(s string) (SecurityProtocol, error) {
	for p, name := range protocolNames {
		if name != "" && strings.EqualFold(s, name) {
			return SecurityProtocol(p), nil
		}
	}
	return 0, fmt.Errorf("unknown security protocol %q (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s)
}

// TLS reports whether the protocol's connections are TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether the protocol's clients authenticate with SASL.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Listener is one of the server's listeners, as Kafka's listeners,
// advertised.listeners and listener.security.protocol.map describe them:
// several at once let loopback clients in without TLS while the network
// must use it. Metadata and FindCoordinator answer each client with the
// addresses of the listener it came in on.
type Listener struct {
	// Name names the listener ("PLAINTEXT", "INTERNAL", "EXTERNAL"...):
	// upper-case letters, digits and '_', unique among the listeners. A
	// node of an HA set registers its advertised address under each name,
	// and clients of a listener are told the addresses the nodes
	// registered under its name.
	Name string
	// Protocol is the listener's security protocol.
	Protocol SecurityProtocol
	// Advertise is the host:port the listener's clients are told to
	// connect to. Empty means the address the listener is bound to.
	Advertise string
	// Principal, on a PLAINTEXT listener, is who its clients act as
	// ("User:admin") instead of AnonymousPrincipal: with the principal a
	// super user, a listener only trusted clients reach (loopback) is an
	// administrator's way in, such as the one that adds the first SASL
	// user and ACLs of a cluster whose other listeners authenticate.
	// Whoever can connect to it is that principal. Empty on the others.
	Principal string
}

// DefaultListenerName is the name of the one listener of a Config without
// Listeners, as Kafka names its default listener.
const DefaultListenerName = "PLAINTEXT"

// validListenerName reports whether name is upper-case letters, digits and
// '_' (Kafka compares listener names upper-cased; tenure asks for them so).
func validListenerName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// listener is a Listener being served: its advertised address resolved.
type listener struct {
	Listener
	bound     net.Addr
	advertise string // host:port
}

// resolveListener fills in l's advertised address from the address it is
// bound to.
func resolveListener(l Listener, bound net.Addr) (*listener, error) {
	addr := l.Advertise
	if addr == "" {
		addr = bound.String()
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("server: listener %s: advertised address %q: %w", l.Name, addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("server: listener %s: advertised port %q is not in 1..65535", l.Name, port)
	}
	return &listener{Listener: l, bound: bound, advertise: addr}, nil
}

// listeners returns the configured listeners, or the default one.
func (c *Config) listeners() []Listener {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []Listener{{Name: DefaultListenerName, Protocol: Plaintext, Advertise: c.Advertise}}
}

// validateSecurity checks the listeners and what their protocols need.
func (c *Config) validateSecurity() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if len(c.Listeners) > 0 && c.Advertise != "" {
		bad("Advertise is for the default listener; with Listeners, each advertises its own")
	}
	names := make(map[string]bool)
	var usesTLS, usesSASL bool
	for _, l := range c.Listeners {
		switch {
		case !validListenerName(l.Name):
			bad("listener name %q: want upper-case letters, digits and '_'", l.Name)
		case names[l.Name]:
			bad("listener %s is given twice", l.Name)
		}
		names[l.Name] = true
		if l.Protocol == 0 || int(l.Protocol) >= len(protocolNames) {
			bad("listener %s: invalid security protocol %d", l.Name, l.Protocol)
		}
		if l.Advertise != "" {
			if host, port, err := net.SplitHostPort(l.Advertise); err != nil || host == "" {
				bad("listener %s: advertised address %q is not host:port", l.Name, l.Advertise)
			} else if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
				bad("listener %s: advertised port %q is not in 1..65535", l.Name, port)
			}
		}
		if l.Principal != "" {
			if l.Protocol != Plaintext {
				bad("listener %s: a principal is for PLAINTEXT listeners; %s clients authenticate", l.Name, l.Protocol)
			}
			if i := strings.IndexByte(l.Principal, ':'); i <= 0 || i == len(l.Principal)-1 {
				bad("listener %s: principal %q is not of the form User:name", l.Name, l.Principal)
			}
		}
		usesTLS = usesTLS || l.Protocol.TLS()
		usesSASL = usesSASL || l.Protocol.SASL()
	}
	if usesTLS && c.TLS == nil {
		bad("an SSL or SASL_SSL listener needs a TLS configuration")
	}
	if c.TLS != nil && c.TLS.GetConfigForClient == nil && c.TLS.GetCertificate == nil && len(c.TLS.Certificates) == 0 {
		bad("the TLS configuration has no certificate")
	}
	seen := make(map[string]bool)
	for _, m := range c.SASLMechanisms {
		if _, ok := mechanisms[m]; !ok {
			bad("unknown SASL mechanism %q (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", m)
		} else if seen[m] {
			bad("SASL mechanism %s is given twice", m)
		}
		seen[m] = true
	}
	if usesSASL {
		if len(c.SASLMechanisms) == 0 {
			bad("a SASL listener needs at least one SASL mechanism")
		}
		if _, ok := c.Store.(store.CredentialStore); !ok && c.Credentials == nil {
			bad("a SASL listener needs a credential store: Store does not keep credentials")
		}
	}
	if c.AuthTimeout <= 0 {
		bad("authentication timeout %v must be positive", c.AuthTimeout)
	}
	if c.AuthFailureDelay < 0 {
		bad("authentication failure delay %v is negative", c.AuthFailureDelay)
	}
	if c.MaxAuthFrameSize < minFrameSize {
		bad("max authentication frame size %d is below %d bytes", c.MaxAuthFrameSize, minFrameSize)
	}
	return errs
}
