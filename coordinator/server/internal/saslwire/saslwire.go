// Package saslwire reads what a SASL client sends before it is
// authenticated: PLAIN messages, and the SCRAM conversation (on
// xdg-go/scram). It is a package of its own, with nothing of the server,
// so that its fuzz targets run fast enough for long campaigns.
package saslwire

import (
	"bytes"
	"context"
	"fmt"

	"github.com/xdg-go/scram"
)

// Error is an authentication failure as the client is told of it, in
// Kafka's words.
type Error string

func (e Error) Error() string { return string(e) }

// The failures a client is told of.
const (
	// ErrAuthFailed: a wrong password and an unknown user are not told
	// apart.
	ErrAuthFailed      Error = "Authentication failed: Invalid username or password"
	ErrPlainTokens     Error = "Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens"
	ErrPlainNoUser     Error = "Authentication failed: username not specified"
	ErrPlainNoPass     Error = "Authentication failed: password not specified"
	ErrAuthzID         Error = "Authentication failed: Client requested an authorization id that is different from username"
	ErrCredentialStore Error = "Authentication failed: the credential store is unavailable"
)

// ParsePlain splits a PLAIN message (RFC 4616: authzid NUL authcid NUL
// passwd) as Kafka's PlainSaslServer does: exactly three fields, a
// username and a password that are not empty, and an authorization ID
// that is empty or the username.
func ParsePlain(msg []byte) (user, password string, err error) {
	fields := bytes.Split(msg, []byte{0})
	switch {
	case len(fields) != 3:
		return "", "", ErrPlainTokens
	case len(fields[1]) == 0:
		return "", "", ErrPlainNoUser
	case len(fields[2]) == 0:
		return "", "", ErrPlainNoPass
	case len(fields[0]) != 0 && !bytes.Equal(fields[0], fields[1]):
		return "", "", ErrAuthzID
	}
	return string(fields[1]), string(fields[2]), nil
}

// Lookup returns a user's stored SCRAM credential. decoy says the user
// has none and cred was made up, so that the exchange fails at its end,
// after the same work as for a wrong password.
type Lookup func(ctx context.Context, user string) (cred scram.StoredCredentials, decoy bool, err error)

// Exchange is the server side of one SCRAM authentication.
type Exchange struct {
	conv     *scram.ServerConversation
	ctx      context.Context // the current step's, for the lookup
	decoy    bool
	storeErr error

	// For finalPrefixedNonce (nonce.go).
	hash                         scram.HashGeneratorFcn
	cred                         *scram.StoredCredentials
	step                         int
	clientFirstBare, serverFirst string
	clientNonce, serverNonce     string
}

// NewExchange starts a SCRAM authentication with hash (scram.SHA256,
// scram.SHA512); lookup runs inside the first step, bounded by its ctx.
func NewExchange(hash scram.HashGeneratorFcn, lookup Lookup) *Exchange {
	x := &Exchange{hash: hash}
	srv, err := hash.NewServer(func(user string) (scram.StoredCredentials, error) {
		cred, decoy, err := lookup(x.ctx, user)
		x.decoy, x.storeErr = decoy, err
		if err == nil {
			x.cred = &cred
		}
		return cred, err
	})
	if err != nil {
		panic(fmt.Sprintf("saslwire: SCRAM server: %v", err)) // xdg-go/scram never fails here
	}
	x.conv = srv.NewConversation()
	return x
}

// Step answers one client message. done is true when the exchange is
// over; user is set once the client authenticated. An error ends the
// exchange: the client is told it failed.
func (x *Exchange) Step(ctx context.Context, msg []byte) (reply []byte, done bool, user string, err error) {
	x.ctx = ctx
	x.step++
	if x.step == 2 && !x.decoy && x.storeErr == nil && (x.conv.AuthzID() == "" || x.conv.AuthzID() == x.conv.Username()) {
		if reply, ok := x.finalPrefixedNonce(string(msg)); ok {
			x.ctx = nil
			return []byte(reply), true, x.conv.Username(), nil
		}
	}
	out, err := x.conv.Step(string(msg))
	x.ctx = nil
	if x.step == 1 && err == nil {
		x.first(string(msg), out)
	}
	switch {
	case x.storeErr != nil:
		return nil, true, "", fmt.Errorf("%w: %w", ErrCredentialStore, x.storeErr)
	case err != nil:
		return nil, true, "", ErrAuthFailed
	case !x.conv.Done():
		return []byte(out), false, "", nil
	case !x.conv.Valid() || x.decoy:
		return nil, true, "", ErrAuthFailed
	case x.conv.AuthzID() != "" && x.conv.AuthzID() != x.conv.Username():
		return nil, true, "", ErrAuthzID
	}
	return []byte(out), true, x.conv.Username(), nil
}
