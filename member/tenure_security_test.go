package member

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/testpki"
)

// TestTenureOverTLSAndSASL: members join tenure's SASL_SSL listener with
// Config.TLS and Config.SASL (kgo's sasl/scram), and claim every
// partition; a member with a wrong password does not join.
func TestTenureOverTLSAndSASL(t *testing.T) {
	ca := testpki.New(t, "test CA")
	cfg := testenv.TenureConfig(t, testSession, testInterval, testParts)
	cfg.Listeners = []server.Listener{{Name: "SECURE", Protocol: server.SASLSSL}}
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(pkix.Name{CommonName: "tenure"}).TLS}}
	cfg.SASLMechanisms = []string{server.ScramSHA512}
	cl, err := xscram.SHA512.NewClientUnprepped("alice", "s3cret", "")
	if err != nil {
		t.Fatal(err)
	}
	salt := "0123456789abcdef01234567"
	stored, err := cl.GetStoredCredentialsWithError(xscram.KeyFactors{Salt: salt, Iters: 4096})
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Store.(*store.Memory).AlterCredentials(context.Background(), []*store.Credential{{User: "alice",
		Mechanism: server.ScramSHA512, Salt: []byte(salt), Iterations: 4096, StoredKey: stored.StoredKey, ServerKey: stored.ServerKey}})
	if err != nil {
		t.Fatal(err)
	}
	brokers := []string{testenv.StartTenure(t, cfg)}

	secure := func(password string) Config {
		c := testConfig(t, brokers)
		c.TLS = ca.ClientConfig()
		c.SASL = scram.Auth{User: "alice", Pass: password}.AsSha512Mechanism()
		return c
	}
	rec := &recorder{t: t}
	sessions := map[string]*Session{
		"a": join(t, secure("s3cret"), rec.handler("a")),
		"b": join(t, secure("s3cret"), rec.handler("b")),
	}
	waitFor(t, 10*time.Second, stable(sessions))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s, err := Join(ctx, secure("wrong"), rec.handler("c")); err == nil {
		s.Close(ctx)
		t.Fatal("a member with a wrong password joined")
	}
}
