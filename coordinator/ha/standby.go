package ha

import "slices"

// StandbyShards returns the shards this node may take next, sorted: those
// the placement gives it now that it does not hold yet (it takes them
// once their owners let go), and those the placement would give it if
// any one other live node left. A warm standby follows these shards'
// writes (etcdstore.Mirror.Follow) and no others: each shard's writes
// then reach its owner and the one node that would take it, not every
// node of the set. Like ShardOwner it is advice from the node's view, not
// a promise: a node that takes a shard it did not follow (two nodes gone
// at once, or a view that changed meanwhile) loads it from the store.
// Nil without shards, or while the node is not among the live nodes or
// is leaving.
func (n *Node) StandbyShards() []int {
	if n.cfg.shards <= 1 || n.leaving.Load() {
		return nil
	}
	self := n.Self().ID
	ids, keys := n.view.shardState(n.cfg.shards)
	if !slices.Contains(ids, self) {
		return nil
	}
	return standbyShards(n.cfg.shards, self, ids, ownerIDs(keys))
}

func ownerIDs(keys []shardOwner) []int32 {
	owners := make([]int32, len(keys))
	for s, k := range keys {
		owners[s] = k.id
	}
	return owners
}

// standbyShards is StandbyShards for the live nodes ids (sorted, self
// among them) and the shards' owners (-1: none).
func standbyShards(shards int, self int32, ids, owners []int32) []int {
	next := make([]bool, shards)
	add := func(ids []int32) {
		for s, o := range placement(shards, ids, owners) {
			if o == self && owners[s] != self {
				next[s] = true
			}
		}
	}
	add(ids)
	for i, id := range ids {
		if id != self {
			// placement counts an owner that is not live as none.
			add(slices.Delete(slices.Clone(ids), i, i+1))
		}
	}
	var out []int
	for s, ok := range next {
		if ok {
			out = append(out, s)
		}
	}
	return out
}
