package ha

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestStandbyShardsProperties: whichever one node of a balanced set
// leaves, every shard the placement then moves to a survivor is one that
// survivor follows; a node follows none of its own shards; and in a set
// of three nodes each follows about the shards of one node, not of two.
func TestStandbyShardsProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		shards := rapid.IntRange(2, 64).Draw(rt, "shards")
		n := rapid.IntRange(1, 5).Draw(rt, "nodes")
		var ids []int32
		for id := range int32(12) {
			if len(ids) < n && rapid.Bool().Draw(rt, "live") {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			ids = []int32{0}
		}
		// A settled set: every shard where the placement puts it.
		none := make([]int32, shards)
		for s := range none {
			none[s] = -1
		}
		owners := placement(shards, ids, none)
		follows := map[int32][]int{}
		for _, self := range ids {
			follows[self] = standbyShards(shards, self, ids, owners)
			for _, s := range follows[self] {
				if owners[s] == self {
					rt.Fatalf("node %d follows shard %d, its own", self, s)
				}
			}
		}
		for i, gone := range ids {
			rest := slices.Delete(slices.Clone(ids), i, i+1)
			for s, to := range placement(shards, rest, owners) {
				if to >= 0 && owners[s] != to && !slices.Contains(follows[to], s) {
					rt.Fatalf("with node %d gone, shard %d goes to node %d, which does not follow it (it follows %v)",
						gone, s, to, follows[to])
				}
			}
		}
		if len(ids) == 3 {
			for self, f := range follows {
				if max := (shards+2)/3 + 1; len(f) > max {
					rt.Fatalf("node %d of three follows %d of %d shards, more than %d", self, len(f), shards, max)
				}
			}
		}
	})
}

// TestStandbyShardsMoving: a shard the placement gives a node that does
// not hold it yet (a node that joined, or a dead node's shards before
// they are taken) is one it follows.
func TestStandbyShardsMoving(t *testing.T) {
	// Node 2 joined a set of two holding three shards each.
	owners := []int32{0, 0, 0, 1, 1, 1}
	got := standbyShards(6, 2, []int32{0, 1, 2}, owners)
	for _, s := range []int{2, 5} { // the shards placement moves to node 2
		if !slices.Contains(got, s) {
			t.Errorf("node 2 follows %v, without shard %d placed on it", got, s)
		}
	}
	// Node 1 died: its shards are unowned, and node 0, the only one
	// left, takes them all.
	if got, want := standbyShards(6, 0, []int32{0}, owners), []int{3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("the last node follows %v, want %v", got, want)
	}
}
