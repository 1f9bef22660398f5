package server

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestInteropCommitFencedPerPartition is tenure's own rule, beyond
// Kafka's (kfake and Kafka accept any partition from a member with the
// right generation): a live member with the current generation or member
// epoch commits one partition it owns and one another member owns, in one
// request, through its own kgo client. Its own partition is committed;
// the other is rejected, ILLEGAL_GENERATION for a classic group and
// STALE_MEMBER_EPOCH for a KIP-848 group, and its owner's offset stays.
// Neither member is disturbed.
func TestInteropCommitFencedPerPartition(t *testing.T) {
	for _, tc := range []struct {
		mode interopMode
		want int16
	}{
		{interopClassic, kerr.IllegalGeneration.Code},
		{interop848, kerr.StaleMemberEpoch.Code},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			b := startInteropTenure(t)
			g := newInteropGroup(t, b, tc.mode, 2)
			live := []int{0, 1}
			g.join(0)
			g.join(1)
			g.waitStable(live)

			mine, theirs := g.own.of(0)[0], g.own.of(1)[0]
			g.commit(1, map[int32]int64{theirs: 7})
			memberID, gen := g.members[0].cl.GroupMetadata()
			codes := g.rawCommit(g.members[0].cl, memberID, gen, map[int32]int64{mine: 5, theirs: 6})
			if codes[mine] != 0 || codes[theirs] != tc.want {
				t.Errorf("commit of own partition %d and partition %d of another: %s and %s, want NONE and %s",
					mine, theirs, codeName(codes[mine]), codeName(codes[theirs]), codeName(tc.want))
			}
			want := map[int32]int64{mine: 5, theirs: 7}
			if got := g.committed(); !maps.Equal(got, want) {
				t.Errorf("committed offsets %v, want %v", got, want)
			}
			if n := b.tenure.metric(t, "tenure_commits_rejected_total"); n != 1 {
				t.Errorf("tenure_commits_rejected_total = %v, want 1", n)
			}

			// The rejection costs neither member its membership.
			before := g.memberIDs(live)
			g.waitStable(live)
			if after := g.memberIDs(live); !maps.Equal(before, after) {
				t.Errorf("members changed after the rejected commit: %v, then %v", before, after)
			}
		})
	}
}
