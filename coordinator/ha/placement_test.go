package ha

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestPlacementTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shards int
		nodes  []int32
		owners []int32
		want   []int32
	}{
		{"no node", 3, nil, []int32{-1, -1, -1}, []int32{-1, -1, -1}},
		{"first node takes all", 4, []int32{0}, []int32{-1, -1, -1, -1}, []int32{0, 0, 0, 0}},
		{"cold start spreads in ID order", 5, []int32{0, 1}, []int32{-1, -1, -1, -1, -1}, []int32{0, 0, 0, 1, 1}},
		{"a joiner takes only the excess", 6, []int32{0, 1, 2}, []int32{0, 0, 0, 1, 1, 1}, []int32{0, 0, 2, 1, 1, 2}},
		{"the dead node's shards go to the others", 6, []int32{0, 2}, []int32{0, 0, 1, 1, 2, 2}, []int32{0, 0, 0, 2, 2, 2}},
		{"the larger quota stays with who holds more", 7, []int32{0, 1}, []int32{1, 1, 1, 1, 0, 0, 0}, []int32{1, 1, 1, 1, 0, 0, 0}},
		{"an owner that is not live counts as none", 2, []int32{3}, []int32{7, 3}, []int32{3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := placement(tc.shards, tc.nodes, tc.owners); !slices.Equal(got, tc.want) {
				t.Fatalf("placement(%d, %v, %v) = %v, want %v", tc.shards, tc.nodes, tc.owners, got, tc.want)
			}
		})
	}
}

// TestPlacementProperties checks, for any live nodes and any current
// owners: every shard has a live target, the targets are balanced within
// one, the moves (shards whose live owner is not their target) are the
// fewest any balanced placement allows, and placing again from the
// target moves nothing.
func TestPlacementProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shards := rapid.IntRange(1, 200).Draw(t, "shards")
		ids := rapid.SliceOfNDistinct(rapid.Int32Range(0, 20), 1, 10, rapid.ID[int32]).Draw(t, "nodes")
		slices.Sort(ids)
		owners := rapid.SliceOfN(rapid.Int32Range(-1, 22), shards, shards).Draw(t, "owners")
		target := placement(shards, ids, owners)

		live := map[int32]bool{}
		for _, id := range ids {
			live[id] = true
		}
		count := map[int32]int{}
		held := map[int32]int{}
		moves := 0
		for s, o := range target {
			if !live[o] {
				t.Fatalf("shard %d targets %d, not a live node", s, o)
			}
			count[o]++
			if live[owners[s]] {
				held[owners[s]]++
				if owners[s] != o {
					moves++
				}
			}
		}
		lo, hi := shards, 0
		for _, id := range ids {
			lo, hi = min(lo, count[id]), max(hi, count[id])
		}
		if hi-lo > 1 {
			t.Fatalf("unbalanced: %v", count)
		}
		// The fewest moves: each node keeps at most its quota, and the
		// r larger quotas best go to the r nodes holding the most.
		q, r := shards/len(ids), shards%len(ids)
		hs := make([]int, 0, len(ids))
		for _, id := range ids {
			hs = append(hs, held[id])
		}
		slices.Sort(hs)
		slices.Reverse(hs)
		least := 0
		for i, h := range hs {
			quota := q
			if i < r {
				quota++
			}
			least += max(0, h-quota)
		}
		if moves != least {
			t.Fatalf("%d moves, the fewest is %d (owners %v, target %v)", moves, least, owners, target)
		}
		if again := placement(shards, ids, target); !slices.Equal(again, target) {
			t.Fatalf("not stable: %v then %v", target, again)
		}
	})
}

func TestShardOf(t *testing.T) {
	if ShardOf("g", 1) != 0 || ShardOf("g", 0) != 0 {
		t.Fatal("one shard (or none) must be shard 0")
	}
	seen := make([]int, 16)
	for i := range 1600 {
		s := ShardOf("group-"+string(rune('a'+i%26))+string(rune('0'+i/26%10))+string(rune('A'+i/260)), 16)
		if s < 0 || s >= 16 {
			t.Fatalf("shard %d out of range", s)
		}
		seen[s]++
	}
	for s, n := range seen {
		if n < 50 || n > 150 {
			t.Fatalf("shard %d got %d of 1600 names: the hash does not spread (%v)", s, n, seen)
		}
	}
	// Fixed forever: nodes of other versions must agree on every
	// group's shard (xxhash64 of the name, modulo the count).
	for _, tc := range []struct {
		group  string
		shards int
		want   int
	}{{"orders", 50, 45}, {"payments", 64, 56}, {"", 8, 1}} {
		if got := ShardOf(tc.group, tc.shards); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.group, tc.shards, got, tc.want)
		}
	}
}
