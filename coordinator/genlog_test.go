package coordinator

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestMinMovesBruteForce checks minMoves against every balanced quota
// vector: the fewest moves is partitions minus the most that can stay,
// where a member keeps min(owned, quota).
func TestMinMovesBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		partitions := rapid.IntRange(0, 12).Draw(t, "partitions")
		members := rapid.IntRange(1, 6).Draw(t, "members")
		// Owned counts of current members (0 for new ones), summing to at
		// most partitions.
		owned := make([]int, members)
		left := partitions
		for i := range owned {
			owned[i] = rapid.IntRange(0, left).Draw(t, "owned")
			left -= owned[i]
		}
		byCount := make(map[int]int)
		for _, c := range owned {
			if c > 0 {
				byCount[c]++
			}
		}
		got := minMoves(partitions, members, byCount)

		q, r := partitions/members, partitions%members
		best := -1
		// Every way to pick the r members that get q+1.
		for mask := 0; mask < 1<<members; mask++ {
			if popcount(mask) != r {
				continue
			}
			stay := 0
			for i, c := range owned {
				quota := q
				if mask&(1<<i) != 0 {
					quota++
				}
				stay += min(c, quota)
			}
			best = max(best, stay)
		}
		if want := partitions - best; got != want {
			t.Fatalf("minMoves(%d, %d, %v) = %d, want %d (owned %v)", partitions, members, byCount, got, want, owned)
		}
	})
}

func popcount(x int) int {
	n := 0
	for ; x > 0; x &= x - 1 {
		n++
	}
	return n
}

// TestGenerationLogRetention checks that a RecordSet keeps the newest
// record per epoch and drops what Trim allows, and that the log is not
// part of the state a group is restored from.
func TestGenerationLogRetention(t *testing.T) {
	s := NewRecordSet()
	for e := int32(1); e <= 5; e++ {
		rec := &GenerationRecord{Group: "g", Epoch: e, Reason: "member-joined"}
		if e > 3 {
			rec.Trim = e - 3
		}
		if err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Apply(&GenerationRecord{Group: "g", Epoch: 4, Reason: "member-joined", Assigned: true, Trim: 1}); err != nil {
		t.Fatal(err)
	}
	var epochs []int32
	for _, r := range s.Log("g") {
		epochs = append(epochs, r.Epoch)
	}
	if want := []int32{3, 4, 5}; !slices.Equal(epochs, want) {
		t.Fatalf("log epochs %v, want %v", epochs, want)
	}
	if !s.Log("g")[1].Assigned {
		t.Fatal("epoch 4's newer record did not replace the older")
	}
	if recs := s.Group("g"); len(recs) != 0 {
		t.Fatalf("the log leaked into the group's state: %v", recs)
	}
}
