package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// SigningKey is one of the coordinator's grant-signing keys (Ed25519) as
// the store keeps it. Only the active key and the pending one (which will
// sign) keep their private half (Seed): a retired key only verifies, so
// its seed is wiped when it retires, and whoever reads the store later
// cannot sign with it.
type SigningKey struct {
	Public ed25519.PublicKey
	// Seed is the private key's 32-byte seed; nil unless State is
	// epoch.KeyActive or epoch.KeyPending.
	Seed    []byte
	State   epoch.KeyState
	Created time.Time
	Retired time.Time
	Revoked time.Time
}

// ID returns the key's ID.
func (k SigningKey) ID() epoch.KeyID { return epoch.KeyIDOf(k.Public) }

// KeyRing is every signing key a store holds, oldest first, and the
// version it was read at, which a write of the ring compares.
type KeyRing struct {
	Keys []SigningKey
	// Version is the ring's version in the store; 0 when it holds none.
	Version int64
}

// KeyStore keeps the signing keys of every node of an HA set (the etcd
// store's is one key, etcdstore.Keys), so that a rotation done through any
// node, and the key that signs, survive fail-over and restart. Both stores
// implement it.
type KeyStore interface {
	// LoadKeys returns the key ring.
	LoadKeys(ctx context.Context) (KeyRing, error)
	// StoreKeys replaces the ring with keys if it is still at version
	// (0: no ring yet), and returns ErrKeysChanged, writing nothing,
	// otherwise.
	StoreKeys(ctx context.Context, keys []SigningKey, version int64) error
}

// KeyWatcher is implemented by a KeyStore that other processes write to
// (the etcd store): WatchKeys signals once the watch is in place (a
// change made before it went unseen), after the ring changes, by anyone,
// and after the watch restarted; the channel is closed once ctx ends.
type KeyWatcher interface {
	WatchKeys(ctx context.Context) <-chan struct{}
}

// ErrKeysChanged is returned by StoreKeys when another writer changed the
// ring since it was read.
var ErrKeysChanged = errors.New("store: the signing keys changed meanwhile")

// ErrNoSuchKey is returned by RevokeKey for a key the ring does not hold.
var ErrNoSuchKey = errors.New("store: no such signing key")

// ErrActiveKey is returned by RevokeKey for the active key: rotate first.
var ErrActiveKey = errors.New("store: the active key cannot be revoked; rotate first")

// ErrRotationPending is returned by Stage when the ring already holds a
// pending key: activate it (ActivatePending) or revoke it first.
var ErrRotationPending = errors.New("store: a rotation is pending")

// NewSigningKey returns an active key made from seed (32 random bytes).
func NewSigningKey(seed []byte, now time.Time) (SigningKey, error) {
	if len(seed) != ed25519.SeedSize {
		return SigningKey{}, fmt.Errorf("store: a signing key seed is %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return SigningKey{Public: pub, Seed: slices.Clone(seed), State: epoch.KeyActive, Created: now}, nil
}

// Rotate returns keys with next as the active key: the active one (if
// any) retires at now and loses its seed.
func Rotate(keys []SigningKey, next SigningKey, now time.Time) []SigningKey {
	out := make([]SigningKey, 0, len(keys)+1)
	for _, k := range keys {
		if k.State == epoch.KeyActive {
			k.State, k.Retired, k.Seed = epoch.KeyRetired, now, nil
		}
		out = append(out, k)
	}
	return append(out, next)
}

// Stage returns keys with next published as the pending key: it verifies
// from now on, and signs once Promote (or ActivatePending) makes it the
// active key. A ring that holds a pending key already is refused
// (ErrRotationPending).
func Stage(keys []SigningKey, next SigningKey) ([]SigningKey, error) {
	if p, ok := Pending(keys); ok {
		return nil, fmt.Errorf("%w: key %s, published %s", ErrRotationPending, p.ID(), p.Created.UTC().Format(time.RFC3339))
	}
	next.State = epoch.KeyPending
	return append(cloneKeys(keys), next), nil
}

// Promote makes the pending key the active one (the active one retires at
// now and loses its seed) once it has been published for delay, and
// reports whether it did.
func Promote(keys []SigningKey, now time.Time, delay time.Duration) ([]SigningKey, bool) {
	p, ok := Pending(keys)
	if !ok || now.Before(p.Created.Add(delay)) {
		return keys, false
	}
	return ActivatePending(keys, now)
}

// ActivatePending makes the pending key, if there is one, the active key
// at once, and reports whether there was one.
func ActivatePending(keys []SigningKey, now time.Time) ([]SigningKey, bool) {
	if _, ok := Pending(keys); !ok {
		return keys, false
	}
	out := cloneKeys(keys)
	for i := range out {
		k := &out[i]
		switch k.State {
		case epoch.KeyActive:
			k.State, k.Retired, k.Seed = epoch.KeyRetired, now, nil
		case epoch.KeyPending:
			k.State = epoch.KeyActive
		}
	}
	return out, true
}

// Pending returns the ring's pending key, if it has one.
func Pending(keys []SigningKey) (SigningKey, bool) {
	for _, k := range keys {
		if k.State == epoch.KeyPending {
			return k, true
		}
	}
	return SigningKey{}, false
}

// RevokeKey returns keys with the key of id revoked at now: it verifies
// nothing from then on (a pending key never signs: its rotation is
// cancelled). It reports whether that changed anything: revoking a
// revoked key does not (it keeps the time of its revocation). The active
// key cannot be revoked (ErrActiveKey).
func RevokeKey(keys []SigningKey, id epoch.KeyID, now time.Time) ([]SigningKey, bool, error) {
	out := cloneKeys(keys)
	for i := range out {
		k := &out[i]
		if k.ID() != id {
			continue
		}
		switch k.State {
		case epoch.KeyActive:
			return nil, false, fmt.Errorf("%w: %s", ErrActiveKey, id)
		case epoch.KeyRetired, epoch.KeyPending:
			k.State, k.Revoked, k.Seed = epoch.KeyRevoked, now, nil
			return out, true, nil
		}
		return out, false, nil
	}
	return nil, false, fmt.Errorf("%w: %s", ErrNoSuchKey, id)
}

// Expire revokes every key retired at least retention before now: by then
// every token it signed is dead or was signed again by the active key
// (docs/SECURITY.md). It reports whether it changed anything.
func Expire(keys []SigningKey, now time.Time, retention time.Duration) ([]SigningKey, bool) {
	out := cloneKeys(keys)
	changed := false
	for i := range out {
		k := &out[i]
		if k.State == epoch.KeyRetired && !now.Before(k.Retired.Add(retention)) {
			k.State, k.Revoked, k.Seed = epoch.KeyRevoked, now, nil
			changed = true
		}
	}
	return out, changed
}

// PublicKeys returns the ring's public keys: what verifiers get.
func PublicKeys(keys []SigningKey) (*epoch.KeySet, error) {
	pks := make([]epoch.PublicKey, len(keys))
	for i, k := range keys {
		pks[i] = epoch.PublicKey{ID: k.ID(), Key: k.Public, State: k.State, Created: k.Created, Retired: k.Retired, Revoked: k.Revoked}
	}
	return epoch.NewKeySet(pks)
}

// Active returns the ring's active key, if it has one.
func Active(keys []SigningKey) (SigningKey, bool) {
	for _, k := range keys {
		if k.State == epoch.KeyActive {
			return k, true
		}
	}
	return SigningKey{}, false
}

// CheckKeys reports what is wrong with a ring as a store reads it: a key
// whose seed does not match its public key, an active or pending key
// without a seed, a seed kept by a key that does not sign or will not, two
// active keys, two pending ones.
func CheckKeys(keys []SigningKey) error {
	active, pending := 0, 0
	for _, k := range keys {
		signs := k.State == epoch.KeyActive || k.State == epoch.KeyPending
		switch {
		case len(k.Public) != ed25519.PublicKeySize:
			return fmt.Errorf("store: signing key with a %d-byte public key", len(k.Public))
		case k.State < epoch.KeyActive || k.State > epoch.KeyPending:
			return fmt.Errorf("store: signing key %s in state %v", k.ID(), k.State)
		case signs && len(k.Seed) != ed25519.SeedSize:
			return fmt.Errorf("store: the %v signing key %s has no seed", k.State, k.ID())
		case !signs && k.Seed != nil:
			return fmt.Errorf("store: the %v signing key %s keeps its seed", k.State, k.ID())
		case k.Seed != nil && !ed25519.NewKeyFromSeed(k.Seed).Public().(ed25519.PublicKey).Equal(k.Public):
			return fmt.Errorf("store: signing key %s: the seed is another key's", k.ID())
		}
		switch k.State {
		case epoch.KeyActive:
			active++
		case epoch.KeyPending:
			pending++
		}
	}
	if active > 1 {
		return fmt.Errorf("store: %d active signing keys", active)
	}
	if pending > 1 {
		return fmt.Errorf("store: %d pending signing keys", pending)
	}
	return nil
}

// UpdateKeys reads the ring, applies fn, and writes the result if fn
// reports a change, again from the read while another writer gets in
// between (ErrKeysChanged), a few times. It returns the ring as written
// (or as read, when fn changed nothing).
func UpdateKeys(ctx context.Context, ks KeyStore, fn func(keys []SigningKey) ([]SigningKey, bool, error)) ([]SigningKey, error) {
	for range 8 {
		ring, err := ks.LoadKeys(ctx)
		if err != nil {
			return nil, err
		}
		next, changed, err := fn(ring.Keys)
		if err != nil || !changed {
			return ring.Keys, err
		}
		if err := CheckKeys(next); err != nil {
			return nil, err
		}
		err = ks.StoreKeys(ctx, next, ring.Version)
		if errors.Is(err, ErrKeysChanged) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return next, nil
	}
	return nil, fmt.Errorf("%w, again and again", ErrKeysChanged)
}

// LoadKeys implements KeyStore.
func (m *Memory) LoadKeys(context.Context) (KeyRing, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return KeyRing{}, ErrClosed
	}
	return KeyRing{Keys: cloneKeys(m.keys), Version: m.keysVersion}, nil
}

// StoreKeys implements KeyStore.
func (m *Memory) StoreKeys(_ context.Context, keys []SigningKey, version int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if version != m.keysVersion {
		return ErrKeysChanged
	}
	m.keys = cloneKeys(keys)
	m.keysVersion++
	return nil
}

// cloneKeys copies keys and their slices.
func cloneKeys(keys []SigningKey) []SigningKey {
	out := make([]SigningKey, len(keys))
	for i, k := range keys {
		k.Public, k.Seed = slices.Clone(k.Public), slices.Clone(k.Seed)
		out[i] = k
	}
	return out
}
