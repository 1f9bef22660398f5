package fencetest

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// The attack table: the writes a fence with a verifier must refuse, each
// leaving the fence where it was, with the honest owner's next write still
// admitted. Every fence implementation runs it (Attacks).

// Keys are fixed signing keys for tests: Old is retired, Active signs,
// Revoked was revoked, and Stranger is a key the fence never heard of.
type Keys struct {
	Old, Active, Revoked, Stranger *epoch.Signer
	Set                            *epoch.KeySet
}

// Group and Topic are what the test keys' verifier guards.
const Group = "orders"

// Topic is the ID of the topic the test verifier guards; OtherTopic is
// another topic's.
var (
	Topic      = [16]byte{0x7e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	OtherTopic = [16]byte{0x0f, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}
)

// NewKeys returns the test keys (the same every time: the seeds are fixed).
func NewKeys(t testing.TB) Keys {
	t.Helper()
	signer := func(b byte) *epoch.Signer {
		seed := make([]byte, ed25519.SeedSize)
		for i := range seed {
			seed[i] = b + byte(i)
		}
		s, err := epoch.NewSigner(seed)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	k := Keys{Old: signer(1), Active: signer(2), Revoked: signer(3), Stranger: signer(4)}
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	set, err := epoch.NewKeySet([]epoch.PublicKey{
		{ID: k.Revoked.ID(), Key: k.Revoked.Public(), State: epoch.KeyRevoked, Created: at, Retired: at.Add(time.Hour), Revoked: at.Add(2 * time.Hour)},
		{ID: k.Old.ID(), Key: k.Old.Public(), State: epoch.KeyRetired, Created: at.Add(time.Hour), Retired: at.Add(3 * time.Hour)},
		{ID: k.Active.ID(), Key: k.Active.Public(), State: epoch.KeyActive, Created: at.Add(3 * time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	k.Set = set
	return k
}

// Verifier returns a verifier of the test group and topic over the test
// keys, requiring signatures.
func (k Keys) Verifier() *epoch.Verifier {
	return epoch.NewVerifier(epoch.VerifierConfig{Group: Group, TopicID: Topic, Keys: k.Set, RequireSigned: true})
}

// Grant signs a grant of the test group and topic with s.
func Grant(s *epoch.Signer, p epoch.Partition, tok epoch.Token, member string) epoch.SignedToken {
	return s.Sign(epoch.Grant{Group: Group, TopicID: Topic, Partition: p, Token: tok, Member: member})
}

// Target is a fence under attack, with a verifier built from NewKeys's
// Verifier: its plain and signed admissions (each the fence's own guarded
// write, with or without an effect) and a read of its current token.
type Target struct {
	Admit       func(p epoch.Partition, t epoch.Token) error
	AdmitSigned func(p epoch.Partition, t epoch.SignedToken) error
	Current     func(p epoch.Partition) epoch.Token
	// Effects, if set, counts the effects the fence's guarded writes
	// applied (a fence that guards an effect, as etcdfence.Put and
	// sqlfence.Do do): a refused write must apply none.
	Effects func() int
}

// Attack is one forged or replayed write.
type Attack struct {
	Name string
	// Plain, if set, is sent through Admit; else Token through
	// AdmitSigned.
	Plain epoch.Token
	Token epoch.SignedToken
	// Want is the error the write must wrap: epoch.ErrUnsigned,
	// ErrUnknownKey, ErrRevokedKey, ErrBadSignature (all
	// ErrUnverified), or epoch.ErrStale.
	Want error
}

// The honest history every attack runs against: partition AttackPartition
// was owned by "alice" at token 5, then by "bob" at token 10, who writes
// on; the fence stands at 10.
const (
	AttackPartition epoch.Partition = 3
	honestToken     epoch.Token     = 10
)

// Attacks returns the attack table against the honest history.
func (k Keys) Attacks() []Attack {
	const p = AttackPartition
	bob := Grant(k.Active, p, honestToken, "bob")
	flipped := []byte(bob.Sig)
	flipped[17] ^= 0x40
	return []Attack{
		{Name: "invented token above the fence, unsigned", Plain: 1000, Want: epoch.ErrUnsigned},
		{Name: "invented token above the fence, unsigned, through the signed path",
			Token: epoch.SignedToken{Token: 1000, Member: "mallory"}, Want: epoch.ErrUnsigned},
		{Name: "invented token above the fence, signed by a key nobody published",
			Token: Grant(k.Stranger, p, 1000, "mallory"), Want: epoch.ErrUnknownKey},
		{Name: "invented token above the fence, with the active key's ID and a made-up signature",
			Token: epoch.SignedToken{Token: 1000, Member: "mallory", Key: k.Active.ID(), Sig: string(make([]byte, ed25519.SignatureSize))},
			Want:  epoch.ErrBadSignature},
		{Name: "another partition's token, above the fence",
			Token: Grant(k.Active, p+4, 12, "carol"), Want: epoch.ErrBadSignature},
		{Name: "another group's token, above the fence",
			Token: k.Active.Sign(epoch.Grant{Group: "payments", TopicID: Topic, Partition: p, Token: 50, Member: "dave"}),
			Want:  epoch.ErrBadSignature},
		{Name: "another topic's token, above the fence",
			Token: k.Active.Sign(epoch.Grant{Group: Group, TopicID: OtherTopic, Partition: p, Token: 50, Member: "dave"}),
			Want:  epoch.ErrBadSignature},
		{Name: "the owner's token claimed by another member",
			Token: epoch.SignedToken{Token: bob.Token, Member: "mallory", Key: bob.Key, Sig: bob.Sig}, Want: epoch.ErrBadSignature},
		{Name: "a token of a revoked key, above the fence",
			Token: Grant(k.Revoked, p, 20, "erin"), Want: epoch.ErrRevokedKey},
		{Name: "a replayed old valid token, below the fence",
			Token: Grant(k.Active, p, 5, "alice"), Want: epoch.ErrStale},
		{Name: "a replayed old valid token of the retired key, below the fence",
			Token: Grant(k.Old, p, 5, "alice"), Want: epoch.ErrStale},
		{Name: "the owner's token with a tampered signature",
			Token: epoch.SignedToken{Token: bob.Token, Member: bob.Member, Key: bob.Key, Sig: string(flipped)}, Want: epoch.ErrBadSignature},
		{Name: "the owner's signature on a raised token",
			Token: epoch.SignedToken{Token: 99, Member: bob.Member, Key: bob.Key, Sig: bob.Sig}, Want: epoch.ErrBadSignature},
		{Name: "a truncated signature",
			Token: epoch.SignedToken{Token: bob.Token, Member: bob.Member, Key: bob.Key, Sig: bob.Sig[:40]}, Want: epoch.ErrBadSignature},
	}
}

// Attacks runs the attack table: newFence returns a fresh fence with the
// verifier it is given. For each attack the honest history is written,
// the attack is refused with its error (wrapping ErrUnverified, or
// ErrStale for a replay below the fence), the fence has not moved, the
// honest owner's next write is admitted, and so is the next owner's at a
// higher token.
func Attacks(t *testing.T, newFence func(t *testing.T, v *epoch.Verifier) Target) {
	k := NewKeys(t)
	const p = AttackPartition
	for _, a := range k.Attacks() {
		t.Run(a.Name, func(t *testing.T) {
			f := newFence(t, k.Verifier())
			for _, st := range []epoch.SignedToken{Grant(k.Old, p, 5, "alice"), Grant(k.Active, p, honestToken, "bob")} {
				if err := f.AdmitSigned(p, st); err != nil {
					t.Fatalf("honest %v: %v", st, err)
				}
			}
			var err error
			if a.Plain != epoch.None {
				err = f.Admit(p, a.Plain)
			} else {
				err = f.AdmitSigned(p, a.Token)
			}
			WantRefused(t, err, a.Want)
			if got := f.Current(p); got != honestToken {
				t.Fatalf("after the attack the fence stands at %v, want %v (unmoved)", got, honestToken)
			}
			if f.Effects != nil {
				if n := f.Effects(); n != 2 {
					t.Fatalf("%d effects applied after the two honest writes and the attack, want 2", n)
				}
			}
			if err := f.AdmitSigned(p, Grant(k.Active, p, honestToken, "bob")); err != nil {
				t.Fatalf("the honest owner's next write: %v", err)
			}
			if err := f.AdmitSigned(p, Grant(k.Active, p, honestToken+1, "carol")); err != nil {
				t.Fatalf("the next owner's first write: %v", err)
			}
			if got := f.Current(p); got != honestToken+1 {
				t.Fatalf("the fence stands at %v after the next owner's write, want %v", got, honestToken+1)
			}
		})
	}
}

// WantRefused fails t unless err wraps want, and, for the verification
// reasons, is a *epoch.VerifyError wrapping epoch.ErrUnverified and not
// epoch.ErrStale.
func WantRefused(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want one wrapping %v", err, want)
	}
	if want == epoch.ErrStale {
		if errors.Is(err, epoch.ErrUnverified) {
			t.Fatalf("err = %v: a stale token is not an unverified one", err)
		}
		return
	}
	var ve *epoch.VerifyError
	if !errors.As(err, &ve) || !errors.Is(err, epoch.ErrUnverified) || errors.Is(err, epoch.ErrStale) {
		t.Fatalf("err = %T %v, want a *epoch.VerifyError wrapping ErrUnverified and not ErrStale", err, err)
	}
}

// CompareVerified measures guarded writes without and with verification
// in one run: b.N rounds of a batch of writes each way, write
// (verification off) and verified (verification on, a signed token cached
// after its first check), in alternating order, so that the machine's load
// falls on both alike.
// It reports both rates and their ratio (on/off), the figure the fence's
// cost is judged by.
func CompareVerified(b *testing.B, batch int, write, verified func() error) {
	b.Helper()
	var took [2]time.Duration
	n := 0
	for i := 0; i < b.N; i++ {
		order := [2]int{0, 1}
		if i%2 == 1 {
			order = [2]int{1, 0} // neither always runs first
		}
		for _, j := range order {
			w := [2]func() error{write, verified}[j]
			start := time.Now()
			for range batch {
				if err := w(); err != nil {
					b.Fatal(err)
				}
			}
			took[j] += time.Since(start)
		}
		n += batch
	}
	off := float64(n) / took[0].Seconds()
	on := float64(n) / took[1].Seconds()
	b.ReportMetric(off, "off_writes/s")
	b.ReportMetric(on, "on_writes/s")
	b.ReportMetric(on/off, "on/off")
}
