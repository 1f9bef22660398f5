package ha

import (
	"cmp"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// ShardOf returns the shard of group among shards (at least 1): the
// group name's xxhash modulo the count, as Kafka picks a group's
// __consumer_offsets partition from the name's hash. Every node and
// every tool must agree on it, so it never changes.
func ShardOf(group string, shards int) int {
	if shards <= 1 {
		return 0
	}
	return int(xxhash.Sum64String(group) % uint64(shards))
}

// placement spreads shards over the live nodes the way tenure's own
// assignor spreads partitions over members: balanced within one, and
// with the fewest moves from owners (owners[s] is shard s's live owner,
// -1 for none). nodes must be sorted. It returns the target owner of
// every shard (-1 only when there is no node).
//
// The nodes that hold the most get the larger quota (ties to the lower
// ID), each keeps its lowest-numbered shards up to its quota, and the
// rest, with the unowned ones, go in shard order to the nodes below
// quota in ID order. A node gives up only what exceeds its quota, so
// the moves are the sum of the excesses, which no balanced placement
// can beat. Every node computes it from the same etcd state, so the
// nodes agree without talking: only a shard's target tries to take it,
// and only once its owner has let it go.
func placement(shards int, nodes []int32, owners []int32) []int32 {
	target := make([]int32, shards)
	if len(nodes) == 0 {
		for s := range target {
			target[s] = -1
		}
		return target
	}
	held := make(map[int32]int, len(nodes))
	for _, id := range nodes {
		held[id] = 0
	}
	for _, o := range owners {
		if _, live := held[o]; live {
			held[o]++
		}
	}
	byHeld := slices.Clone(nodes)
	slices.SortFunc(byHeld, func(a, b int32) int { return cmp.Or(cmp.Compare(held[b], held[a]), cmp.Compare(a, b)) })
	quota := make(map[int32]int, len(nodes))
	q, r := shards/len(nodes), shards%len(nodes)
	for i, id := range byHeld {
		quota[id] = q
		if i < r {
			quota[id]++
		}
	}
	kept := make(map[int32]int, len(nodes))
	var free []int
	for s := range shards {
		o := owners[s]
		if _, live := held[o]; live && kept[o] < quota[o] {
			target[s] = o
			kept[o]++
			continue
		}
		free = append(free, s)
	}
	i := 0
	for _, s := range free {
		for kept[nodes[i]] >= quota[nodes[i]] {
			i++
		}
		target[s] = nodes[i]
		kept[nodes[i]]++
	}
	return target
}
