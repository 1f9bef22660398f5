package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
)

// Credential is one user's SCRAM credential for one mechanism, as RFC 5802
// has a server keep it: the salt and iteration count of the salted
// password, and the two keys derived from it. It holds no password, and no
// salted password: StoredKey lets the server check a client's proof,
// ServerKey lets it prove itself, and neither lets anyone authenticate as
// the user.
type Credential struct {
	User       string
	Mechanism  string // "SCRAM-SHA-256" or "SCRAM-SHA-512"
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
	// Deleted, in AlterCredentials, deletes the credential of User and
	// Mechanism instead of writing it.
	Deleted bool
}

// CredentialStore keeps the SASL users' SCRAM credentials. Every node of
// an HA set shares one (etcdstore.Users), apart from the leader's guarded
// group store: a credential does not depend on who leads. Both stores
// implement it.
type CredentialStore interface {
	// Credential returns user's credential for mechanism, or
	// ErrNoCredential.
	Credential(ctx context.Context, user, mechanism string) (*Credential, error)
	// Credentials returns every credential, sorted by user and mechanism.
	Credentials(ctx context.Context) ([]*Credential, error)
	// AlterCredentials writes creds (those with Deleted set are deleted;
	// a deletion of a credential that does not exist does nothing) in one
	// atomic step.
	AlterCredentials(ctx context.Context, creds []*Credential) error
}

// ErrNoCredential is returned by CredentialStore.Credential for a user
// without a credential of the mechanism.
var ErrNoCredential = errors.New("store: no such credential")

// SortCredentials sorts creds by user, then mechanism: the order of
// CredentialStore.Credentials.
func SortCredentials(creds []*Credential) {
	slices.SortFunc(creds, func(a, b *Credential) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
}
