package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"hash"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	t      testing.TB
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, cert: cert, key: key, serial: 1}
}

// pool is a pool of the CA alone.
func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func (ca *testCA) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// issued is a certificate the CA issued, with its key, in every form the
// tests need.
type issued struct {
	cert    tls.Certificate
	certPEM []byte
	keyPEM  []byte
	serial  *big.Int
}

// issue makes a leaf certificate for subject: a server certificate for
// 127.0.0.1 and localhost, which is also good for client authentication.
func (ca *testCA) issue(subject pkix.Name) issued {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	out := issued{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		serial:  tmpl.SerialNumber,
	}
	out.cert, err = tls.X509KeyPair(out.certPEM, out.keyPEM)
	if err != nil {
		ca.t.Fatal(err)
	}
	return out
}

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
	return &testTLS{ca: ca, server: ca.issue(pkix.Name{CommonName: "tenure"})}
}

// serverConfig serves the certificate; with clientCA, client certificates
// of that CA are required.
func (tt *testTLS) serverConfig(clientCA *testCA) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{tt.server.cert}}
	if clientCA != nil {
		cfg.ClientCAs = clientCA.pool()
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// clientConfig trusts the CA and shows certs.
func (tt *testTLS) clientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: tt.ca.pool(), ServerName: "127.0.0.1", Certificates: certs, MinVersion: tls.VersionTLS12}
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
