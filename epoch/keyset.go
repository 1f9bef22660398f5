package epoch

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// KeyState is where a signing key stands in its rotation. The zero value
// is invalid.
type KeyState uint8

const (
	_ KeyState = iota
	// KeyActive signs every new grant and verifies. A key set has at most
	// one.
	KeyActive
	// KeyRetired no longer signs, and still verifies: the tokens it signed
	// may still be held.
	KeyRetired
	// KeyRevoked verifies nothing: a token it signed is refused with
	// [ErrRevokedKey].
	KeyRevoked
	// KeyPending is published and verifies, but does not sign yet: a
	// rotation publishes the next key for a while before it becomes
	// active, so that resources that fetch the key set now and then hold
	// it before the first token it signs reaches them. A key set has at
	// most one.
	KeyPending
)

var keyStateNames = [...]string{KeyActive: "active", KeyRetired: "retired", KeyRevoked: "revoked", KeyPending: "pending"}

func (s KeyState) String() string {
	if int(s) < len(keyStateNames) && keyStateNames[s] != "" {
		return keyStateNames[s]
	}
	return "KeyState(" + fmt.Sprint(uint8(s)) + ")"
}

// ParseKeyState is the inverse of [KeyState.String].
func ParseKeyState(s string) (KeyState, error) {
	for st, name := range keyStateNames {
		if name != "" && name == s {
			return KeyState(st), nil
		}
	}
	return 0, fmt.Errorf("epoch: key state %q is not pending, active, retired or revoked", s)
}

// PublicKey is one signing key as the coordinator publishes it: its
// public half, its state, and when it entered each state (zero times for
// states it has not reached). The times are for people; verification
// looks only at the state.
type PublicKey struct {
	ID      KeyID
	Key     ed25519.PublicKey
	State   KeyState
	Created time.Time
	Retired time.Time
	Revoked time.Time
}

// KeySet is a set of public keys, what a [Verifier] checks signatures
// against. It is immutable: a rotation publishes a new set.
type KeySet struct {
	keys []PublicKey // by creation, then ID
	byID map[KeyID]*PublicKey
}

// NewKeySet returns the set of keys. Each key's ID must be [KeyIDOf] its
// public key, no ID may appear twice, every state must be valid, and at
// most one key may be active and one pending.
func NewKeySet(keys []PublicKey) (*KeySet, error) {
	ks := &KeySet{keys: slices.Clone(keys), byID: make(map[KeyID]*PublicKey, len(keys))}
	slices.SortFunc(ks.keys, func(a, b PublicKey) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
	var count [len(keyStateNames)]int
	for i := range ks.keys {
		k := &ks.keys[i]
		switch {
		case len(k.Key) != ed25519.PublicKeySize:
			return nil, fmt.Errorf("epoch: key %s: a public key is %d bytes, not %d", k.ID, ed25519.PublicKeySize, len(k.Key))
		case KeyIDOf(k.Key) != k.ID:
			return nil, fmt.Errorf("epoch: key %s: its ID is %s", k.ID, KeyIDOf(k.Key))
		case k.State < KeyActive || k.State > KeyPending:
			return nil, fmt.Errorf("epoch: key %s: invalid state %v", k.ID, k.State)
		case ks.byID[k.ID] != nil:
			return nil, fmt.Errorf("epoch: key %s appears twice", k.ID)
		}
		count[k.State]++
		k.Key = slices.Clone(k.Key)
		ks.byID[k.ID] = k
	}
	for _, st := range []KeyState{KeyActive, KeyPending} {
		if count[st] > 1 {
			return nil, fmt.Errorf("epoch: %d %v keys; a key set has at most one", count[st], st)
		}
	}
	return ks, nil
}

// Keys returns the keys, oldest first.
func (ks *KeySet) Keys() []PublicKey {
	if ks == nil {
		return nil
	}
	return slices.Clone(ks.keys)
}

// Lookup returns the key of id.
func (ks *KeySet) Lookup(id KeyID) (PublicKey, bool) {
	if ks == nil {
		return PublicKey{}, false
	}
	k, ok := ks.byID[id]
	if !ok {
		return PublicKey{}, false
	}
	return *k, true
}

// Active returns the active key, if the set has one.
func (ks *KeySet) Active() (PublicKey, bool) {
	if ks == nil {
		return PublicKey{}, false
	}
	for _, k := range ks.keys {
		if k.State == KeyActive {
			return k, true
		}
	}
	return PublicKey{}, false
}

// keyJSON is a key as the admin API and `tenure keys list --output json` publish
// it: what a resource needs to build a [Verifier] (ParseKeySet reads it).
type keyJSON struct {
	ID        string     `json:"id"`
	Algorithm string     `json:"algorithm"`
	PublicKey string     `json:"public_key"` // standard base64 of the 32 bytes
	State     string     `json:"state"`
	Created   time.Time  `json:"created"`
	Retired   *time.Time `json:"retired,omitempty"`
	Revoked   *time.Time `json:"revoked,omitempty"`
}

type keySetJSON struct {
	Keys []keyJSON `json:"keys"`
}

// algorithm names the signature scheme in the published form.
const algorithm = "Ed25519"

// MarshalJSON publishes the set:
//
//	{"keys":[{"id":"3f2a…","algorithm":"Ed25519","public_key":"base64",
//	          "state":"active","created":"2026-…Z"}, …]}
//
// with "retired" and "revoked" times once a key reached them.
func (ks *KeySet) MarshalJSON() ([]byte, error) {
	out := keySetJSON{Keys: []keyJSON{}}
	if ks != nil {
		for _, k := range ks.keys {
			j := keyJSON{ID: string(k.ID), Algorithm: algorithm, PublicKey: base64.StdEncoding.EncodeToString(k.Key),
				State: k.State.String(), Created: k.Created.UTC()}
			if !k.Retired.IsZero() {
				t := k.Retired.UTC()
				j.Retired = &t
			}
			if !k.Revoked.IsZero() {
				t := k.Revoked.UTC()
				j.Revoked = &t
			}
			out.Keys = append(out.Keys, j)
		}
	}
	return json.Marshal(out)
}

// ParseKeySet reads a key set in the form MarshalJSON writes (the admin
// API's GET /api/keys, `tenure keys list --output json`). Unknown fields are
// ignored, so that a resource keeps working when the publication grows.
func ParseKeySet(data []byte) (*KeySet, error) {
	var in keySetJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("epoch: key set: %w", err)
	}
	keys := make([]PublicKey, 0, len(in.Keys))
	for _, j := range in.Keys {
		if j.Algorithm != algorithm {
			return nil, fmt.Errorf("epoch: key %s: algorithm %q, want %s", j.ID, j.Algorithm, algorithm)
		}
		id, err := ParseKeyID(j.ID)
		if err != nil {
			return nil, err
		}
		pub, err := base64.StdEncoding.DecodeString(j.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("epoch: key %s: public key: %w", j.ID, err)
		}
		st, err := ParseKeyState(j.State)
		if err != nil {
			return nil, err
		}
		k := PublicKey{ID: id, Key: pub, State: st, Created: j.Created}
		if j.Retired != nil {
			k.Retired = *j.Retired
		}
		if j.Revoked != nil {
			k.Revoked = *j.Revoked
		}
		keys = append(keys, k)
	}
	return NewKeySet(keys)
}
