package assignor

import (
	"slices"
	"strings"
)

// RangeName is the protocol name of the Range assignor.
const RangeName = "range"

// Range returns Kafka's range assignor. Topic by topic, the members
// subscribed to the topic are put in order and each takes a contiguous range
// of its partitions: with P partitions and n subscribers, every member takes
// ⌊P/n⌋ and the first (P mod n) take one more.
//
// The order is Kafka's (and franz-go's): static members (with an InstanceID)
// first, by instance ID, then the others by member ID. Static members thus
// keep their ranges across restarts, which give them new member IDs.
//
// Range ignores Member.Owned. Because every topic starts again at the first
// member, the first members collect the extra partitions of every topic: with
// many topics whose partition counts do not divide evenly, prefer Uniform.
// Its merit is co-partitioning: members subscribed to the same topics get
// the same partition numbers of each, which joins across topics need.
func Range() Assignor { return rangeAssignor{} }

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return RangeName }

func (rangeAssignor) Assign(in Input) (Assignment, error) {
	x, err := newIndex(&in)
	if err != nil {
		return nil, err
	}
	m := int32(len(x.order))
	owner := make([]int32, x.total)
	for g := range owner {
		owner[g] = -1
	}

	// Members in range order. Member indexes are already in ID order, so a
	// stable partition of static members (sorted by instance ID) ahead of
	// the others gives Kafka's order.
	order := make([]int32, 0, m)
	for i := range m {
		if x.member(i).InstanceID != "" {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		return strings.Compare(x.member(a).InstanceID, x.member(b).InstanceID)
	})
	for i := range m {
		if x.member(i).InstanceID == "" {
			order = append(order, i)
		}
	}

	// Subscribers of each topic, in range order (CSR layout).
	start := make([]int32, len(x.topics)+1)
	for _, i := range order {
		if c := x.class[i]; c >= 0 {
			for _, t := range x.classes[c] {
				start[t+1]++
			}
		}
	}
	for t := range x.topics {
		start[t+1] += start[t]
	}
	subs := make([]int32, start[len(x.topics)])
	next := make([]int32, len(x.topics))
	copy(next, start)
	for _, i := range order {
		if c := x.class[i]; c >= 0 {
			for _, t := range x.classes[c] {
				subs[next[t]] = i
				next[t]++
			}
		}
	}

	for t := range x.topics {
		members := subs[start[t]:start[t+1]]
		n := int32(len(members))
		if n == 0 {
			continue
		}
		ti := &x.topics[t]
		q, r := ti.partitions/n, ti.partitions%n
		g := ti.base
		for k, i := range members {
			size := q
			if int32(k) < r {
				size++
			}
			for range size {
				owner[g] = i
				g++
			}
		}
	}
	return x.output(owner), nil
}
