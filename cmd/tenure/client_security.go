package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// clientSecurity are the TLS and SASL flags of the commands that connect
// to tenure as Kafka clients (worker, groups, topics, users): the client
// side of serve's SSL, SASL_PLAINTEXT and SASL_SSL listeners.
type clientSecurity struct {
	tls          bool
	ca           string
	cert, key    string
	serverName   string
	mechanism    string
	user         string
	passwordFile string
}

// saslPasswordEnv holds the SASL password when --sasl-password-file does
// not name a file: a password is never a flag, which the process list
// shows.
const saslPasswordEnv = "TENURE_SASL_PASSWORD"

func addClientSecurityFlags(fs *flag.FlagSet) *clientSecurity {
	c := &clientSecurity{}
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (implied by the other --tls- flags)")
	fs.StringVar(&c.ca, "tls-ca", "", "CA certificates `file` (PEM) to verify the coordinator with (default: the system's roots)")
	fs.StringVar(&c.cert, "tls-cert", "", "client certificate `file` (PEM) for a listener that requires one (mTLS), with --tls-key")
	fs.StringVar(&c.key, "tls-key", "", "the client certificate's key `file` (PEM)")
	fs.StringVar(&c.serverName, "tls-server-name", "", "`name` to verify the coordinator's certificate against (default: the host of each address)")
	fs.StringVar(&c.mechanism, "sasl-mechanism", "", "authenticate with SASL `mechanism` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL); the password comes from --sasl-password-file or "+saslPasswordEnv)
	fs.StringVar(&c.user, "sasl-user", "", "SASL user `name`")
	fs.StringVar(&c.passwordFile, "sasl-password-file", "", "`file` whose first line is the SASL password (default: the environment variable "+saslPasswordEnv+")")
	return c
}

// kgoOpts returns the kgo options the flags ask for: none by default.
func (c *clientSecurity) kgoOpts() ([]kgo.Opt, error) {
	tc, mech, err := c.config()
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// config returns the TLS configuration (nil without TLS) and the SASL
// mechanism (nil without SASL) the flags ask for.
func (c *clientSecurity) config() (*tls.Config, sasl.Mechanism, error) {
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	mech, err := c.sasl()
	return tc, mech, err
}

func (c *clientSecurity) tlsConfig() (*tls.Config, error) {
	if (c.cert == "") != (c.key == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if !c.tls && c.ca == "" && c.cert == "" && c.serverName == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.serverName}
	if c.ca != "" {
		pem, err := os.ReadFile(c.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", c.ca)
		}
	}
	if c.cert != "" {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

func (c *clientSecurity) sasl() (sasl.Mechanism, error) {
	if c.mechanism == "" {
		if c.user != "" || c.passwordFile != "" {
			return nil, usagef("--sasl-user and --sasl-password-file need --sasl-mechanism")
		}
		return nil, nil
	}
	if c.user == "" {
		return nil, usagef("--sasl-mechanism %s needs --sasl-user", c.mechanism)
	}
	password, err := c.password()
	if err != nil {
		return nil, err
	}
	switch strings.ToUpper(c.mechanism) {
	case "PLAIN":
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			return plain.Auth{User: c.user, Pass: password}, nil
		}), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.user, Pass: password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: c.user, Pass: password}.AsSha512Mechanism(), nil
	}
	return nil, usagef("unknown --sasl-mechanism %q (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", c.mechanism)
}

// password reads the SASL password from --sasl-password-file, or the
// environment.
func (c *clientSecurity) password() (string, error) {
	if c.passwordFile != "" {
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return "", fmt.Errorf("--sasl-password-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			return "", fmt.Errorf("--sasl-password-file: %s holds no password", c.passwordFile)
		}
		return line, nil
	}
	if p, ok := os.LookupEnv(saslPasswordEnv); ok && p != "" {
		return p, nil
	}
	return "", usagef("--sasl-mechanism %s needs a password: --sasl-password-file or %s", c.mechanism, saslPasswordEnv)
}

// tlsDialer wraps dial with TLS by cfg (nil: dial as it is), naming the
// server as kgo.DialTLSConfig does: by the host dialed, unless cfg names
// it.
func tlsDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if cfg == nil {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := cfg.Clone()
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("tls: %q: %w", addr, err)
			}
			c.ServerName = host
		}
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
}
