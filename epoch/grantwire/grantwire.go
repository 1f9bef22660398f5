// Package grantwire carries the coordinator's signed grants to its members
// inside Kafka responses, where stock clients do not see them: a tagged
// field of the flexible versions of ConsumerGroupHeartbeat (all),
// SyncGroup (v4+) and Heartbeat (v4+) responses. Flexible versions end
// every structure with tagged fields, and a client skips the tags it does
// not know (kmsg keeps them in UnknownTags, Kafka's Java client in its
// unknown tagged fields, librdkafka skips them), so a stock client reads
// the response exactly as without them.
//
// The field is tag [Tag] of the response's top level. Its value:
//
//	version   1 byte, 1
//	key ID    8 bytes: the signing key (epoch.KeyID in binary)
//	count     unsigned varint
//	count x:  topic ID (16 bytes), partition (int32), token (int64),
//	          signature (64 bytes), integers big-endian
//
// Each entry is the grant of one partition to the response's member (its
// member ID is in the response, or, for SyncGroup and Heartbeat, in the
// request), in the request's group; the signature is the key's over
// epoch.Grant of those five, so a member hands its token on as an
// epoch.SignedToken with no further help from the coordinator.
package grantwire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Tag is the tag number of the grants field: far above the numbers Kafka
// gives its own tagged fields (which count up from 0), so that a future
// Kafka field does not take it.
const Tag uint32 = 0x7465 // "te"

// version is the layout of the value.
const version = 1

// entryLen is the size of one entry.
const entryLen = 16 + 4 + 8 + 64

// headerLen is the size of the version and the key ID.
const headerLen = 1 + 8

// Grant is one partition's grant as the field carries it.
type Grant struct {
	TopicID   [16]byte
	Partition int32
	Token     epoch.Token
	// Sig is the 64-byte Ed25519 signature, as epoch.SignedToken holds it.
	Sig string
}

// Grants is the decoded field: the key that signed every grant, and the
// grants.
type Grants struct {
	Key    epoch.KeyID
	Grants []Grant
}

// Signed returns g as the token member holds: what a fence verifies.
func (gs Grants) Signed(g Grant, member string) epoch.SignedToken {
	return epoch.SignedToken{Token: g.Token, Member: member, Key: gs.Key, Sig: g.Sig}
}

// ErrMalformed is wrapped by Parse's errors.
var ErrMalformed = errors.New("grantwire: malformed grants field")

// Append appends the field's value for gs to dst. It panics on a key ID
// that is not one or a signature that is not 64 bytes: both come from the
// coordinator's own signer.
func Append(dst []byte, gs Grants) []byte {
	id := gs.Key.Bytes()
	if id == nil {
		panic("grantwire: invalid key ID " + string(gs.Key))
	}
	dst = append(dst, version)
	dst = append(dst, id...)
	dst = binary.AppendUvarint(dst, uint64(len(gs.Grants)))
	for _, g := range gs.Grants {
		if len(g.Sig) != 64 {
			panic(fmt.Sprintf("grantwire: a signature of %d bytes", len(g.Sig)))
		}
		dst = append(dst, g.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(g.Partition))
		dst = binary.BigEndian.AppendUint64(dst, uint64(g.Token))
		dst = append(dst, g.Sig...)
	}
	return dst
}

// Parse decodes a field's value. It accepts exactly what Append writes:
// version 1, a count in its shortest varint that the bytes hold, nothing
// after the last entry.
func Parse(b []byte) (Grants, error) {
	if len(b) < headerLen {
		return Grants{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrMalformed, len(b), headerLen)
	}
	if b[0] != version {
		return Grants{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[0], version)
	}
	key, err := epoch.KeyIDFromBytes(b[1:headerLen])
	if err != nil {
		return Grants{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	b = b[headerLen:]
	n, k := binary.Uvarint(b)
	if k <= 0 || k != len(binary.AppendUvarint(nil, n)) {
		return Grants{}, fmt.Errorf("%w: bad count", ErrMalformed)
	}
	b = b[k:]
	if n != uint64(len(b)/entryLen) || len(b)%entryLen != 0 {
		return Grants{}, fmt.Errorf("%w: %d entries announced, %d bytes follow", ErrMalformed, n, len(b))
	}
	out := Grants{Key: key, Grants: make([]Grant, n)}
	for i := range out.Grants {
		g := &out.Grants[i]
		copy(g.TopicID[:], b[:16])
		g.Partition = int32(binary.BigEndian.Uint32(b[16:20]))
		g.Token = epoch.Token(binary.BigEndian.Uint64(b[20:28]))
		g.Sig = string(b[28:entryLen])
		b = b[entryLen:]
	}
	return out, nil
}

// TagsOf returns the top-level tags (UnknownTags) of the responses that
// carry grants: ConsumerGroupHeartbeat, SyncGroup and Heartbeat; nil for
// any other.
func TagsOf(resp kmsg.Response) *kmsg.Tags {
	switch r := resp.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return &r.UnknownTags
	case *kmsg.SyncGroupResponse:
		return &r.UnknownTags
	case *kmsg.HeartbeatResponse:
		return &r.UnknownTags
	}
	return nil
}

// Put sets the field in tags (a response's UnknownTags).
func Put(tags *kmsg.Tags, gs Grants) {
	tags.Set(Tag, Append(nil, gs))
}

// From finds the field in tags: ok is false when the response has none (a
// coordinator that does not sign, or a version without tags).
func From(tags *kmsg.Tags) (gs Grants, ok bool, err error) {
	tags.Each(func(key uint32, val []byte) {
		if key == Tag {
			ok = true
			gs, err = Parse(val)
		}
	})
	return gs, ok, err
}
