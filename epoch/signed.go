package epoch

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// A fence admits any token at or above the highest it has seen, so a token
// nobody issued (a bug that passes an offset where the token belongs, a
// copy of another partition's token, a hostile client) is admitted once,
// raises the fence, and from then on every honest owner is refused. A
// signed token closes that hole: the coordinator signs every ownership it
// grants, and a fence given a [Verifier] admits only tokens signed for its
// group, topic and partition by a key the coordinator published.

// Grant is what the coordinator signs when it gives a partition to a
// member: the member holds Partition of the topic TopicID, in Group, under
// Token. A signature over a Grant proves nothing about any other group,
// topic, partition, token or member.
type Grant struct {
	Group     string
	TopicID   [16]byte
	Partition Partition
	Token     Token
	Member    string
}

// grantDomain starts every signed message, so that a signature made for a
// grant can never be taken for one over anything else the same key might
// sign, nor for another version of this layout.
const grantDomain = "tenure grant v1\x00"

// AppendMessage appends the bytes a signature of g covers to dst: the
// domain, the group (length-prefixed), the topic ID, the partition and the
// token (big-endian) and the member (length-prefixed). The layout is
// injective: two different grants never give the same bytes.
func (g Grant) AppendMessage(dst []byte) []byte {
	dst = append(dst, grantDomain...)
	dst = binary.AppendUvarint(dst, uint64(len(g.Group)))
	dst = append(dst, g.Group...)
	dst = append(dst, g.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(g.Partition))
	dst = binary.BigEndian.AppendUint64(dst, uint64(g.Token))
	dst = binary.AppendUvarint(dst, uint64(len(g.Member)))
	return append(dst, g.Member...)
}

// KeyID names a signing key: the first 8 bytes of the SHA-256 of its
// Ed25519 public key, in lower-case hex (16 characters). It is derived
// from the key, so a key set cannot name a key wrongly.
type KeyID string

// keyIDLen is the length of a KeyID in bytes (hex: twice as many).
const keyIDLen = 8

// KeyIDOf returns the ID of the public key pub.
func KeyIDOf(pub ed25519.PublicKey) KeyID {
	sum := sha256.Sum256(pub)
	return KeyID(hex.EncodeToString(sum[:keyIDLen]))
}

// ParseKeyID checks that s is a key ID: 16 lower-case hex characters.
func ParseKeyID(s string) (KeyID, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != keyIDLen || hex.EncodeToString(b) != s {
		return "", fmt.Errorf("epoch: key ID %q is not %d lower-case hex characters", s, 2*keyIDLen)
	}
	return KeyID(s), nil
}

// Bytes returns the 8 bytes id stands for; nil if id is not a valid ID.
func (id KeyID) Bytes() []byte {
	b, err := hex.DecodeString(string(id))
	if err != nil || len(b) != keyIDLen {
		return nil
	}
	return b
}

// KeyIDFromBytes is the inverse of [KeyID.Bytes].
func KeyIDFromBytes(b []byte) (KeyID, error) {
	if len(b) != keyIDLen {
		return "", fmt.Errorf("epoch: a key ID is %d bytes, not %d", keyIDLen, len(b))
	}
	return KeyID(hex.EncodeToString(b)), nil
}

// SignedToken is a fencing token with the coordinator's proof that it
// issued it: the member it was granted to, the key that signed the grant,
// and the signature. [Token] alone is what fences order; the rest lets a
// fence with a [Verifier] refuse a token nobody issued for its partition.
//
// A SignedToken whose Sig is empty is unsigned: what a coordinator that
// does not sign (Kafka, kfake, tenure with signing off) gives. It is
// comparable (==) and cheap to copy: Member, Key and Sig are strings, Sig
// holding the 64 bytes of the Ed25519 signature.
type SignedToken struct {
	Token  Token
	Member string
	Key    KeyID
	Sig    string
}

// Signed reports whether s carries a signature.
func (s SignedToken) Signed() bool { return s.Sig != "" }

// String renders the token as [Token.String] does, followed by the key
// that signed it ("12 signed by 3f2a...") or " unsigned".
func (s SignedToken) String() string {
	if !s.Signed() {
		return s.Token.String() + " unsigned"
	}
	return s.Token.String() + " signed by " + string(s.Key)
}

// MarshalText renders s as "TOKEN" when unsigned, or
// "TOKEN.KEY.MEMBER.SIG" with the member and the signature in unpadded
// base64url, so that a token can travel in a header, a column or JSON.
func (s SignedToken) MarshalText() ([]byte, error) {
	b := strconv.AppendInt(nil, int64(s.Token), 10)
	if !s.Signed() {
		return b, nil
	}
	b = append(b, '.')
	b = append(b, s.Key...)
	b = append(b, '.')
	b = base64.RawURLEncoding.AppendEncode(b, []byte(s.Member))
	b = append(b, '.')
	return base64.RawURLEncoding.AppendEncode(b, []byte(s.Sig)), nil
}

// UnmarshalText parses what MarshalText renders. It checks the form only:
// whether the signature is good is a [Verifier]'s to say.
func (s *SignedToken) UnmarshalText(text []byte) error {
	parts := strings.Split(string(text), ".")
	t, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return fmt.Errorf("epoch: token %q: %w", text, err)
	}
	switch len(parts) {
	case 1:
		*s = SignedToken{Token: Token(t)}
		return nil
	case 4:
	default:
		return fmt.Errorf("epoch: token %q: want TOKEN or TOKEN.KEY.MEMBER.SIG", text)
	}
	key, err := ParseKeyID(parts[1])
	if err != nil {
		return err
	}
	member, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("epoch: token %q: member: %w", text, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("epoch: token %q: the signature is not %d bytes of base64url", text, ed25519.SignatureSize)
	}
	*s = SignedToken{Token: Token(t), Member: string(member), Key: key, Sig: string(sig)}
	return nil
}

// Signer signs grants with one Ed25519 private key. Signing is
// deterministic (the same grant always gets the same signature) and does
// no I/O. A Signer is safe for concurrent use.
type Signer struct {
	id   KeyID
	priv ed25519.PrivateKey
}

// NewSigner returns a Signer for the private key of seed (the 32-byte
// seed of RFC 8032, as ed25519.NewKeyFromSeed takes it).
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("epoch: a signing key seed is %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &Signer{id: KeyIDOf(priv.Public().(ed25519.PublicKey)), priv: priv}, nil
}

// ID returns the ID of the signer's key.
func (s *Signer) ID() KeyID { return s.id }

// Public returns the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// Sign returns g's token signed for g.
func (s *Signer) Sign(g Grant) SignedToken {
	var buf [128]byte
	sig := ed25519.Sign(s.priv, g.AppendMessage(buf[:0]))
	return SignedToken{Token: g.Token, Member: g.Member, Key: s.id, Sig: string(sig)}
}
