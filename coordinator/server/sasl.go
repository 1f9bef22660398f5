package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"

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
// Kafka's words.
type authError string

func (e authError) Error() string { return string(e) }

// The failures a client is told of.
const (
	// errAuthFailed: a wrong password and an unknown user are not told
	// apart.
	errAuthFailed      authError = "Authentication failed: Invalid username or password"
	errPlainTokens     authError = "Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens"
	errPlainNoUser     authError = "Authentication failed: username not specified"
	errPlainNoPass     authError = "Authentication failed: password not specified"
	errAuthzID         authError = "Authentication failed: Client requested an authorization id that is different from username"
	errCredentialStore authError = "Authentication failed: the credential store is unavailable"
)

// parsePlain splits a PLAIN message (RFC 4616: authzid NUL authcid NUL
// passwd) as Kafka's PlainSaslServer does: exactly three fields, a
// username and a password that are not empty, and an authorization ID
// that is empty or the username.
func parsePlain(msg []byte) (user, password string, err error) {
	fields := bytes.Split(msg, []byte{0})
	switch {
	case len(fields) != 3:
		return "", "", errPlainTokens
	case len(fields[1]) == 0:
		return "", "", errPlainNoUser
	case len(fields[2]) == 0:
		return "", "", errPlainNoPass
	case len(fields[0]) != 0 && !bytes.Equal(fields[0], fields[1]):
		return "", "", errAuthzID
	}
	return string(fields[1]), string(fields[2]), nil
}

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

// scramExchange is one SCRAM authentication in progress: xdg-go/scram's
// server conversation, and what its credential lookup found.
type scramExchange struct {
	conv     *scram.ServerConversation
	ctx      context.Context // the current step's, which bounds the lookup
	decoy    bool
	storeErr error
}

// newScramExchange starts a SCRAM authentication for m. The lookup runs
// inside the conversation's first step, bounded by the step's ctx.
func (c *credentials) newScramExchange(m *scramMechanism) *scramExchange {
	x := &scramExchange{}
	srv, err := m.hash.NewServer(func(user string) (scram.StoredCredentials, error) {
		cred, decoy, err := c.lookup(x.ctx, m, user)
		x.decoy, x.storeErr = decoy, err
		return cred, err
	})
	if err != nil {
		panic(fmt.Sprintf("server: SCRAM server: %v", err)) // xdg-go/scram never fails here
	}
	x.conv = srv.NewConversation()
	return x
}

// step answers one client message. done is true when the exchange is over;
// user is set once the client authenticated. An error ends the exchange:
// the client is told it failed.
func (x *scramExchange) step(ctx context.Context, msg []byte) (reply []byte, done bool, user string, err error) {
	x.ctx = ctx
	out, err := x.conv.Step(string(msg))
	x.ctx = nil
	switch {
	case x.storeErr != nil:
		return nil, true, "", fmt.Errorf("%w: %w", errCredentialStore, x.storeErr)
	case err != nil:
		return nil, true, "", errAuthFailed
	case !x.conv.Done():
		return []byte(out), false, "", nil
	case !x.conv.Valid() || x.decoy:
		return nil, true, "", errAuthFailed
	case x.conv.AuthzID() != "" && x.conv.AuthzID() != x.conv.Username():
		return nil, true, "", errAuthzID
	}
	return []byte(out), true, x.conv.Username(), nil
}
