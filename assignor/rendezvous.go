package assignor

import (
	"math"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// RendezvousName is the protocol name of the Rendezvous assignor.
const RendezvousName = "rendezvous"

// DefaultEpsilon is the load slack that ByName("rendezvous") uses: a member
// takes at most 25% more than an even share (rounded up).
const DefaultEpsilon = 0.25

// ringPoints is the number of points each member has on the hash ring.
const ringPoints = 4

// Rendezvous returns a consistent-hashing assignor: highest-random-weight
// (rendezvous) hashing with bounded loads, after "Consistent Hashing with
// Bounded Loads" (Mirrokni, Thorup, Zadimoghaddam).
//
// Every member has a weight for every partition, and a partition goes to the
// member of highest weight unless that member is full. Precisely: a member
// holds at most
//
//	capacity = ⌈⌈P/n⌉·(1+epsilon)⌉
//
// partitions, where P counts the partitions with a subscriber and n the
// members that subscribe to one; take all (member, partition) pairs of a
// member and a partition of a topic it subscribes to, from the highest weight
// down (equal weights, which practically never occur, rank by member ID, then
// partition); a partition
// goes to the member of the first pair in which the partition is still free
// and the member is not yet full. This is the unique stable matching of
// partitions and members, computed by deferred acceptance (partitions
// propose to members in order of weight, a full member keeps the partitions
// it weighs highest), so it depends on no processing order.
//
// The placement depends only on the members and the topics, never on
// Member.Owned, so every member computes the same one; and since a member's
// weight for a partition does not depend on the other members, a member that
// leaves takes only its own partitions away, except for overflow (below).
//
// The weight of member m for partition p is u³/d, where u ∈ (0, 1] comes from
// the xxhash of m's key (its InstanceID if it has one, so static members keep
// their partitions across restarts, else its ID) and of p's topic and number,
// and d is the distance clockwise on a 64-bit hash ring from p's point to the
// nearest of m's four points. This is rendezvous hashing localised by the
// ring: since u ≤ 1, no member whose points all lie further than 1/w from p
// can beat a weight w, so finding a partition's best member walks the ring
// from p's point and stops after about five members instead of weighing all
// n. Results are exact, not sampled: the ring only decides which weights
// need computing. 100,000 partitions over 10,000 members take tens of
// milliseconds.
//
// What can be relied on:
//   - With homogeneous subscriptions no member exceeds the capacity.
//   - Same input, same output, in any order.
//   - When a member leaves, a partition changes owner only if the leaver
//     owned it or if, before or after, it did not go to its highest-weight
//     member because that member was full (overflow). Overflow is a few
//     percent of partitions at the default epsilon 0.25 and grows as epsilon
//     or the number of partitions per member shrinks. When n crosses a value
//     at which ⌈P/n⌉ changes, so does the capacity, and overflowed
//     partitions return to (or leave) their first choice: with 10 partitions
//     per member that is about 2% of all partitions moving on top of the
//     leaver's. Epsilon 0 gives strict balance at the price of much
//     overflow; +Inf disables the bound (plain rendezvous hashing, balanced
//     only by chance).
//   - With heterogeneous subscriptions a partition goes to a subscriber of
//     its topic; one that every subscriber rejects because all are full goes
//     to the least-loaded subscriber, which may then exceed the capacity.
//
// Uniform moves fewer partitions; choose Rendezvous when placement must be a
// pure function of the membership (no state to carry between generations).
// A negative or NaN epsilon makes Assign fail with an error wrapping
// ErrInvalidInput.
func Rendezvous(epsilon float64) Assignor { return rendezvous{epsilon: epsilon} }

type rendezvous struct{ epsilon float64 }

func (rendezvous) Name() string { return RendezvousName }

func (r rendezvous) Assign(in Input) (Assignment, error) {
	if !(r.epsilon >= 0) {
		return nil, invalidf("rendezvous epsilon %v is not a non-negative number", r.epsilon)
	}
	x, err := newIndex(&in)
	if err != nil {
		return nil, err
	}
	owner := make([]int32, x.total)
	for g := range owner {
		owner[g] = -1
	}
	if len(x.classes) == 0 {
		return x.output(owner), nil
	}
	newPlacer(x, r.epsilon, owner).run()
	return x.output(owner), nil
}

// capacity is ⌈P/n⌉ + ⌈⌈P/n⌉·epsilon⌉, saturating at MaxInt32. The small
// tolerance keeps float rounding (10 × 0.1 = 1.0000000000000002) from adding
// a partition that the exact product would not.
func capacity(partitions, members int32, epsilon float64) int32 {
	if partitions == 0 {
		return 0
	}
	even := (partitions + members - 1) / members
	extra := float64(even) * epsilon
	if extra >= math.MaxInt32-float64(even) {
		return math.MaxInt32
	}
	return even + int32(max(0, math.Ceil(extra-1e-9)))
}

// hashString hashes a member key or a topic name.
func hashString(s string) uint64 { return xxhash.Sum64String(s) }

// hash2 is xxhash.Sum64 of the 16 little-endian bytes of a and b: XXH64
// with seed 0 written out for this one length, so that the compiler inlines
// it into the ring walk. TestHash2 checks it against the library.
func hash2(a, b uint64) uint64 {
	const (
		prime1 uint64 = 11400714785074694791
		prime2 uint64 = 14029467366897019727
		prime3 uint64 = 1609587929392839161
		prime4 uint64 = 9650029242287828579
		prime5 uint64 = 2870177450012600261
	)
	h := prime5 + 16
	h ^= bits.RotateLeft64(a*prime2, 31) * prime1
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	h ^= bits.RotateLeft64(b*prime2, 31) * prime1
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// memberPoint is the position of a member's v-th point on the ring.
func memberPoint(key uint64, v int) uint64 { return hash2(key, uint64(v)) }

// cost is the inverse of a member's weight for the partition at point pp,
// d/u³ (lower is better), given the member's key and the distance dist from
// pp to its nearest point. Comparing costs spares the walk a division per
// step: u³ ≤ 1, so a member at distance d costs at least d, also in floating
// point, where rounding is monotone.
func cost(key, pp, dist uint64) float64 {
	u := float64(hash2(key, pp)>>11+1) * 0x1p-53
	return distance(dist) / (u * u * u)
}

// distance turns a ring distance into the numerator of a cost; never zero.
func distance(dist uint64) float64 { return float64(dist) + 1 }

// ring is the points of the members subscribed to some topics, by position.
type ring struct {
	pos []uint64
	mem []int32
	// first[b] is the index of the first point whose top bits are >= b:
	// a search starts there instead of bisecting the whole ring.
	first []int32
	shift uint
}

// newRing sorts the points (pos, mem) by position, then member, into a
// ring. Positions are uniform hashes, so a counting sort on their top bits
// leaves buckets of about one point, finished by insertion sort.
func newRing(pos []uint64, mem []int32) ring {
	width := uint(4)
	for width < 20 && 1<<width < len(pos) {
		width++
	}
	r := ring{
		pos:   make([]uint64, len(pos)),
		mem:   make([]int32, len(pos)),
		first: make([]int32, 1<<width+1),
		shift: 64 - width,
	}
	for _, p := range pos {
		r.first[p>>r.shift+1]++
	}
	for b := 1; b < len(r.first); b++ {
		r.first[b] += r.first[b-1]
	}
	next := slices.Clone(r.first[:len(r.first)-1])
	for k, p := range pos {
		b := p >> r.shift
		r.pos[next[b]], r.mem[next[b]] = p, mem[k]
		next[b]++
	}
	for b := range len(r.first) - 1 {
		lo, hi := int(r.first[b]), int(r.first[b+1])
		for k := lo + 1; k < hi; k++ {
			for j := k; j > lo && (r.pos[j] < r.pos[j-1] || r.pos[j] == r.pos[j-1] && r.mem[j] < r.mem[j-1]); j-- {
				r.pos[j], r.pos[j-1] = r.pos[j-1], r.pos[j]
				r.mem[j], r.mem[j-1] = r.mem[j-1], r.mem[j]
			}
		}
	}
	return r
}

// search returns the index of the first point at or after pp, len(pos) if
// none.
func (r *ring) search(pp uint64) int {
	b := pp >> r.shift
	k, end := int(r.first[b]), int(r.first[b+1])
	for k < end && r.pos[k] < pp {
		k++
	}
	return k
}

// placer computes the bounded-load placement as a stable matching, by
// deferred acceptance (Gale–Shapley): each free partition proposes to the
// next member in its preference (by descending weight); a member with room
// accepts; a full member keeps the partitions it weighs highest and rejects
// the weakest, which proposes further on. With both sides ranking pairs by
// the same weight the stable matching is unique, so the result does not
// depend on the order of proposals, and it equals the greedy over all pairs
// in descending weight that the documentation describes.
type placer struct {
	x      *index
	cap    int32
	key    []uint64 // member -> hash of its key
	load   []int32
	rings  []ring
	ringOf []int32 // topic -> ring, -1 if no subscriber

	owner []int32   // partition -> member, -1 if free
	ring  []int32   // partition -> its topic's ring
	point []uint64  // partition -> its point on the ring
	cost  []float64 // partition -> cost of its last proposal
	last  []int32   // partition -> member of its last proposal, -1 none

	// A member's partitions: a list (head, next) until it fills up, then
	// a heap in arena[heap[m]:][:cap] with the weakest on top, the one a
	// better proposal displaces.
	head  []int32
	next  []int32
	heap  []int32
	arena []int32

	seen  []int32 // member -> stamp of the last walk that weighed it
	stamp int32
	dist  []uint64 // member -> distance, for leastLoaded
}

func newPlacer(x *index, epsilon float64, owner []int32) *placer {
	m := len(x.order)
	p := &placer{
		x:      x,
		key:    make([]uint64, m),
		load:   make([]int32, m),
		ringOf: make([]int32, len(x.topics)),
		owner:  owner,
		ring:   make([]int32, x.total),
		point:  make([]uint64, x.total),
		cost:   make([]float64, x.total),
		last:   make([]int32, x.total),
		head:   make([]int32, m),
		next:   make([]int32, x.total),
		heap:   make([]int32, m),
		seen:   make([]int32, m),
	}
	var members, partitions int32
	for i, c := range x.class {
		p.head[i], p.heap[i] = -1, -1
		if c < 0 {
			continue
		}
		members++
		mem := x.member(int32(i))
		k := mem.InstanceID
		if k == "" {
			k = mem.ID
		}
		p.key[i] = hashString(k)
	}

	// Topics subscribed by the same classes share a ring; with
	// homogeneous subscriptions there is one.
	classesOf := make([][]int32, len(x.topics))
	for c, ts := range x.classes {
		for _, t := range ts {
			classesOf[t] = append(classesOf[t], int32(c))
		}
	}
	var ringClasses [][]int32
	for t := range x.topics {
		p.ringOf[t] = -1
		cs := classesOf[t]
		if len(cs) == 0 {
			continue
		}
		ti := &x.topics[t]
		partitions += ti.partitions
		r := slices.IndexFunc(ringClasses, func(o []int32) bool { return slices.Equal(o, cs) })
		if r < 0 {
			r = len(ringClasses)
			ringClasses = append(ringClasses, cs)
		}
		p.ringOf[t] = int32(r)
		tk := hashString(ti.name)
		for part := range ti.partitions {
			g := ti.base + part
			p.ring[g] = int32(r)
			p.point[g] = hash2(tk, uint64(part))
			p.last[g] = -1
		}
	}
	p.cap = capacity(partitions, members, epsilon)
	p.arena = make([]int32, 0, partitions)

	inClass := make([]bool, len(x.classes))
	classSize := make([]int, len(x.classes))
	for _, c := range x.class {
		if c >= 0 {
			classSize[c]++
		}
	}
	p.rings = make([]ring, len(ringClasses))
	for r, cs := range ringClasses {
		clear(inClass)
		size := 0
		for _, c := range cs {
			inClass[c] = true
			size += ringPoints * classSize[c]
		}
		pos, mem := make([]uint64, 0, size), make([]int32, 0, size)
		for i, c := range x.class {
			if c >= 0 && inClass[c] {
				for v := range ringPoints {
					pos = append(pos, memberPoint(p.key[i], v))
					mem = append(mem, int32(i))
				}
			}
		}
		p.rings[r] = newRing(pos, mem)
	}
	return p
}

// run matches every partition with a subscriber.
func (p *placer) run() {
	var leftovers []int32
	for t := range p.x.topics {
		if p.ringOf[t] < 0 {
			continue
		}
		ti := &p.x.topics[t]
		for first := ti.base; first < ti.base+ti.partitions; first++ {
			// Propose until someone takes the partition; whoever
			// it displaces proposes next.
			for g := first; g >= 0; {
				m, c, ok := p.nextChoice(g)
				if !ok {
					leftovers = append(leftovers, g)
					break
				}
				p.last[g], p.cost[g] = m, c
				g = p.propose(m, g)
			}
		}
	}
	// Partitions rejected by every subscriber (only possible with
	// heterogeneous subscriptions) go to the least-loaded one.
	slices.Sort(leftovers)
	for _, g := range leftovers {
		m := p.leastLoaded(g)
		p.owner[g] = m
		p.load[m]++
	}
}

// nextChoice returns the member of highest weight (lowest cost) for g that
// ranks after g's last proposal, with its cost, or false if there is none.
// Ranks order by cost, then member index.
func (p *placer) nextChoice(g int32) (int32, float64, bool) {
	rg := &p.rings[p.ring[g]]
	pp := p.point[g]
	lastM, lastC := p.last[g], p.cost[g]
	n := len(rg.pos)
	start := rg.search(pp)
	p.nextStamp()
	best, bestC := int32(-1), 0.0
	for k := 0; ; k++ {
		// No member not yet weighed costs less than the distance to
		// the next point.
		bound := math.Inf(1)
		at := start + k
		if at >= n {
			at -= n
		}
		if k < n {
			bound = distance(rg.pos[at] - pp)
		}
		if best >= 0 && bestC < bound {
			return best, bestC, true
		}
		if k == n {
			return best, bestC, best >= 0
		}
		m := rg.mem[at]
		if p.seen[m] == p.stamp {
			continue
		}
		p.seen[m] = p.stamp
		c := cost(p.key[m], pp, rg.pos[at]-pp)
		if lastM >= 0 && (c < lastC || c == lastC && m <= lastM) {
			continue // proposed to already
		}
		if best < 0 || c < bestC || c == bestC && m < best {
			best, bestC = m, c
		}
	}
}

// propose offers g to m. It returns the partition left without an owner:
// -1 if m had room, g if m rejects it, or the partition m drops for it.
func (p *placer) propose(m, g int32) int32 {
	if p.load[m] < p.cap {
		p.owner[g] = m
		p.load[m]++
		p.next[g] = p.head[m]
		p.head[m] = g
		if p.load[m] == p.cap {
			p.fill(m)
		}
		return -1
	}
	h := p.arena[p.heap[m]:][:p.cap]
	weakest := h[0]
	if p.weaker(g, weakest) {
		return g
	}
	p.owner[weakest] = -1
	p.owner[g] = m
	h[0] = g
	p.down(h, 0)
	return weakest
}

// weaker reports whether a member ranks partition a below b (both weighed
// against that member): higher cost, then higher partition index.
func (p *placer) weaker(a, b int32) bool {
	if p.cost[a] != p.cost[b] {
		return p.cost[a] > p.cost[b]
	}
	return a > b
}

// fill turns full member m's list into a heap with its weakest on top.
func (p *placer) fill(m int32) {
	off := len(p.arena)
	for g := p.head[m]; g >= 0; g = p.next[g] {
		p.arena = append(p.arena, g)
	}
	p.heap[m] = int32(off)
	h := p.arena[off:]
	for k := len(h)/2 - 1; k >= 0; k-- {
		p.down(h, k)
	}
}

func (p *placer) down(h []int32, k int) {
	for {
		l := 2*k + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && p.weaker(h[r], h[l]) {
			c = r
		}
		if !p.weaker(h[c], h[k]) {
			return
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
}

// leastLoaded returns g's subscriber of least load, ties to the one of
// highest weight for g (then lower index).
func (p *placer) leastLoaded(g int32) int32 {
	rg := &p.rings[p.ring[g]]
	pp := p.point[g]
	if p.dist == nil {
		p.dist = make([]uint64, len(p.load))
	}
	// A member's distance is to its nearest point clockwise of pp.
	p.nextStamp()
	for k, m := range rg.mem {
		d := rg.pos[k] - pp
		if p.seen[m] != p.stamp || d < p.dist[m] {
			p.seen[m], p.dist[m] = p.stamp, d
		}
	}
	best, bestC := int32(-1), 0.0
	for _, m := range rg.mem {
		if p.seen[m] != p.stamp {
			continue // weighed already
		}
		p.seen[m] = 0
		c := cost(p.key[m], pp, p.dist[m])
		switch {
		case best < 0,
			p.load[m] < p.load[best],
			p.load[m] == p.load[best] && (c < bestC || c == bestC && m < best):
			best, bestC = m, c
		}
	}
	return best
}

// nextStamp starts a new walk: members weighed in earlier walks no longer
// count as seen.
func (p *placer) nextStamp() {
	if p.stamp == math.MaxInt32 {
		clear(p.seen)
		p.stamp = 0
	}
	p.stamp++
}
