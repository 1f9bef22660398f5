package member

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/grantwire"
)

// Signed grants. A tenure coordinator that signs grants (tenure serve
// --sign-grants) sends, in a tagged field of its heartbeat responses
// (package epoch/grantwire), a signature of each partition it gives the
// member at the token the member takes: the epoch of the response that
// brought it, or, for a partition that waited for revocations, the epoch
// at which the member takes it, which the coordinator signs again as the
// partition's provisional token follows the member epoch. The loop keeps
// the last few per partition and hands the one of a claim's token to its
// Claim ([Claim.Token]), at its creation or, when the signature arrives
// later (a key rotation signs every held partition again), as it arrives.
// The Machine, which decides tokens, never sees them: a signature changes
// no decision, it only travels with the token to the fences.

// maxSignedPerPartition bounds the signatures kept per partition: the
// current token's, and a few provisional ones that may yet be taken.
const maxSignedPerPartition = 4

// onGrants records the signed grants of a heartbeat response and gives
// the live claims theirs.
func (s *Session) onGrants(resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if resp == nil || resp.ErrorCode != 0 {
		return
	}
	gs, ok, err := grantwire.From(&resp.UnknownTags)
	if !ok {
		return
	}
	if err != nil {
		s.log.Warn("the coordinator's grants do not decode; claims stay unsigned", zap.Error(err))
		return
	}
	member := s.m.MemberID()
	if resp.MemberID != nil && *resp.MemberID != "" {
		member = *resp.MemberID
	}
	if s.signed == nil {
		s.signed = make(map[key][]epoch.SignedToken)
	}
	for _, g := range gs.Grants {
		k := key{g.TopicID, g.Partition}
		st := gs.Signed(g, member)
		kept := s.signed[k][:0]
		for _, old := range s.signed[k] {
			if old.Token != st.Token || old.Member != st.Member {
				kept = append(kept, old)
			}
		}
		if len(kept) >= maxSignedPerPartition {
			kept = kept[1:]
		}
		s.signed[k] = append(kept, st)
		for _, w := range s.parts {
			if w.topicID == g.TopicID && w.partition == g.Partition && w.latest != nil &&
				w.latest.token == st.Token && w.latest.memberID == st.Member {
				w.latest.signed.Store(&st)
			}
		}
	}
}

// signedFor returns the signature of partition k of w at token for
// member, if one arrived.
func (s *Session) signedFor(k key, token epoch.Token, member string) *epoch.SignedToken {
	for _, st := range s.signed[k] {
		if st.Token == token && st.Member == member {
			return &st
		}
	}
	return nil
}
