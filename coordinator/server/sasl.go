package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"

	"github.com/tenure-dev/tenure/coordinator/server/internal/saslwire"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// The SASL mechanisms the server knows.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// scramMechanism is a SCRAM mechanism: its hash and its number in
// DescribeUserScramCredentials and AlterUserScramCredentials.
type scramMechanism struct {
	name string
	hash scram.HashGeneratorFcn
	kind int8 // kmsg's ScramMechanism: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
}

var (
	scram256 = &scramMechanism{ScramSHA256, scram.SHA256, 1}
	scram512 = &scramMechanism{ScramSHA512, scram.SHA512, 2}
)

// mechanisms are the known mechanisms; PLAIN has no SCRAM mechanism.
var mechanisms = map[string]*scramMechanism{Plain: nil, ScramSHA256: scram256, ScramSHA512: scram512}

// scramByKind returns the SCRAM mechanism of a kmsg number, or nil.
func scramByKind(kind int8) *scramMechanism {
	for _, m := range []*scramMechanism{scram256, scram512} {
		if m.kind == kind {
			return m
		}
	}
	return nil
}

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations and
// maxIterations), which kadm applies too.
const (
	minScramIterations = 4096
	maxScramIterations = 16384
)

// authError is an authentication failure as the client is told of it, in
// Kafka's words (package saslwire, which reads what unauthenticated
// clients send).
type authError = saslwire.Error

// The failures a client is told of.
const (
	errAuthFailed      = saslwire.ErrAuthFailed
	errPlainTokens     = saslwire.ErrPlainTokens
	errPlainNoUser     = saslwire.ErrPlainNoUser
	errPlainNoPass     = saslwire.ErrPlainNoPass
	errAuthzID         = saslwire.ErrAuthzID
	errCredentialStore = saslwire.ErrCredentialStore
)

// parsePlain splits a PLAIN message as Kafka's PlainSaslServer does.
func parsePlain(msg []byte) (user, password string, err error) { return saslwire.ParsePlain(msg) }

// credentials looks users' credentials up for authentication, inventing a
// decoy for a user who has none, so that an unknown user fails exactly as
// a wrong password does: at the end, after the same work.
type credentials struct {
	cs store.CredentialStore
	// secret keys the decoys' salts, so that a user without a credential
	// gets the same salt every time (during the process's life), as a
	// real user does.
	secret [32]byte
}

func newCredentials(cs store.CredentialStore) *credentials {
	c := &credentials{cs: cs}
	_, _ = rand.Read(c.secret[:]) // never fails
	return c
}

// lookup returns user's credential for m; a user without one gets a decoy
// (decoy true). err is a store failure.
func (c *credentials) lookup(ctx context.Context, m *scramMechanism, user string) (cred scram.StoredCredentials, decoy bool, err error) {
	if c.cs != nil {
		sc, err := c.cs.Credential(ctx, user, m.name)
		switch {
		case err == nil:
			return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(sc.Salt), Iters: sc.Iterations},
				StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, false, nil
		case !errors.Is(err, store.ErrNoCredential):
			return scram.StoredCredentials{}, false, err
		}
	}
	mac := hmac.New(sha256.New, c.secret[:])
	fmt.Fprintf(mac, "%s\x00%s", m.name, user)
	salt := mac.Sum(nil)[:24] // kadm's salt length
	// Keys no proof matches: random, and of the hash's size.
	size := m.hash().Size()
	keys := make([]byte, 2*size)
	_, _ = rand.Read(keys)
	return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: minScramIterations},
		StoredKey: keys[:size], ServerKey: keys[size:]}, true, nil
}

// verifyPlain checks a PLAIN password against user's SCRAM credential:
// it derives the salted password with the stored salt and iterations and
// compares the stored keys (xdg-go/scram does the derivation). It tries
// SCRAM-SHA-512 first, then SCRAM-SHA-256, whichever the user has; a user
// with neither is checked against the SCRAM-SHA-512 decoy (4096
// iterations), which costs what such a credential costs. err is a store
// failure; ok false a wrong password or an unknown user.
func (c *credentials) verifyPlain(ctx context.Context, user, password string) (ok bool, err error) {
	m := scram512
	cred, decoy, err := c.lookup(ctx, scram512, user)
	if err != nil {
		return false, err
	}
	if decoy {
		cred256, decoy256, err := c.lookup(ctx, scram256, user)
		if err != nil {
			return false, err
		}
		if !decoy256 {
			m, cred = scram256, cred256
		}
	}
	// Kafka derives the salted password from the password's UTF-8 bytes,
	// unprepared, and so do kadm and kgo: SASLprep would fail some
	// passwords Kafka accepts.
	cl, err := m.hash.NewClientUnprepped(user, password, "")
	if err != nil {
		return false, nil
	}
	got, err := cl.GetStoredCredentialsWithError(cred.KeyFactors)
	if err != nil {
		return false, nil
	}
	return hmac.Equal(got.StoredKey, cred.StoredKey), nil
}

// scramKeys returns the keys RFC 5802 derives from a salted password,
// which AlterUserScramCredentials carries (the password itself never
// reaches the server): StoredKey = H(HMAC(salted, "Client Key")) and
// ServerKey = HMAC(salted, "Server Key").
func scramKeys(h func() hash.Hash, salted []byte) (storedKey, serverKey []byte) {
	mac := hmac.New(h, salted)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	d := h()
	d.Write(clientKey)
	storedKey = d.Sum(nil)
	mac = hmac.New(h, salted)
	mac.Write([]byte("Server Key"))
	return storedKey, mac.Sum(nil)
}

// scramExchange is the server side of one SCRAM authentication.
type scramExchange = saslwire.Exchange

// newScramExchange starts a SCRAM authentication for m. The lookup runs
// inside the conversation's first step, bounded by the step's ctx.
func (c *credentials) newScramExchange(m *scramMechanism) *scramExchange {
	return saslwire.NewExchange(m.hash, func(ctx context.Context, user string) (scram.StoredCredentials, bool, error) {
		return c.lookup(ctx, m, user)
	})
}
