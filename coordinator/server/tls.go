package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// TLSFiles names the PEM files of a server's TLS configuration.
type TLSFiles struct {
	// CertFile holds the server's certificate chain, leaf first.
	CertFile string
	// KeyFile holds the certificate's private key.
	KeyFile string
	// ClientCAFile, if set, holds the CA certificates that client
	// certificates must chain to; every client must then show one (mTLS).
	ClientCAFile string
}

// LoadTLS reads files and returns a server TLS configuration (TLS 1.2 or
// later) that reads them again when they change: each handshake first
// looks at the files' sizes and modification times, and if any changed,
// the next handshakes use the new certificate and client CAs. Connections
// already open keep theirs. A change that does not load (a certificate
// replaced before its key, a half-written file) keeps the previous
// configuration, with a warning, until the files load together. The files
// must load now.
func LoadTLS(files TLSFiles, log *zap.Logger) (*tls.Config, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("server: TLS needs a certificate file and a key file")
	}
	if log == nil {
		log = zap.NewNop()
	}
	r := &tlsReloader{files: files, log: log}
	sig, err := r.signature()
	if err != nil {
		return nil, err
	}
	cfg, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(cfg)
	r.loaded, r.tried = sig, sig
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: r.configForClient}, nil
}

// tlsReloader holds the current configuration of LoadTLS.
type tlsReloader struct {
	files TLSFiles
	log   *zap.Logger
	cur   atomic.Pointer[tls.Config]

	mu     sync.Mutex
	loaded string // the files' signature when cur was loaded
	tried  string // the signature of the last load attempted
}

// configForClient is the GetConfigForClient of LoadTLS: the current
// configuration, reloaded first if the files changed. Stat costs a few
// microseconds, a handshake a millisecond or more.
func (r *tlsReloader) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sig, err := r.signature()
	if err != nil || sig == r.tried {
		if err != nil && sig != r.tried {
			r.log.Warn("TLS files unreadable; keeping the loaded certificate", zap.Error(err))
			r.tried = sig
		}
		return r.cur.Load(), nil
	}
	r.tried = sig
	cfg, err := r.load()
	if err != nil {
		r.log.Warn("TLS files changed but do not load; keeping the loaded certificate until they do", zap.Error(err))
		return r.cur.Load(), nil
	}
	r.cur.Store(cfg)
	r.loaded = sig
	return cfg, nil
}

// signature sums up the files' sizes and modification times; an
// unreadable file has an error signature of its own, so that its errors
// are logged once.
func (r *tlsReloader) signature() (string, error) {
	var b bytes.Buffer
	var errs []error
	for _, name := range []string{r.files.CertFile, r.files.KeyFile, r.files.ClientCAFile} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			fmt.Fprintf(&b, "%s:error;", name)
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", name, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), errors.Join(errs...)
}

// load reads the files into a configuration for handshakes.
func (r *tlsReloader) load() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate %s, key %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	fields := []zap.Field{zap.String("cert", r.files.CertFile)}
	if leaf := pair.Leaf; leaf != nil {
		fields = append(fields, zap.String("subject", leaf.Subject.String()), zap.Time("not_after", leaf.NotAfter))
		if time.Until(leaf.NotAfter) < 0 {
			r.log.Warn("the TLS certificate has expired", fields...)
		}
	}
	if r.files.ClientCAFile != "" {
		pem, err := os.ReadFile(r.files.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("server: TLS client CAs: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server: TLS client CAs: no PEM certificate in %s", r.files.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		fields = append(fields, zap.String("client_ca", r.files.ClientCAFile))
	}
	r.log.Info("TLS certificate loaded", fields...)
	return cfg, nil
}

// serverTLS returns the configuration the server's TLS listeners use: the
// given one, at TLS 1.2 or later.
func serverTLS(given *tls.Config) *tls.Config {
	if given == nil {
		return nil
	}
	cfg := given.Clone()
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if get := cfg.GetConfigForClient; get != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if c != nil && c.MinVersion < tls.VersionTLS12 {
				c = c.Clone()
				c.MinVersion = tls.VersionTLS12
			}
			return c, err
		}
	}
	return cfg
}
