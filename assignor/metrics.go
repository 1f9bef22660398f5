package assignor

// Imbalance returns the difference between the largest and the smallest
// number of partitions held by a member of a, or 0 if a has no members.
// Every member counts, including those that subscribe to nothing (and so hold
// nothing): a Uniform assignment of a homogeneous group has Imbalance 0 or 1.
func Imbalance(a Assignment) int {
	first := true
	var lo, hi int
	for _, tps := range a {
		n := len(tps)
		if first {
			lo, hi, first = n, n, false
			continue
		}
		lo = min(lo, n)
		hi = max(hi, n)
	}
	return hi - lo
}

// Moves returns how many partitions changed owner from prev to next: those
// that appear in both and whose owner differs. A partition that appears in
// only one of them (its topic was added or removed, nobody subscribed to it,
// or its owner left the group before prev was taken) is not counted; so a
// partition that was free and is now assigned is not a move, while the
// partitions of a member that is in prev but not in next are.
//
// An assignment from an assignor lists each partition once. If prev or next
// lists one under several members, the member whose ID sorts first counts
// as its owner, as Uniform does with conflicting Owned claims.
func Moves(prev, next Assignment) int {
	before := owners(prev)
	moves := 0
	for tp, o := range owners(next) {
		if p, ok := before[tp]; ok && p != o {
			moves++
		}
	}
	return moves
}

// owners maps each partition of a to its owner, the least member ID among
// those listing it.
func owners(a Assignment) map[TopicPartition]string {
	n := 0
	for _, tps := range a {
		n += len(tps)
	}
	m := make(map[TopicPartition]string, n)
	for id, tps := range a {
		for _, tp := range tps {
			if o, ok := m[tp]; !ok || id < o {
				m[tp] = id
			}
		}
	}
	return m
}
