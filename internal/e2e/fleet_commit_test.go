package e2e

import "testing"

// TestFleetCommitEvery: with commitEvery N each member commits with every
// Nth heartbeat, and the members take turns, so that a fleet's commits
// spread over the cycle instead of coming together; without it, or with
// commits off or nothing owned, as before.
func TestFleetCommitEvery(t *testing.T) {
	var l fleetLoad
	members := make([]*fleetMember, 8)
	for i := range members {
		members[i] = &fleetMember{seq: uint64(i), owned: []int32{int32(i)}}
	}
	if l.commitDue(members[0]) {
		t.Fatal("a commit with commits off")
	}
	l.commits.Store(true)
	for beat := range 3 {
		if !l.commitDue(members[0]) {
			t.Fatalf("without commitEvery, heartbeat %d does not commit", beat)
		}
	}
	if l.commitDue(&fleetMember{}) {
		t.Fatal("a member that owns nothing commits")
	}
	l.commitEvery.Store(4)
	for i := range members {
		members[i].beats = 0
	}
	per := make([]int, len(members))
	for round := range 8 {
		n := 0
		for i, m := range members {
			if l.commitDue(m) {
				per[i]++
				n++
			}
		}
		if n != 2 {
			t.Errorf("round %d: %d of 8 members committed, want 2 (a quarter, staggered)", round, n)
		}
	}
	for i, n := range per {
		if n != 2 {
			t.Errorf("member %d committed %d times in 8 heartbeats, want 2", i, n)
		}
	}
}
