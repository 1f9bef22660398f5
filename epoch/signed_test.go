package epoch_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/internal/fencetest"
)

// TestGrantMessageInjective: two different grants never give the same
// signed bytes, or one grant's signature would pass for another's.
func TestGrantMessageInjective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.Custom(func(t *rapid.T) epoch.Grant {
			var id [16]byte
			copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "topic"))
			return epoch.Grant{
				Group:     rapid.StringOf(rapid.RuneFrom([]rune{'a', 'b', 0, 0x80})).Draw(t, "group"),
				TopicID:   id,
				Partition: epoch.Partition(rapid.Int32Range(-2, 3).Draw(t, "partition")),
				Token:     epoch.Token(rapid.Int64Range(-2, 3).Draw(t, "token")),
				Member:    rapid.StringOf(rapid.RuneFrom([]rune{'a', 'b', 0, 0x80})).Draw(t, "member"),
			}
		})
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		if a != b && bytes.Equal(a.AppendMessage(nil), b.AppendMessage(nil)) {
			t.Fatalf("%+v and %+v sign the same bytes", a, b)
		}
	})
}

func TestSignedTokenText(t *testing.T) {
	k := fencetest.NewKeys(t)
	for _, st := range []epoch.SignedToken{
		{Token: 7},
		fencetest.Grant(k.Active, 3, 12, "29wFeLIn1u3SQasiuJ2nnw"),
		fencetest.Grant(k.Old, 0, 1, "a.b/c\x00"),
	} {
		b, err := st.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got epoch.SignedToken
		if err := got.UnmarshalText(b); err != nil {
			t.Fatalf("UnmarshalText(%s): %v", b, err)
		}
		if got != st {
			t.Fatalf("round trip of %q = %+v, want %+v", b, got, st)
		}
	}
	for _, bad := range []string{"", "x", "7.", "7.a.b.c", "7.0123456789abcdef.bWU.c2ln", "7.0123456789ABCDEF.bWU." + string(bytes.Repeat([]byte("A"), 86))} {
		var st epoch.SignedToken
		if err := st.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) = %+v, want an error", bad, st)
		}
	}
}

func TestKeySetJSON(t *testing.T) {
	k := fencetest.NewKeys(t)
	b, err := k.Set.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := epoch.ParseKeySet(b)
	if err != nil {
		t.Fatalf("ParseKeySet(%s): %v", b, err)
	}
	want := k.Set.Keys()
	have := got.Keys()
	if len(have) != len(want) {
		t.Fatalf("got %d keys, want %d", len(have), len(want))
	}
	for i := range want {
		w, h := want[i], have[i]
		if h.ID != w.ID || !bytes.Equal(h.Key, w.Key) || h.State != w.State || !h.Created.Equal(w.Created) ||
			!h.Retired.Equal(w.Retired) || !h.Revoked.Equal(w.Revoked) {
			t.Errorf("key %d = %+v, want %+v", i, h, w)
		}
	}
	if a, ok := got.Active(); !ok || a.ID != k.Active.ID() {
		t.Errorf("Active() = %v, %v; want %s", a.ID, ok, k.Active.ID())
	}
}

func TestKeySetRefuses(t *testing.T) {
	k := fencetest.NewKeys(t)
	good := epoch.PublicKey{ID: k.Active.ID(), Key: k.Active.Public(), State: epoch.KeyActive}
	other := epoch.PublicKey{ID: k.Old.ID(), Key: k.Old.Public(), State: epoch.KeyActive}
	for name, keys := range map[string][]epoch.PublicKey{
		"wrong ID":        {{ID: k.Old.ID(), Key: k.Active.Public(), State: epoch.KeyActive}},
		"short key":       {{ID: k.Active.ID(), Key: k.Active.Public()[:31], State: epoch.KeyActive}},
		"no state":        {{ID: k.Active.ID(), Key: k.Active.Public()}},
		"twice":           {good, good},
		"two active keys": {good, other},
		"two pending keys": {{ID: k.Active.ID(), Key: k.Active.Public(), State: epoch.KeyPending},
			{ID: k.Old.ID(), Key: k.Old.Public(), State: epoch.KeyPending}},
		"state out of set": {{ID: k.Active.ID(), Key: k.Active.Public(), State: 9}},
	} {
		if _, err := epoch.NewKeySet(keys); err == nil {
			t.Errorf("%s: NewKeySet succeeded", name)
		}
	}
	for name, js := range map[string]string{
		"not JSON":      `{`,
		"bad algorithm": `{"keys":[{"id":"0123456789abcdef","algorithm":"RSA","public_key":"","state":"active"}]}`,
		"bad ID":        `{"keys":[{"id":"xyz","algorithm":"Ed25519","public_key":"","state":"active"}]}`,
		"bad state":     `{"keys":[{"id":"0123456789abcdef","algorithm":"Ed25519","public_key":"","state":"resting"}]}`,
	} {
		if _, err := epoch.ParseKeySet([]byte(js)); err == nil {
			t.Errorf("%s: ParseKeySet succeeded", name)
		}
	}
}

// TestMemFenceAttacks runs the attack table against MemFence.
func TestMemFenceAttacks(t *testing.T) {
	fencetest.Attacks(t, func(t *testing.T, v *epoch.Verifier) fencetest.Target {
		f := epoch.NewMemFence(v)
		ctx := context.Background()
		return fencetest.Target{
			Admit:       func(p epoch.Partition, tok epoch.Token) error { return f.Admit(ctx, p, tok) },
			AdmitSigned: func(p epoch.Partition, st epoch.SignedToken) error { return f.AdmitSigned(ctx, p, st) },
			Current:     f.Current,
		}
	})
}

// TestVerifierRevocationReachesCache: a token verified (and cached) under
// one key set is refused once a new set revokes its key, and a set that
// no longer lists the key at all makes it unknown.
func TestVerifierRevocationReachesCache(t *testing.T) {
	k := fencetest.NewKeys(t)
	v := k.Verifier()
	st := fencetest.Grant(k.Old, 3, 7, "bob")
	for range 2 {
		if err := v.Verify(3, st); err != nil {
			t.Fatalf("Verify of the retired key's token: %v", err)
		}
	}
	keys := k.Set.Keys()
	for i := range keys {
		if keys[i].ID == k.Old.ID() {
			keys[i].State = epoch.KeyRevoked
		}
	}
	revoked, err := epoch.NewKeySet(keys)
	if err != nil {
		t.Fatal(err)
	}
	v.SetKeys(revoked)
	fencetest.WantRefused(t, v.Verify(3, st), epoch.ErrRevokedKey)
	v.SetKeys(nil)
	fencetest.WantRefused(t, v.Verify(3, st), epoch.ErrUnknownKey)
}

// TestPendingKeyVerifies: a key published before it signs (a rotation's
// next key) is in the set's JSON as "pending" and verifies, so a resource
// that fetched the set during the publish delay admits the first tokens
// the key signs; the set still has one active key.
func TestPendingKeyVerifies(t *testing.T) {
	k := fencetest.NewKeys(t)
	keys := append(k.Set.Keys(), epoch.PublicKey{ID: k.Stranger.ID(), Key: k.Stranger.Public(), State: epoch.KeyPending,
		Created: time.Date(2026, 3, 1, 5, 0, 0, 0, time.UTC)})
	set, err := epoch.NewKeySet(keys)
	if err != nil {
		t.Fatal(err)
	}
	b, err := set.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"state":"pending"`)) {
		t.Fatalf("the pending key is not published as pending: %s", b)
	}
	parsed, err := epoch.ParseKeySet(b)
	if err != nil {
		t.Fatalf("ParseKeySet(%s): %v", b, err)
	}
	if p, ok := parsed.Lookup(k.Stranger.ID()); !ok || p.State != epoch.KeyPending {
		t.Fatalf("the pending key read back as %+v, %v", p, ok)
	}
	if a, _ := parsed.Active(); a.ID != k.Active.ID() {
		t.Fatalf("Active() = %s, want %s: a pending key is not the active one", a.ID, k.Active.ID())
	}
	v := epoch.NewVerifier(epoch.VerifierConfig{Group: fencetest.Group, TopicID: fencetest.Topic, Keys: parsed, RequireSigned: true})
	if err := v.Verify(3, fencetest.Grant(k.Stranger, 3, 4, "bob")); err != nil {
		t.Fatalf("a token of the pending key: %v", err)
	}
	if st, err := epoch.ParseKeyState("pending"); err != nil || st != epoch.KeyPending || st.String() != "pending" {
		t.Fatalf("ParseKeyState(pending) = %v, %v", st, err)
	}
}

// TestVerifierOptional: without RequireSigned, plain tokens pass and
// signed ones are still checked; a nil verifier passes everything.
func TestVerifierOptional(t *testing.T) {
	k := fencetest.NewKeys(t)
	v := epoch.NewVerifier(epoch.VerifierConfig{Group: fencetest.Group, TopicID: fencetest.Topic, Keys: k.Set})
	if err := v.Verify(3, epoch.SignedToken{Token: 4}); err != nil {
		t.Errorf("unsigned, not required: %v", err)
	}
	fencetest.WantRefused(t, v.Verify(3, fencetest.Grant(k.Stranger, 3, 4, "x")), epoch.ErrUnknownKey)
	var none *epoch.Verifier
	if err := none.Verify(3, fencetest.Grant(k.Stranger, 3, 4, "x")); err != nil {
		t.Errorf("nil verifier: %v", err)
	}
	var f epoch.MemFence // the zero fence takes the token alone
	if err := f.AdmitSigned(context.Background(), 3, fencetest.Grant(k.Stranger, 3, 4, "x")); err != nil {
		t.Errorf("MemFence without a verifier: %v", err)
	}
}

// TestVerifiedAdmitDoesNotAllocate: a cached token costs no allocation,
// in a sparse partition too once seen.
func TestVerifiedAdmitDoesNotAllocate(t *testing.T) {
	k := fencetest.NewKeys(t)
	f := epoch.NewMemFence(k.Verifier())
	ctx := context.Background()
	for _, p := range []epoch.Partition{3, 100000} {
		st := fencetest.Grant(k.Active, p, 9, "bob")
		if err := f.AdmitSigned(ctx, p, st); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() {
			if err := f.AdmitSigned(ctx, p, st); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("partition %d: %v allocations per cached admission, want 0", p, n)
		}
	}
}

// TestVerifiedFenceProperty drives a verified MemFence with honest grants
// (signed for the partition, rising tokens per owner) mixed with forgeries
// (every kind of the attack table, at any token): no forgery is ever
// admitted or moves the fence, and the fence behaves on the honest writes
// exactly as the plain model does.
func TestVerifiedFenceProperty(t *testing.T) {
	k := fencetest.NewKeys(t)
	rapid.Check(t, func(t *rapid.T) {
		f := epoch.NewMemFence(k.Verifier())
		m := fencetest.Model{}
		ctx := context.Background()
		for range rapid.IntRange(1, 60).Draw(t, "n") {
			p := epoch.Partition(rapid.IntRange(0, 2).Draw(t, "partition"))
			tok := epoch.Token(rapid.Int64Range(1, 12).Draw(t, "token"))
			signer := rapid.SampledFrom([]*epoch.Signer{k.Active, k.Old}).Draw(t, "signer")
			honest := fencetest.Grant(signer, p, tok, "m")
			kind := rapid.IntRange(0, 6).Draw(t, "kind")
			var st epoch.SignedToken
			switch kind {
			case 0:
				st = honest
			case 1: // another partition's
				st = fencetest.Grant(signer, p+1, tok, "m")
			case 2: // a stranger's key
				st = fencetest.Grant(k.Stranger, p, tok, "m")
			case 3: // a revoked key
				st = fencetest.Grant(k.Revoked, p, tok, "m")
			case 4: // a raised token under an honest signature
				st = honest
				st.Token += epoch.Token(rapid.Int64Range(1, 5).Draw(t, "raise"))
			case 5: // another member
				st = honest
				st.Member = "n"
			case 6: // unsigned
				st = epoch.SignedToken{Token: tok}
			}
			before := f.Current(p)
			err := f.AdmitSigned(ctx, p, st)
			if kind != 0 {
				if !errors.Is(err, epoch.ErrUnverified) {
					t.Fatalf("forgery %d %+v for %d: %v, want ErrUnverified", kind, st, p, err)
				}
				if f.Current(p) != before {
					t.Fatalf("forgery %d moved partition %d from %v to %v", kind, p, before, f.Current(p))
				}
				continue
			}
			if _, want := m.Check(p, tok, err); want != "" {
				t.Fatalf("AdmitSigned(%d, %v) = %v, model wants %s", p, tok, err, want)
			}
		}
	})
}

// BenchmarkMemFenceVerified compares MemFence.Admit with AdmitSigned
// through a verifier, in alternating batches of one run
// (fencetest.CompareVerified): the steady state of an owner's writes, the
// token cached after its first check.
//
//	go test -run '^$' -bench BenchmarkMemFenceVerified -benchtime 200x ./epoch/
func BenchmarkMemFenceVerified(b *testing.B) {
	k := fencetest.NewKeys(b)
	ctx := context.Background()
	var off epoch.MemFence
	on := epoch.NewMemFence(k.Verifier())
	st := fencetest.Grant(k.Active, 3, 9, "bob")
	fencetest.CompareVerified(b, 10000,
		func() error { return off.Admit(ctx, 3, 9) },
		func() error { return on.AdmitSigned(ctx, 3, st) })
}

// BenchmarkVerifyUncached is one signature check: what the first write
// under a token pays.
func BenchmarkVerifyUncached(b *testing.B) {
	k := fencetest.NewKeys(b)
	v := k.Verifier()
	st := fencetest.Grant(k.Active, 3, 9, "bob")
	same, err := epoch.NewKeySet(k.Set.Keys())
	if err != nil {
		b.Fatal(err)
	}
	sets := [2]*epoch.KeySet{k.Set, same}
	for i := 0; b.Loop(); i++ {
		v.SetKeys(sets[i%2]) // a new set empties the cache
		if err := v.Verify(3, st); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAttacksLandWithoutVerifier is the control of the attack table: a
// fence without a verifier admits the invented token and is moved by it,
// after which the honest owner is refused. The table's refusals are the
// verifier's doing.
func TestAttacksLandWithoutVerifier(t *testing.T) {
	k := fencetest.NewKeys(t)
	var f epoch.MemFence
	ctx := context.Background()
	honest := fencetest.Grant(k.Active, 3, 10, "bob")
	if err := f.AdmitSigned(ctx, 3, honest); err != nil {
		t.Fatal(err)
	}
	if err := f.AdmitSigned(ctx, 3, fencetest.Grant(k.Stranger, 3, 1000, "mallory")); err != nil {
		t.Fatalf("the forgery: %v, want it admitted by a fence that cannot tell", err)
	}
	if err := f.AdmitSigned(ctx, 3, honest); !errors.Is(err, epoch.ErrStale) {
		t.Fatalf("the honest owner after the forgery: %v, want ErrStale (bricked)", err)
	}
}
