package coordinator

import (
	"maps"
	"slices"
	"strings"
)

// The incremental target.
//
// Running the assignor costs O(members + partitions) however little
// changed, so a group that grows one join at a time pays O(n²) in all. In
// the common case (the uniform assignor, every member subscribing to the
// same topics by name) the assignor's answer depends only on how many
// partitions each member's target holds and on the member IDs, and a
// join or a leave changes it for a few members only: those that give up a
// partition and those that receive one. targetIndex keeps the members
// ordered by (target size, member ID) so that computeTarget can find them,
// and the partitions no target holds, without looking at anyone else.
//
// The result is the assignor's, partition for partition (the property
// test in consumer_incremental_test.go checks it against assignor.Uniform
// and, independently, that it is balanced within one and moves the fewest
// partitions), so the choice of path never shows: not in the records, not
// after a restore, which rebuilds the index with one full run.
//
// The index is valid only while the members' targets and its free set
// together hold every partition of the assigned topics exactly once, as
// the uniform assignor leaves them. A full run with the uniform assignor
// over homogeneous subscriptions rebuilds it; any other full run, a change
// of the assigned topics, and a restore drop it.

// targetIndex is the index behind the incremental target.
type targetIndex struct {
	valid bool
	// buckets holds the members by target size, each bucket an AVL tree
	// ordered by member ID.
	buckets map[int32]*sizeBucket
	// free are the partitions of the assigned topics that no member's
	// target holds: those of members that left since the last
	// computation.
	free map[TopicPartition]struct{}
}

// sizeBucket is the set of members whose target has one size.
type sizeBucket struct {
	root *consumerMember
	n    int
}

// indexNode is a member's place in the targetIndex.
type indexNode struct {
	left, right *consumerMember
	height      int8
	indexed     bool
	// size is the target size the member is filed under.
	size int32
}

// reset drops the index; the next computation runs the assignor.
func (x *targetIndex) reset(members map[string]*consumerMember) {
	if !x.valid {
		return
	}
	for _, m := range members {
		m.idx = indexNode{}
	}
	*x = targetIndex{}
}

// rebuild files every member under its current target; the targets must
// hold every partition of the assigned topics exactly once.
func (x *targetIndex) rebuild(members map[string]*consumerMember) {
	x.reset(members)
	x.valid = true
	x.buckets = make(map[int32]*sizeBucket)
	x.free = make(map[TopicPartition]struct{})
	for _, m := range members {
		x.add(m)
	}
}

// add files m under its target's size and takes its target out of free
// (a static member's successor inherits its predecessor's target).
func (x *targetIndex) add(m *consumerMember) {
	if !x.valid {
		return
	}
	for _, tp := range m.target {
		delete(x.free, tp)
	}
	x.file(m)
}

// remove takes m out of the index; its target becomes free.
func (x *targetIndex) remove(m *consumerMember) {
	if !x.valid || !m.idx.indexed {
		return
	}
	x.unfile(m)
	for _, tp := range m.target {
		x.free[tp] = struct{}{}
	}
}

// retarget refiles m, whose target is about to become target.
func (x *targetIndex) retarget(m *consumerMember, target []TopicPartition) {
	if !x.valid || !m.idx.indexed || int(m.idx.size) == len(target) {
		return
	}
	x.unfile(m)
	m.idx.size = int32(len(target))
	x.fileAt(m)
}

func (x *targetIndex) file(m *consumerMember) {
	m.idx = indexNode{size: int32(len(m.target))}
	x.fileAt(m)
}

func (x *targetIndex) fileAt(m *consumerMember) {
	b := x.buckets[m.idx.size]
	if b == nil {
		b = &sizeBucket{}
		x.buckets[m.idx.size] = b
	}
	b.root = avlInsert(b.root, m)
	b.n++
	m.idx.indexed = true
}

func (x *targetIndex) unfile(m *consumerMember) {
	b := x.buckets[m.idx.size]
	b.root = avlRemove(b.root, m)
	if b.n--; b.n == 0 {
		delete(x.buckets, m.idx.size)
	}
	m.idx.left, m.idx.right, m.idx.height, m.idx.indexed = nil, nil, 0, false
}

// incrementalEligible reports whether the next target may be computed
// from the index: it is valid, the assignor is the uniform one, every
// member subscribes to the same topics by name, and none is drained (a
// drained member is assigned nothing, which the index does not model).
func (g *Group) incrementalEligible(uniform bool) bool {
	c := &g.consumer
	return c.index.valid && uniform && c.homogeneous() && c.drained == 0
}

// homogeneous reports whether every member subscribes to the same topic
// names and none by regex; it walks the subscribed names, not the members.
func (c *consumerState) homogeneous() bool {
	if len(c.regexMembers) > 0 {
		return false
	}
	for _, n := range c.subscribers {
		if n != len(c.members) {
			return false
		}
	}
	return true
}

// quotaPlan is a member whose target changes and the size it changes to.
type quotaPlan struct {
	m     *consumerMember
	quota int32
}

// incrementalTarget computes what the uniform assignor would, given each
// member's current target as what it holds, from the index: of the n
// members and P partitions, the P mod n members holding the most (ties to
// the lower member ID) get ⌈P/n⌉ and the others ⌊P/n⌋; a member above its
// quota keeps its lowest partitions and frees the rest; the free
// partitions, in order, fill the members below their quota in member ID
// order. Only the members whose target changes are visited.
func (g *Group) incrementalTarget() {
	c := &g.consumer
	x := &c.index
	n := int32(len(c.members))
	if n == 0 {
		return // the free partitions wait for the next member
	}
	var total int32
	for _, t := range c.topics {
		total += t.partitions
	}
	q, r := total/n, total%n

	// Walk the sizes in the assignor's order (largest first, then by
	// member ID within a size): rank is the position of a bucket's
	// first member, and the first r ranks get the larger quota.
	sizes := slices.Sorted(maps.Keys(x.buckets))
	slices.Reverse(sizes)
	var shed, fill []quotaPlan
	rank := int32(0)
	for _, s := range sizes {
		b := x.buckets[s]
		start := rank
		rank += int32(b.n)
		quotaAt := func(i int32) int32 {
			if i < r {
				return q + 1
			}
			return q
		}
		switch {
		case s > q+1:
			// Above every quota: all shed.
			i := start
			avlAscend(b.root, func(m *consumerMember) bool {
				shed = append(shed, quotaPlan{m, quotaAt(i)})
				i++
				return true
			})
		case s == q+1:
			// The members past rank r shed one: the last by ID.
			k := start + int32(b.n) - max(r, start)
			avlDescend(b.root, func(m *consumerMember) bool {
				if k <= 0 {
					return false
				}
				shed = append(shed, quotaPlan{m, q})
				k--
				return true
			})
		case s == q:
			// The members before rank r get one more: the first by
			// ID.
			k := min(r, start+int32(b.n)) - start
			avlAscend(b.root, func(m *consumerMember) bool {
				if k <= 0 {
					return false
				}
				fill = append(fill, quotaPlan{m, q + 1})
				k--
				return true
			})
		default:
			// Below every quota: all fill.
			i := start
			avlAscend(b.root, func(m *consumerMember) bool {
				fill = append(fill, quotaPlan{m, quotaAt(i)})
				i++
				return true
			})
		}
	}

	free := slices.Collect(maps.Keys(x.free))
	for _, p := range shed {
		free = append(free, p.m.target[p.quota:]...)
	}
	slices.SortFunc(free, compareTP)
	slices.SortFunc(fill, func(a, b quotaPlan) int { return strings.Compare(a.m.id, b.m.id) })
	for _, p := range shed {
		// Targets are never changed in place, so the kept prefix can
		// share the old target's memory.
		g.setTarget(p.m, p.m.target[:p.quota:p.quota])
	}
	for _, p := range fill {
		need := int(p.quota) - len(p.m.target)
		if need > len(free) {
			panic("coordinator: incremental target of group " + g.name + " ran out of free partitions")
		}
		g.setTarget(p.m, mergeTPs(p.m.target, free[:need]))
		free = free[need:]
	}
	if len(free) > 0 {
		panic("coordinator: incremental target of group " + g.name + " left partitions unassigned")
	}
	clear(x.free)
}

// mergeTPs returns the union of the sorted and disjoint a and b, sorted,
// in new memory.
func mergeTPs(a, b []TopicPartition) []TopicPartition {
	out := make([]TopicPartition, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if compareTP(a[0], b[0]) < 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}

// The buckets are AVL trees threaded through the members (indexNode), so
// filing a member allocates nothing and every operation is O(log n) in
// the worst case, whatever the member IDs.

func avlHeight(m *consumerMember) int8 {
	if m == nil {
		return 0
	}
	return m.idx.height
}

func avlFix(m *consumerMember) {
	m.idx.height = 1 + max(avlHeight(m.idx.left), avlHeight(m.idx.right))
}

func avlRotateRight(m *consumerMember) *consumerMember {
	l := m.idx.left
	m.idx.left, l.idx.right = l.idx.right, m
	avlFix(m)
	avlFix(l)
	return l
}

func avlRotateLeft(m *consumerMember) *consumerMember {
	r := m.idx.right
	m.idx.right, r.idx.left = r.idx.left, m
	avlFix(m)
	avlFix(r)
	return r
}

// avlBalance restores the AVL property at m, whose subtrees are AVL trees
// of heights differing by at most two.
func avlBalance(m *consumerMember) *consumerMember {
	avlFix(m)
	switch bf := avlHeight(m.idx.left) - avlHeight(m.idx.right); {
	case bf > 1:
		if l := m.idx.left; avlHeight(l.idx.left) < avlHeight(l.idx.right) {
			m.idx.left = avlRotateLeft(l)
		}
		return avlRotateRight(m)
	case bf < -1:
		if r := m.idx.right; avlHeight(r.idx.right) < avlHeight(r.idx.left) {
			m.idx.right = avlRotateRight(r)
		}
		return avlRotateLeft(m)
	}
	return m
}

// avlInsert adds m (not in any tree) to the tree at root and returns the
// new root.
func avlInsert(root, m *consumerMember) *consumerMember {
	if root == nil {
		m.idx.left, m.idx.right, m.idx.height = nil, nil, 1
		return m
	}
	if m.id < root.id {
		root.idx.left = avlInsert(root.idx.left, m)
	} else {
		root.idx.right = avlInsert(root.idx.right, m)
	}
	return avlBalance(root)
}

// avlRemove takes m out of the tree at root and returns the new root.
func avlRemove(root, m *consumerMember) *consumerMember {
	if root == nil {
		panic("coordinator: member " + m.id + " is not in its target index bucket")
	}
	switch {
	case m.id < root.id:
		root.idx.left = avlRemove(root.idx.left, m)
	case m.id > root.id:
		root.idx.right = avlRemove(root.idx.right, m)
	case root != m:
		panic("coordinator: two members " + m.id + " in the target index")
	default:
		l, r := root.idx.left, root.idx.right
		if r == nil {
			return l
		}
		var next *consumerMember
		r = avlRemoveMin(r, &next)
		next.idx.left, next.idx.right = l, r
		return avlBalance(next)
	}
	return avlBalance(root)
}

func avlRemoveMin(root *consumerMember, min **consumerMember) *consumerMember {
	if root.idx.left == nil {
		*min = root
		return root.idx.right
	}
	root.idx.left = avlRemoveMin(root.idx.left, min)
	return avlBalance(root)
}

// avlAscend calls fn on the members of the tree in ID order until it
// returns false; avlDescend in reverse order. fn must not change the tree.
func avlAscend(m *consumerMember, fn func(*consumerMember) bool) bool {
	return m == nil || (avlAscend(m.idx.left, fn) && fn(m) && avlAscend(m.idx.right, fn))
}

func avlDescend(m *consumerMember, fn func(*consumerMember) bool) bool {
	return m == nil || (avlDescend(m.idx.right, fn) && fn(m) && avlDescend(m.idx.left, fn))
}
