package epoch

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
)

// ErrUnverified is wrapped by every refusal of a token whose issue a
// fence's [Verifier] cannot prove: unsigned where a signature is required,
// signed by a key it does not know or that was revoked, or signed for
// something else. It is distinct from [ErrStale]: the token is not old, it
// was never issued for this partition (or its proof is gone). The error is
// a [*VerifyError] wrapping one of ErrUnsigned, ErrUnknownKey,
// ErrRevokedKey or ErrBadSignature too, which says why. A refused token
// changes nothing at the fence.
var ErrUnverified = errors.New("epoch: token not verified as issued")

// The reasons for ErrUnverified.
var (
	// ErrUnsigned: the token carries no signature and the verifier
	// requires one (VerifierConfig.RequireSigned).
	ErrUnsigned = errors.New("epoch: token is unsigned")
	// ErrUnknownKey: the key that signed it is not in the verifier's set.
	ErrUnknownKey = errors.New("epoch: token signed by an unknown key")
	// ErrRevokedKey: the key that signed it was revoked.
	ErrRevokedKey = errors.New("epoch: token signed by a revoked key")
	// ErrBadSignature: the signature is not the key's over this group,
	// topic, partition, token and member: tampered with, or made for
	// another grant.
	ErrBadSignature = errors.New("epoch: bad signature")
)

// VerifyError says which token a verifier refused and why. It wraps
// [ErrUnverified] and the reason (ErrUnsigned, ErrUnknownKey,
// ErrRevokedKey or ErrBadSignature).
type VerifyError struct {
	Partition Partition
	Token     SignedToken
	Reason    error
}

func (e *VerifyError) Error() string {
	s := "epoch: token " + e.Token.String() + " for partition " + strconv.Itoa(int(e.Partition))
	if e.Token.Member != "" {
		s += " of member " + strconv.Quote(e.Token.Member)
	}
	return s + " refused: " + e.Reason.Error()
}

// Unwrap returns ErrUnverified and the reason.
func (e *VerifyError) Unwrap() []error { return []error{ErrUnverified, e.Reason} }

// VerifierConfig configures a [Verifier]: a fence guards the partitions of
// one topic of one group, and admits only tokens signed for them.
type VerifierConfig struct {
	// Group is the group whose tokens the fence admits.
	Group string
	// TopicID is the ID of the topic whose partitions the fence guards,
	// as the coordinator names it (Metadata v10+, `tenure topics list`).
	TopicID [16]byte
	// Keys are the public keys to verify with; SetKeys replaces them when
	// the coordinator rotates. Nil verifies nothing: every signed token
	// is ErrUnknownKey.
	Keys *KeySet
	// RequireSigned refuses unsigned tokens (ErrUnsigned). Without it an
	// unsigned token is admitted as a fence without a verifier admits it,
	// which lets a resource move to signed tokens while some writers
	// still send plain ones; a signed token is verified either way.
	RequireSigned bool
}

// Verifier checks that tokens were issued by the coordinator for one
// group's partitions of one topic, and remembers, per partition, the last
// token it verified, so that an owner's stream of writes under one token
// pays for one signature check (tens of microseconds) and then for a
// comparison. It is safe for concurrent use; fences share it.
//
// The cache holds only tokens that verified, and is emptied by SetKeys:
// a token of a key that a new set revokes is checked again, and refused.
type Verifier struct {
	group    string
	topicID  [16]byte
	required bool
	keys     atomic.Pointer[KeySet]

	dense  [DenseLimit]verifiedSlot
	sparse sync.Map // Partition -> *verifiedSlot
}

// verified is a token that verified under the key set ks.
type verified struct {
	st SignedToken
	ks *KeySet
}

type verifiedSlot struct {
	p atomic.Pointer[verified]
	_ [cacheLine - 8]byte
}

// NewVerifier returns a verifier for cfg.
func NewVerifier(cfg VerifierConfig) *Verifier {
	v := &Verifier{group: cfg.Group, topicID: cfg.TopicID, required: cfg.RequireSigned}
	if cfg.Keys == nil {
		cfg.Keys = &KeySet{}
	}
	v.keys.Store(cfg.Keys)
	return v
}

// SetKeys replaces the verifier's key set (after a rotation or a
// revocation). Every token is checked anew under it.
func (v *Verifier) SetKeys(ks *KeySet) {
	if ks == nil {
		ks = &KeySet{}
	}
	v.keys.Store(ks)
}

// Keys returns the verifier's key set.
func (v *Verifier) Keys() *KeySet { return v.keys.Load() }

// RequiresSigned reports whether unsigned tokens are refused.
func (v *Verifier) RequiresSigned() bool { return v != nil && v.required }

// Verify returns nil if st was issued for partition p of the verifier's
// group and topic (or st is unsigned and signatures are not required), and
// a [*VerifyError] wrapping [ErrUnverified] otherwise. A nil Verifier
// verifies everything: it is the fence without one.
func (v *Verifier) Verify(p Partition, st SignedToken) error {
	if v == nil {
		return nil
	}
	// The fast path (small enough to inline): the partition's last
	// verified token, under the current key set.
	if uint32(p) < DenseLimit {
		if e := v.dense[p].p.Load(); e != nil && e.st == st && e.ks == v.keys.Load() {
			return nil
		}
	}
	return v.verify(p, st)
}

// verify is Verify past the dense cache.
func (v *Verifier) verify(p Partition, st SignedToken) error {
	if !st.Signed() {
		return v.CheckUnsigned(p, st.Token)
	}
	ks := v.keys.Load()
	slot := v.slot(p)
	if e := slot.Load(); e != nil && e.ks == ks && e.st == st {
		return nil
	}
	k, ok := ks.Lookup(st.Key)
	var reason error
	switch {
	case !ok:
		reason = ErrUnknownKey
	case k.State == KeyRevoked:
		reason = ErrRevokedKey
	case len(st.Sig) != ed25519.SignatureSize:
		reason = ErrBadSignature
	default:
		var buf [128]byte
		msg := Grant{Group: v.group, TopicID: v.topicID, Partition: p, Token: st.Token, Member: st.Member}.AppendMessage(buf[:0])
		if !ed25519.Verify(k.Key, msg, []byte(st.Sig)) {
			reason = ErrBadSignature
		}
	}
	if reason != nil {
		return &VerifyError{Partition: p, Token: st, Reason: reason}
	}
	slot.Store(&verified{st: st, ks: ks})
	return nil
}

// CheckUnsigned returns nil unless the verifier requires signatures, in
// which case the plain token t is refused with [ErrUnsigned]. A nil
// Verifier requires nothing.
func (v *Verifier) CheckUnsigned(p Partition, t Token) error {
	if v == nil || !v.required {
		return nil
	}
	return &VerifyError{Partition: p, Token: SignedToken{Token: t}, Reason: ErrUnsigned}
}

// slot returns the cache cell of partition p.
func (v *Verifier) slot(p Partition) *atomic.Pointer[verified] {
	if uint32(p) < DenseLimit {
		return &v.dense[p].p
	}
	if s, ok := v.sparse.Load(p); ok {
		return &s.(*verifiedSlot).p
	}
	s, _ := v.sparse.LoadOrStore(p, new(verifiedSlot))
	return &s.(*verifiedSlot).p
}

// SignedFence is a [Fence] that also admits signed tokens, checking them
// with its [Verifier] (if it has one) before anything else: a token that
// does not verify is refused with an error wrapping [ErrUnverified] and
// changes nothing. MemFence, etcdfence.Fence and sqlfence.Fence implement
// it. A fence whose verifier requires signatures refuses every token
// given to Admit with [ErrUnsigned].
type SignedFence interface {
	Fence
	AdmitSigned(ctx context.Context, partition Partition, token SignedToken) error
}
