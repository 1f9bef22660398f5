package server

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestInteropGroup runs eight stock kgo consumers in one group on a
// 64-partition topic, with the classic protocol (kgo's default
// cooperative-sticky balancer) and with KIP-848, against tenure and
// against kfake, and checks at every step what the members believe (from
// their OnPartitionsAssigned/Revoked/Lost callbacks) against what kadm
// reports:
//
//  1. once stable, every partition has exactly one owner, and kadm's
//     ListGroups, DescribeGroups or DescribeConsumerGroups agree;
//  2. an owner's explicit commits are applied (kadm FetchOffsets);
//  3. a member that leaves (Close) has its partitions taken over;
//  4. a member whose connections are cut, without a leave, has its
//     partitions taken over once its session expires, not before;
//  5. that member's commit with its old member ID and generation (or
//     member epoch), sent later through another client, is rejected
//     UNKNOWN_MEMBER_ID and not applied.
//
// Throughout, no member is ever told it owns a partition another live
// member still believes it owns.
func TestInteropGroup(t *testing.T) {
	for _, mode := range []interopMode{interopClassic, interop848} {
		for _, be := range interopBackends {
			t.Run(mode.String()+"/"+be.name, func(t *testing.T) {
				testInteropGroup(t, be.start(t), mode)
			})
		}
	}
}

func testInteropGroup(t *testing.T, b *interopBackend, mode interopMode) {
	g := newInteropGroup(t, b, mode, interopMembers)
	live := make([]int, interopMembers)
	for i := range live {
		live[i] = i
		g.join(i)
	}
	took := g.waitStable(live)
	t.Logf("%d members stable after %v", len(live), took)
	g.checkListed()

	// Explicit commits by owners.
	const leaver, victim = 1, interopMembers - 1
	pOwn, pVictim := g.own.of(0)[0], g.own.of(victim)[0]
	g.commit(0, map[int32]int64{pOwn: 10})
	g.commit(victim, map[int32]int64{pVictim: 20})
	want := map[int32]int64{pOwn: 10, pVictim: 20}
	if got := g.committed(); !maps.Equal(got, want) {
		t.Fatalf("committed offsets %v, want %v", got, want)
	}

	// A graceful leave: its partitions go to the others.
	leaverParts := g.own.of(leaver)
	g.leave(leaver)
	live = slices.DeleteFunc(live, func(i int) bool { return i == leaver })
	took = g.waitStable(live)
	t.Logf("partitions %v of the leaver reassigned within %v", leaverParts, took)

	// A member killed without leaving: its partitions move only once its
	// session has expired.
	victimParts := g.own.of(victim)
	memberID, gen := g.kill(victim)
	live = slices.DeleteFunc(live, func(i int) bool { return i == victim })
	took = g.waitStable(live)
	t.Logf("partitions %v of the killed member reassigned within %v", victimParts, took)
	if session := b.sessionTimeout(); took < session/2 {
		t.Errorf("the killed member's partitions moved %v after the kill, before its %v session could expire", took, session)
	}

	// The expired member's commit, with its last member ID and
	// generation, arrives late through another connection.
	codes := g.rawCommit(interopClient(t, b), memberID, gen, map[int32]int64{pVictim: 99})
	if code := codes[pVictim]; code != kerr.UnknownMemberID.Code {
		t.Errorf("commit by the expired member: %s, want UNKNOWN_MEMBER_ID", codeName(code))
	}
	if got := g.committed(); !maps.Equal(got, want) {
		t.Errorf("after the expired member's commit, committed offsets %v, want %v", got, want)
	}

	g.checkListed()
	if o := g.own.overlapReport(); len(o) > 0 {
		t.Errorf("a partition had two owners at once: %v", o)
	}
}

// checkListed checks the group's ListGroups entry: a stable consumer
// group of the expected type.
func (g *interopGroup) checkListed() {
	t := g.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := g.adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	l, ok := listed[interopGroupID]
	wantType := map[interopMode]string{interopClassic: "classic", interop848: "consumer"}[g.mode]
	wantProtocol := "consumer"
	if g.mode == interop848 && g.b.untyped848 {
		wantProtocol = ""
	}
	if !ok || l.State != "Stable" || l.ProtocolType != wantProtocol || l.GroupType != wantType {
		t.Fatalf("ListGroups: %+v (listed: %v), want a Stable %s group of protocol type %q", l, ok, wantType, wantProtocol)
	}
}
