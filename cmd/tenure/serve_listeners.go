package main

import (
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/server"
)

// listenerFlags are serve's listeners and their security, as Kafka's
// listeners, advertised.listeners and listener.security.protocol.map
// give them, with the TLS files and the SASL settings they need.
type listenerFlags struct {
	listeners   string
	advertised  string
	protocolMap string

	tlsCert, tlsKey, tlsClientCA string

	saslMechanisms string
	authTimeout    time.Duration

	principals string
}

// defaultProtocolMap maps each security protocol's name to itself, as
// Kafka's default listener.security.protocol.map does.
const defaultProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

func addListenerFlags(fs *flag.FlagSet) *listenerFlags {
	def := server.DefaultConfig()
	f := &listenerFlags{}
	fs.StringVar(&f.listeners, "listeners", "", "comma-separated `NAME://host:port` listeners, replacing --listen: each with its security protocol from --listener-security-protocol-map, e.g. INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9094 (an empty host is every interface)")
	fs.StringVar(&f.advertised, "advertised-listeners", "", "comma-separated `NAME://host:port` addresses clients of each listener are told to connect to, replacing --advertise (default: the address each listener is bound to)")
	fs.StringVar(&f.protocolMap, "listener-security-protocol-map", defaultProtocolMap, "comma-separated `NAME:PROTOCOL` security protocol of each listener: PLAINTEXT, SSL (TLS; the client certificate's subject is the principal), SASL_PLAINTEXT or SASL_SSL")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "certificate chain `file` (PEM) of the SSL and SASL_SSL listeners, reloaded when it changes")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the certificate's private key `file` (PEM), reloaded when it changes")
	fs.StringVar(&f.tlsClientCA, "tls-client-ca", "", "CA certificates `file` (PEM): TLS clients must show a certificate of one of them (mTLS); reloaded when it changes")
	fs.StringVar(&f.saslMechanisms, "sasl-mechanisms", strings.Join(def.SASLMechanisms, ","), "comma-separated SASL `mechanisms` the SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (PLAIN sends the password itself: over SASL_SSL only)")
	fs.StringVar(&f.principals, "listener-principal", "", "comma-separated `NAME=User:name`: every client of the PLAINTEXT listener NAME (PLAINTEXT is --listen's) acts as that principal instead of User:ANONYMOUS; the listener must be bound to loopback. With the principal in --super-users it is the administrator's way in, to add the first users and ACLs (docs/SECURITY.md)")
	fs.DurationVar(&f.authTimeout, "sasl-timeout", def.AuthTimeout, "close a connection that has not finished its TLS handshake and SASL authentication this long after it connected")
	return f
}

// boundListener is a listener to open: where to bind, and its
// configuration.
type boundListener struct {
	bind string
	cfg  server.Listener
}

// resolve returns the listeners to open and the security settings of
// cfg. listen and advertise are --listen and --advertise; listenGiven and
// advertiseGiven say whether they were given, which --listeners and
// --advertised-listeners refuse.
func (f *listenerFlags) resolve(cfg *server.Config, listen, advertise string, listenGiven, advertiseGiven bool, log *zap.Logger) ([]boundListener, error) {
	var out []boundListener
	if f.listeners == "" {
		if f.advertised != "" {
			return nil, usagef("--advertised-listeners needs --listeners (with --listen, give --advertise)")
		}
		out = []boundListener{{bind: listen, cfg: server.Listener{Name: server.DefaultListenerName, Protocol: server.Plaintext}}}
		cfg.Advertise = advertise
	} else {
		if listenGiven {
			return nil, usagef("--listen and --listeners do not go together: give the plaintext listener in --listeners (PLAINTEXT://%s)", listen)
		}
		if advertiseGiven {
			return nil, usagef("--advertise and --listeners do not go together: give the addresses in --advertised-listeners")
		}
		protocols, err := parseProtocolMap(f.protocolMap)
		if err != nil {
			return nil, err
		}
		ls, err := parseListenerList("--listeners", f.listeners)
		if err != nil {
			return nil, err
		}
		adv, err := parseListenerList("--advertised-listeners", f.advertised)
		if err != nil {
			return nil, err
		}
		for _, a := range adv {
			host, _, _ := net.SplitHostPort(a.addr)
			if host == "" {
				return nil, usagef("--advertised-listeners: %s://%s has no host", a.name, a.addr)
			}
		}
		for _, l := range ls {
			p, ok := protocols[l.name]
			if !ok {
				return nil, usagef("listener %s has no security protocol: add %s:PROTOCOL to --listener-security-protocol-map", l.name, l.name)
			}
			bl := boundListener{bind: l.addr, cfg: server.Listener{Name: l.name, Protocol: p}}
			for _, a := range adv {
				if a.name == l.name {
					bl.cfg.Advertise = a.addr
				}
			}
			out = append(out, bl)
		}
		for _, a := range adv {
			if !hasListener(out, a.name) {
				return nil, usagef("--advertised-listeners names %s, which is not in --listeners", a.name)
			}
		}
		for _, bl := range out {
			cfg.Listeners = append(cfg.Listeners, bl.cfg)
		}
	}

	if err := f.applyPrincipals(cfg, out); err != nil {
		return nil, err
	}

	var usesTLS, usesSASL, plainWithoutTLS bool
	for _, bl := range out {
		usesTLS = usesTLS || bl.cfg.Protocol.TLS()
		usesSASL = usesSASL || bl.cfg.Protocol.SASL()
		plainWithoutTLS = plainWithoutTLS || bl.cfg.Protocol == server.SASLPlaintext
	}
	tlsGiven := f.tlsCert != "" || f.tlsKey != "" || f.tlsClientCA != ""
	switch {
	case usesTLS && (f.tlsCert == "" || f.tlsKey == ""):
		return nil, usagef("an SSL or SASL_SSL listener needs --tls-cert and --tls-key")
	case !usesTLS && tlsGiven:
		return nil, usagef("--tls-cert, --tls-key and --tls-client-ca are for SSL and SASL_SSL listeners, and --listeners has none")
	case usesTLS:
		tc, err := server.LoadTLS(server.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, ClientCAFile: f.tlsClientCA}, log.Named("tls"))
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cfg.SASLMechanisms = nil
	for _, m := range splitList(f.saslMechanisms) {
		cfg.SASLMechanisms = append(cfg.SASLMechanisms, strings.ToUpper(m))
	}
	if usesSASL && len(cfg.SASLMechanisms) == 0 {
		return nil, usagef("--sasl-mechanisms is empty, and a SASL listener needs one")
	}
	if plainWithoutTLS && containsFold(cfg.SASLMechanisms, server.Plain) {
		log.Warn("SASL PLAIN is offered on a SASL_PLAINTEXT listener: passwords cross the network in the clear")
	}
	cfg.AuthTimeout = f.authTimeout
	return out, nil
}

// applyPrincipals gives the listeners of --listener-principal their
// principal, in out and in cfg. Whoever reaches such a listener acts as
// its principal, so it must be plaintext and bound to loopback, where only
// this host's users reach it.
func (f *listenerFlags) applyPrincipals(cfg *server.Config, out []boundListener) error {
	for _, item := range splitList(f.principals) {
		name, principal, ok := strings.Cut(item, "=")
		name = strings.ToUpper(strings.TrimSpace(name))
		principal = strings.TrimSpace(principal)
		if i := strings.IndexByte(principal, ':'); !ok || name == "" || i <= 0 || i == len(principal)-1 {
			return usagef("--listener-principal: %q is not NAME=User:name", item)
		}
		i := slices.IndexFunc(out, func(bl boundListener) bool { return bl.cfg.Name == name })
		if i < 0 {
			var names []string
			for _, bl := range out {
				names = append(names, bl.cfg.Name)
			}
			return usagef("--listener-principal names listener %s; the listeners are %s", name, strings.Join(names, ", "))
		}
		bl := &out[i]
		if bl.cfg.Protocol != server.Plaintext {
			return usagef("--listener-principal: listener %s is %s, whose clients authenticate; a principal is for a PLAINTEXT listener", name, bl.cfg.Protocol)
		}
		if !loopbackBind(bl.bind) {
			return usagef("--listener-principal: listener %s is bound to %s, not to loopback: every client that reaches it would act as %s", name, bl.bind, principal)
		}
		if bl.cfg.Principal != "" {
			return usagef("--listener-principal names listener %s twice", name)
		}
		bl.cfg.Principal = principal
	}
	if len(cfg.Listeners) == 0 {
		if len(out) == 1 && out[0].cfg.Principal != "" {
			// --listen's listener, given in full to carry its principal.
			out[0].cfg.Advertise, cfg.Advertise = cfg.Advertise, ""
			cfg.Listeners = []server.Listener{out[0].cfg}
		}
		return nil
	}
	for i := range out {
		cfg.Listeners[i] = out[i].cfg
	}
	return nil
}

// loopbackBind reports whether a listener bound at addr (host:port) is
// reachable from this host only.
func loopbackBind(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hasListener(ls []boundListener, name string) bool {
	for _, l := range ls {
		if l.cfg.Name == name {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// namedAddr is one NAME://host:port.
type namedAddr struct{ name, addr string }

// parseListenerList parses a comma-separated NAME://host:port list;
// names are upper-cased, as Kafka compares them, and must be unique.
func parseListenerList(flagName, v string) ([]namedAddr, error) {
	var out []namedAddr
	seen := make(map[string]bool)
	for _, item := range splitList(v) {
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, usagef("%s: %q is not NAME://host:port", flagName, item)
		}
		name = strings.ToUpper(name)
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return nil, usagef("%s: %q: the address is not host:port", flagName, item)
		}
		if seen[name] {
			return nil, usagef("%s names %s twice", flagName, name)
		}
		seen[name] = true
		out = append(out, namedAddr{name, addr})
	}
	return out, nil
}

// parseProtocolMap parses NAME:PROTOCOL pairs.
func parseProtocolMap(v string) (map[string]server.SecurityProtocol, error) {
	out := make(map[string]server.SecurityProtocol)
	for _, item := range splitList(v) {
		name, proto, ok := strings.Cut(item, ":")
		if !ok || name == "" {
			return nil, usagef("--listener-security-protocol-map: %q is not NAME:PROTOCOL", item)
		}
		p, err := server.ParseSecurityProtocol(proto)
		if err != nil {
			return nil, usagef("--listener-security-protocol-map: %v", err)
		}
		out[strings.ToUpper(name)] = p
	}
	return out, nil
}

// advertisedListeners returns each listener's advertised address, for an
// HA node's registration: its own, or the address it is bound to.
func advertisedListeners(cfgs []server.Listener, lns []net.Listener) map[string]string {
	out := make(map[string]string, len(lns))
	for i, ln := range lns {
		addr := cfgs[i].Advertise
		if addr == "" {
			addr = ln.Addr().String()
		}
		out[cfgs[i].Name] = addr
	}
	return out
}

// listenAll opens every listener, closing those opened if one fails.
func listenAll(ls []boundListener) ([]net.Listener, error) {
	var out []net.Listener
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.bind)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("listen %s (%s): %w", l.cfg.Name, l.bind, err)
		}
		out = append(out, ln)
	}
	return out, nil
}

// multiCloser closes several listeners.
type multiCloser []net.Listener

func (m multiCloser) Close() error {
	for _, ln := range m {
		ln.Close()
	}
	return nil
}
