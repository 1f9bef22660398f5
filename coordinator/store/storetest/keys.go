package storetest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/epoch"
)

// Keys checks a KeyStore that holds no signing key yet: an empty ring at
// version 0, a first write, reads that return what was written (times
// and seeds exactly), a write at a stale version refused with
// store.ErrKeysChanged and changing nothing, rotations and revocations
// through store.UpdateKeys, racing rotations that all land one after the
// other, staged rotations (a pending key kept with its seed, promoted
// after its delay, or revoked), and that the store keeps its own copy of
// what it is given.
func Keys(t *testing.T, ks store.KeyStore) {
	ctx := context.Background()
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	seed := func(b byte) []byte {
		s := make([]byte, ed25519.SeedSize)
		for i := range s {
			s[i] = b
		}
		return s
	}
	key := func(b byte, now time.Time) store.SigningKey {
		k, err := store.NewSigningKey(seed(b), now)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	load := func() store.KeyRing {
		t.Helper()
		r, err := ks.LoadKeys(ctx)
		if err != nil {
			t.Fatalf("LoadKeys: %v", err)
		}
		return r
	}
	same := func(got, want []store.SigningKey) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("ring of %d keys, want %d", len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if !g.Public.Equal(w.Public) || string(g.Seed) != string(w.Seed) || g.State != w.State ||
				!g.Created.Equal(w.Created) || !g.Retired.Equal(w.Retired) || !g.Revoked.Equal(w.Revoked) {
				t.Fatalf("key %d = %+v, want %+v", i, g, w)
			}
		}
	}

	if r := load(); len(r.Keys) != 0 || r.Version != 0 {
		t.Fatalf("a new store holds %+v", r)
	}
	first := []store.SigningKey{key(1, at)}
	if err := ks.StoreKeys(ctx, first, 0); err != nil {
		t.Fatalf("first StoreKeys: %v", err)
	}
	r := load()
	same(r.Keys, first)
	if r.Version == 0 {
		t.Fatal("a stored ring is at version 0")
	}
	if err := ks.StoreKeys(ctx, []store.SigningKey{key(2, at)}, 0); !errors.Is(err, store.ErrKeysChanged) {
		t.Fatalf("StoreKeys at a stale version: %v, want ErrKeysChanged", err)
	}
	same(load().Keys, first)

	// The store keeps its own copy.
	first[0].Seed[0] ^= 1
	r.Keys[0].Seed[1] ^= 1
	same(load().Keys, []store.SigningKey{key(1, at)})

	// A rotation: the old key retires without its seed.
	rotated, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
		return store.Rotate(keys, key(2, at.Add(time.Hour)), at.Add(time.Hour)), true, nil
	})
	if err != nil {
		t.Fatalf("rotate: %v", err)
	}
	same(load().Keys, rotated)
	if k := load().Keys[0]; k.State != epoch.KeyRetired || k.Seed != nil || !k.Retired.Equal(at.Add(time.Hour)) {
		t.Fatalf("the old key after a rotation: %+v", k)
	}

	// Racing rotations all land, one after the other.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
				now := at.Add(time.Duration(2+i) * time.Hour)
				return store.Rotate(keys, key(byte(10+i), now), now), true, nil
			})
			if err != nil {
				t.Errorf("racing rotation %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	keys := load().Keys
	if len(keys) != 6 {
		t.Fatalf("%d keys after six rotations' worth, want 6", len(keys))
	}
	if err := store.CheckKeys(keys); err != nil {
		t.Fatalf("after racing rotations: %v", err)
	}

	// A revocation; the active key cannot be revoked.
	old := keys[0].ID()
	if _, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
		return store.RevokeKey(keys, old, at.Add(9*time.Hour))
	}); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if k := load().Keys[0]; k.State != epoch.KeyRevoked || !k.Revoked.Equal(at.Add(9*time.Hour)) {
		t.Fatalf("revoked key: %+v", k)
	}
	// Revoking it again writes nothing and keeps the revocation's time.
	version := load().Version
	if _, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
		return store.RevokeKey(keys, old, at.Add(10*time.Hour))
	}); err != nil {
		t.Fatalf("revoking a revoked key: %v", err)
	}
	if r := load(); r.Version != version || !r.Keys[0].Revoked.Equal(at.Add(9*time.Hour)) {
		t.Fatalf("revoking a revoked key: version %d -> %d, key %+v", version, r.Version, r.Keys[0])
	}
	active, _ := store.Active(load().Keys)
	if _, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
		return store.RevokeKey(keys, active.ID(), at)
	}); !errors.Is(err, store.ErrActiveKey) {
		t.Fatalf("revoking the active key: %v, want ErrActiveKey", err)
	}
	// A staged rotation: the next key is published as pending, keeping its
	// seed; a second one is refused; it is promoted only once its delay
	// has passed, and the active key then retires without its seed.
	stage := func(b byte, now time.Time) error {
		_, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
			out, err := store.Stage(keys, key(b, now))
			return out, err == nil, err
		})
		return err
	}
	before, _ := store.Active(load().Keys)
	if err := stage(20, at.Add(10*time.Hour)); err != nil {
		t.Fatalf("stage: %v", err)
	}
	p, ok := store.Pending(load().Keys)
	if want := key(20, at.Add(10*time.Hour)); !ok || !p.Public.Equal(want.Public) || string(p.Seed) != string(want.Seed) || p.State != epoch.KeyPending {
		t.Fatalf("the staged key: %+v, %v", p, ok)
	}
	if a, _ := store.Active(load().Keys); !a.Public.Equal(before.Public) {
		t.Fatal("staging a key changed the active one")
	}
	if err := stage(21, at.Add(10*time.Hour)); !errors.Is(err, store.ErrRotationPending) {
		t.Fatalf("a second staged rotation: %v, want ErrRotationPending", err)
	}
	if _, changed := store.Promote(load().Keys, at.Add(10*time.Hour+59*time.Minute), time.Hour); changed {
		t.Fatal("Promote before the delay changed the ring")
	}
	if _, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
		out, changed := store.Promote(keys, at.Add(11*time.Hour), time.Hour)
		return out, changed, nil
	}); err != nil {
		t.Fatalf("promote: %v", err)
	}
	if a, _ := store.Active(load().Keys); !a.Public.Equal(p.Public) {
		t.Fatalf("after its delay the active key is %s, want the staged %s", a.ID(), p.ID())
	}
	for _, k := range load().Keys {
		if k.Public.Equal(before.Public) && (k.State != epoch.KeyRetired || k.Seed != nil || !k.Retired.Equal(at.Add(11*time.Hour))) {
			t.Fatalf("the key the promotion retired: %+v", k)
		}
	}
	if _, ok := store.Pending(load().Keys); ok {
		t.Fatal("a pending key left after the promotion")
	}

	// A pending key revoked: the rotation is cancelled, its seed wiped.
	if err := stage(22, at.Add(12*time.Hour)); err != nil {
		t.Fatalf("stage: %v", err)
	}
	cancelled := key(22, at).ID()
	if _, err := store.UpdateKeys(ctx, ks, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
		return store.RevokeKey(keys, cancelled, at.Add(13*time.Hour))
	}); err != nil {
		t.Fatalf("revoking the pending key: %v", err)
	}
	for _, k := range load().Keys {
		if k.ID() == cancelled && (k.State != epoch.KeyRevoked || k.Seed != nil) {
			t.Fatalf("the revoked pending key: %+v", k)
		}
	}
	if a, _ := store.Active(load().Keys); !a.Public.Equal(p.Public) {
		t.Fatal("revoking the pending key changed the active one")
	}
}
