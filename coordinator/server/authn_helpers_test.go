package server

import (
	"bufio"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"hash"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/internal/testpki"
)

// testCA and issued are testpki's, under the names the tests use.
type (
	testCA = testpki.CA
	issued = testpki.Cert
)

func newTestCA(t testing.TB, name string) *testCA { return testpki.New(t, name) }

// writeFile writes b to name in dir, replacing it in one step (rename),
// as a tool that rotates certificates does.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// testTLS is a CA, the server's certificate and the client TLS
// configuration that trusts it.
type testTLS struct {
	ca     *testCA
	server issued
}

func newTestTLS(t testing.TB) *testTLS {
	ca := newTestCA(t, "tenure test CA")
	return &testTLS{ca: ca, server: ca.Issue(pkix.Name{CommonName: "tenure"})}
}

// serverConfig serves the certificate; with clientCA, client certificates
// of that CA are required.
func (tt *testTLS) serverConfig(clientCA *testCA) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{tt.server.TLS}}
	if clientCA != nil {
		cfg.ClientCAs = clientCA.Pool()
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// clientConfig trusts the CA and shows certs.
func (tt *testTLS) clientConfig(certs ...tls.Certificate) *tls.Config {
	return tt.ca.ClientConfig(certs...)
}

// dialTLS opens a TLS connection for raw requests; the handshake's error,
// if any, is returned.
func dialTLS(t testing.TB, addr string, cfg *tls.Config) (*rawClient, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	tc := tls.Client(nc, cfg)
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	// With TLS 1.3 the server checks the client's certificate after the
	// client's handshake completes: its refusal arrives with the first
	// read.
	tc.SetDeadline(time.Time{})
	return &rawClient{t: t, nc: tc, br: bufio.NewReader(tc), sent: make(map[int32]kmsg.Request)}, nil
}

// addUser stores a SCRAM credential of password for user and mechanism,
// derived as kadm derives it.
func addUser(t testing.TB, cs store.CredentialStore, user, password, mechanism string) {
	t.Helper()
	m := mechanisms[mechanism]
	var h func() hash.Hash = sha256.New
	if m == scram512 {
		h = sha512.New
	}
	salt := make([]byte, 24)
	rand.Read(salt)
	salted, err := pbkdf2.Key(h, password, salt, 4096, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	storedKey, serverKey := scramKeys(h, salted)
	err = cs.AlterCredentials(context.Background(), []*store.Credential{{User: user, Mechanism: mechanism, Salt: salt,
		Iterations: 4096, StoredKey: storedKey, ServerKey: serverKey}})
	if err != nil {
		t.Fatal(err)
	}
}

// handshake sends a SaslHandshake for mechanism and returns its code.
func (c *rawClient) saslHandshake(mechanism string) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, mechanism
	return c.roundTrip(req).(*kmsg.SASLHandshakeResponse)
}

// saslAuthenticate sends one SaslAuthenticate (v2) with msg.
func (c *rawClient) saslAuthenticate(msg []byte) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, msg
	return c.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
}

// errName names an error code for messages.
func errName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return "NONE"
}
