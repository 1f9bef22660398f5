package assignor

import (
	"cmp"
	"slices"
)

// UniformName is the protocol name of the Uniform assignor.
const UniformName = "uniform"

// Uniform returns tenure's default assignor: sticky and balanced.
//
// With homogeneous subscriptions (every member that subscribes to anything
// subscribes to the same topics) each of the n subscribing members gets
// ⌊P/n⌋ or ⌈P/n⌉ of the P partitions, and the number of partitions that
// change owner is the least that any balanced assignment needs: members keep
// what they hold up to their quota, and the (P mod n) larger quotas go to the
// members that hold the most. A join, a leave or a crash therefore moves only
// the partitions that have to move.
//
// What a member holds is read from Member.Owned. A claim counts only if the
// member subscribes to the partition's topic and the partition exists; a
// partition claimed by several members belongs to the claimant whose ID sorts
// first (the others' claims are dropped); claims of members that are no
// longer in the input simply do not exist, so their partitions are free.
// Of its claims a member keeps the lowest-numbered ones (by topic, then
// partition); free partitions go, in order, to the members below their quota,
// in member ID order.
//
// With heterogeneous subscriptions every partition still goes to a
// subscriber of its topic and members keep what they hold, but balance is
// that of a greedy: free partitions go to the least-loaded subscriber (most
// constrained topics first), then partitions move from a member to another
// subscriber of their topic while that narrows the gap between the two, until
// no such move is left. So a partition's owner holds at most one partition
// more than any other subscriber of that topic; the stronger balance and
// minimal-movement guarantees above are for homogeneous subscriptions only.
// This costs O(P + k·T·log n) per pass for k moves, T topics and n members;
// the homogeneous case is O(P + n log n).
func Uniform() Assignor { return uniform{} }

type uniform struct{}

func (uniform) Name() string { return UniformName }

func (uniform) Assign(in Input) (Assignment, error) {
	x, err := newIndex(&in)
	if err != nil {
		return nil, err
	}
	owner := make([]int32, x.total)
	x.resolveOwned(owner)
	switch len(x.classes) {
	case 0:
		// Nobody subscribes to a topic with partitions.
	case 1:
		assignBalanced(x, owner)
	default:
		assignGreedy(x, owner)
	}
	return x.output(owner), nil
}

// assignBalanced is Uniform for a single subscription class.
func assignBalanced(x *index, owner []int32) {
	var subscribers []int32
	for i, c := range x.class {
		if c == 0 {
			subscribers = append(subscribers, int32(i))
		}
	}
	n := int32(len(subscribers))
	topics := x.classes[0]
	var total int32
	for _, t := range topics {
		total += x.topics[t].partitions
	}
	q, r := total/n, total%n

	m := len(x.order)
	// held counts each member's valid claims, then what it keeps.
	held := make([]int32, m)
	quota := make([]int32, m)
	for _, t := range topics {
		ti := &x.topics[t]
		for _, o := range owner[ti.base : ti.base+ti.partitions] {
			if o >= 0 {
				held[o]++
			}
		}
	}
	for _, i := range subscribers {
		quota[i] = q
	}
	if r > 0 {
		// The r larger quotas go to the r members that hold the most:
		// a member gains from the larger quota only if it holds more
		// than q, and this choice maximises how many such members get
		// it, hence how many partitions stay put.
		byHeld := slices.Clone(subscribers)
		slices.SortFunc(byHeld, func(a, b int32) int {
			if c := cmp.Compare(held[b], held[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for _, i := range byHeld[:r] {
			quota[i]++
		}
	}

	kept := held
	clear(kept)
	for _, t := range topics {
		ti := &x.topics[t]
		for g := ti.base; g < ti.base+ti.partitions; g++ {
			if o := owner[g]; o >= 0 {
				if kept[o] < quota[o] {
					kept[o]++
				} else {
					owner[g] = -1
				}
			}
		}
	}

	j := 0
	for _, t := range topics {
		ti := &x.topics[t]
		for g := ti.base; g < ti.base+ti.partitions; g++ {
			if owner[g] >= 0 {
				continue
			}
			for kept[subscribers[j]] == quota[subscribers[j]] {
				j++
			}
			i := subscribers[j]
			owner[g] = i
			kept[i]++
		}
	}
}

// assignGreedy is Uniform for heterogeneous subscriptions.
func assignGreedy(x *index, owner []int32) {
	m := len(x.order)
	load := make([]int32, m)
	for _, o := range owner {
		if o >= 0 {
			load[o]++
		}
	}
	h := newClassHeaps(x, load)

	// Free partitions first go to the least-loaded subscriber, topics
	// with the fewest subscribers first: they have the least choice.
	subs := make([]int32, len(x.topics))
	for c, ts := range x.classes {
		for _, t := range ts {
			subs[t] += int32(len(h.heaps[c]))
		}
	}
	var byChoice []int32
	for t, s := range subs {
		if s > 0 {
			byChoice = append(byChoice, int32(t))
		}
	}
	slices.SortFunc(byChoice, func(a, b int32) int {
		if c := cmp.Compare(subs[a], subs[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, t := range byChoice {
		ti := &x.topics[t]
		for g := ti.base; g < ti.base+ti.partitions; g++ {
			if owner[g] < 0 {
				b := h.least(t)
				owner[g] = b
				h.add(b, 1)
			}
		}
	}

	// Then move partitions while a move narrows a gap of two or more.
	// Every move lowers the sum of squared loads, so this ends.
	slices.Sort(byChoice)
	for moved := true; moved; {
		moved = false
		for _, t := range byChoice {
			ti := &x.topics[t]
			for g := ti.base; g < ti.base+ti.partitions; g++ {
				a := owner[g]
				b := h.least(t)
				if load[a] >= load[b]+2 {
					owner[g] = b
					h.add(a, -1)
					h.add(b, 1)
					moved = true
				}
			}
		}
	}
}

// classHeaps finds the least-loaded subscriber of a topic in O(1) and
// updates in O(T log C) for T topics and C classes. Each subscription class
// keeps its members in a min-heap by (load, member index); each topic keeps
// the classes that contain it in a min-heap by their top member.
type classHeaps struct {
	x     *index
	load  []int32
	heaps [][]int32 // class -> its members
	pos   []int32   // member -> position in its class's heap
	// byTopic[t] holds the classes containing t; at[c][k] is the position
	// of class c in byTopic[x.classes[c][k]].
	byTopic [][]int32
	at      [][]int32
}

func newClassHeaps(x *index, load []int32) *classHeaps {
	h := &classHeaps{
		x:       x,
		load:    load,
		heaps:   make([][]int32, len(x.classes)),
		pos:     make([]int32, len(load)),
		byTopic: make([][]int32, len(x.topics)),
		at:      make([][]int32, len(x.classes)),
	}
	for i, c := range x.class {
		if c >= 0 {
			h.pos[i] = int32(len(h.heaps[c]))
			h.heaps[c] = append(h.heaps[c], int32(i))
		}
	}
	for c := range h.heaps {
		hp := h.heaps[c]
		for k := len(hp)/2 - 1; k >= 0; k-- {
			siftDown(hp, k, h.memberLess, h.setMember)
		}
	}
	for c, ts := range x.classes {
		h.at[c] = make([]int32, len(ts))
		for k, t := range ts {
			h.at[c][k] = int32(len(h.byTopic[t]))
			h.byTopic[t] = append(h.byTopic[t], int32(c))
		}
	}
	for t, hp := range h.byTopic {
		for k := len(hp)/2 - 1; k >= 0; k-- {
			siftDown(hp, k, h.classLess, h.setClass(int32(t)))
		}
	}
	return h
}

func (h *classHeaps) memberLess(a, b int32) bool {
	if h.load[a] != h.load[b] {
		return h.load[a] < h.load[b]
	}
	return a < b
}

func (h *classHeaps) classLess(a, b int32) bool {
	return h.memberLess(h.heaps[a][0], h.heaps[b][0])
}

func (h *classHeaps) setMember(k int, i int32) { h.pos[i] = int32(k) }

// setClass returns the position setter for topic t's heap of classes.
func (h *classHeaps) setClass(t int32) func(k int, c int32) {
	return func(k int, c int32) {
		j, _ := slices.BinarySearch(h.x.classes[c], t)
		h.at[c][j] = int32(k)
	}
}

// least returns the least-loaded subscriber of topic t (ties to the lower
// member index). t must have a subscriber.
func (h *classHeaps) least(t int32) int32 {
	return h.heaps[h.byTopic[t][0]][0]
}

// add changes member i's load by d and restores the heaps.
func (h *classHeaps) add(i, d int32) {
	h.load[i] += d
	c := h.x.class[i]
	hp := h.heaps[c]
	siftUp(hp, int(h.pos[i]), h.memberLess, h.setMember)
	siftDown(hp, int(h.pos[i]), h.memberLess, h.setMember)
	for k, t := range h.x.classes[c] {
		set := h.setClass(t)
		siftUp(h.byTopic[t], int(h.at[c][k]), h.classLess, set)
		siftDown(h.byTopic[t], int(h.at[c][k]), h.classLess, set)
	}
}

// siftUp and siftDown restore a binary min-heap after hp[k] changed; set
// records each element's new position.
func siftUp(hp []int32, k int, less func(a, b int32) bool, set func(k int, v int32)) {
	for k > 0 {
		p := (k - 1) / 2
		if !less(hp[k], hp[p]) {
			return
		}
		hp[k], hp[p] = hp[p], hp[k]
		set(k, hp[k])
		set(p, hp[p])
		k = p
	}
}

func siftDown(hp []int32, k int, less func(a, b int32) bool, set func(k int, v int32)) {
	for {
		l := 2*k + 1
		if l >= len(hp) {
			return
		}
		s := l
		if r := l + 1; r < len(hp) && less(hp[r], hp[l]) {
			s = r
		}
		if !less(hp[s], hp[k]) {
			return
		}
		hp[k], hp[s] = hp[s], hp[k]
		set(k, hp[k])
		set(s, hp[s])
		k = s
	}
}
