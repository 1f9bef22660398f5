package assignor

import (
	"fmt"
	"slices"
	"strings"
)

// MaxPartitions is the largest total number of partitions, over all topics of
// an Input, that an assignor accepts. Larger inputs are rejected with an error
// wrapping ErrInvalidInput instead of exhausting memory: the assignors keep a
// few words of state per partition.
const MaxPartitions = 1 << 24

// invalidf returns an error wrapping ErrInvalidInput.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidInput}, args...)...)
}

// topicInfo is one topic of the input, indexed densely: its partitions have
// the global indexes base .. base+partitions-1.
type topicInfo struct {
	name       string
	partitions int32
	base       int32
}

// index is the dense form of an Input that every assignor works on. Members
// are numbered 0..M-1 in member ID order and topics 0..T-1 in name order, so
// a partition's global index (topic base + partition) orders partitions by
// topic, then partition, and nothing downstream depends on the order of the
// input. Building it validates the input.
type index struct {
	in *Input

	// order[i] is the position in in.Members of member i.
	order []int32
	// topics in name order; total is the number of partitions of all.
	topics []topicInfo
	total  int32
	// lookup maps a topic name to its index when there are too many
	// topics for a linear scan; see topicIndex.
	lookup map[string]int32

	// classes are the distinct non-empty subscriptions, each a sorted list
	// of topic indexes restricted to known topics with partitions; class[i]
	// is member i's class, or -1 if its subscription matches no partition.
	classes [][]int32
	class   []int32
}

// linearTopics is the topic count up to which topicIndex scans instead of
// hashing: a few string compares beat a map lookup.
const linearTopics = 8

func newIndex(in *Input) (*index, error) {
	x := &index{in: in}
	if err := x.indexTopics(); err != nil {
		return nil, err
	}
	if err := x.indexMembers(); err != nil {
		return nil, err
	}
	x.indexSubscriptions()
	return x, nil
}

func (x *index) indexTopics() error {
	ts := x.in.Topics
	x.topics = make([]topicInfo, len(ts))
	var total int64
	for i, t := range ts {
		if t.Partitions < 0 {
			return invalidf("topic %q has a negative partition count (%d)", t.Name, t.Partitions)
		}
		total += int64(t.Partitions)
		x.topics[i] = topicInfo{name: t.Name, partitions: t.Partitions}
	}
	if total > MaxPartitions {
		return invalidf("%d partitions in total, more than the limit of %d", total, MaxPartitions)
	}
	slices.SortFunc(x.topics, func(a, b topicInfo) int { return strings.Compare(a.name, b.name) })
	var base int32
	for i := range x.topics {
		if i > 0 && x.topics[i].name == x.topics[i-1].name {
			return invalidf("duplicate topic %q", x.topics[i].name)
		}
		x.topics[i].base = base
		base += x.topics[i].partitions
	}
	x.total = base
	if len(x.topics) > linearTopics {
		x.lookup = make(map[string]int32, len(x.topics))
		for i, t := range x.topics {
			x.lookup[t.name] = int32(i)
		}
	}
	return nil
}

func (x *index) indexMembers() error {
	ms := x.in.Members
	x.order = make([]int32, len(ms))
	for i := range x.order {
		x.order[i] = int32(i)
	}
	slices.SortFunc(x.order, func(a, b int32) int { return strings.Compare(ms[a].ID, ms[b].ID) })
	for i := 1; i < len(x.order); i++ {
		if id := ms[x.order[i]].ID; id == ms[x.order[i-1]].ID {
			return invalidf("duplicate member ID %q", id)
		}
	}
	return nil
}

// topicIndex returns the index of the named topic, or -1.
func (x *index) topicIndex(name string) int32 {
	if x.lookup != nil {
		if i, ok := x.lookup[name]; ok {
			return i
		}
		return -1
	}
	for i := range x.topics {
		if x.topics[i].name == name {
			return int32(i)
		}
	}
	return -1
}

// member returns member i (in ID order).
func (x *index) member(i int32) *Member { return &x.in.Members[x.order[i]] }

// memberID returns member i's ID.
func (x *index) memberID(i int32) string { return x.in.Members[x.order[i]].ID }

// indexSubscriptions interns every member's subscription into a class.
// Members of a group usually share one subscription, so the common case is a
// single class and a cheap comparison with the previous member's topic list.
func (x *index) indexSubscriptions() {
	m := len(x.order)
	x.class = make([]int32, m)

	var all []int32
	for t := range x.topics {
		if x.topics[t].partitions > 0 {
			all = append(all, int32(t))
		}
	}
	allClass := int32(-1)

	byHash := make(map[uint64]int32)
	var scratch []int32
	var prevTopics []string
	prevClass, havePrev := int32(-1), false
	for i := range m {
		mem := x.member(int32(i))
		if mem.Topics == nil {
			if allClass < 0 && len(all) > 0 {
				allClass = x.intern(byHash, all)
			}
			x.class[i] = allClass
			continue
		}
		if havePrev && slices.Equal(mem.Topics, prevTopics) {
			x.class[i] = prevClass
			continue
		}
		scratch = scratch[:0]
		for _, name := range mem.Topics {
			if t := x.topicIndex(name); t >= 0 && x.topics[t].partitions > 0 {
				scratch = append(scratch, t)
			}
		}
		slices.Sort(scratch)
		scratch = slices.Compact(scratch)
		c := int32(-1)
		if len(scratch) > 0 {
			c = x.intern(byHash, scratch)
		}
		x.class[i] = c
		prevTopics, prevClass, havePrev = mem.Topics, c, true
	}
}

// intern returns the class of the sorted topic list ts, adding it if new.
// Lists are keyed by a hash; on the (unlikely) collision of two different
// lists the later one falls back to a linear search.
func (x *index) intern(byHash map[uint64]int32, ts []int32) int32 {
	h := uint64(14695981039346656037)
	for _, t := range ts {
		h ^= uint64(uint32(t))
		h *= 1099511628211
	}
	if c, ok := byHash[h]; ok {
		if slices.Equal(x.classes[c], ts) {
			return c
		}
		for c := range x.classes {
			if slices.Equal(x.classes[c], ts) {
				return int32(c)
			}
		}
	}
	c := int32(len(x.classes))
	x.classes = append(x.classes, slices.Clone(ts))
	if _, taken := byHash[h]; !taken {
		byHash[h] = c
	}
	return c
}

// subscribes reports whether class c contains topic t.
func (x *index) subscribes(c, t int32) bool {
	if c < 0 {
		return false
	}
	_, ok := slices.BinarySearch(x.classes[c], t)
	return ok
}

// resolveOwned fills owner (one entry per partition, -1 for none) with each
// partition's current valid owner: a member that lists it in Owned, knows its
// topic, subscribes to that topic and finds the partition in range. When
// several members claim one partition, the member whose ID sorts first owns
// it; the other claims are dropped.
func (x *index) resolveOwned(owner []int32) {
	for g := range owner {
		owner[g] = -1
	}
	var (
		lastName  string
		lastTopic int32
		lastOK    bool
		haveLast  bool
		lastClass = int32(-1)
	)
	for i := range int32(len(x.order)) {
		c := x.class[i]
		if c < 0 {
			continue
		}
		if c != lastClass {
			// The subscription differs from the last member's, so
			// the cached verdict on the last topic no longer holds.
			haveLast, lastClass = false, c
		}
		for _, tp := range x.member(i).Owned {
			// Owned lists usually run topic by topic: remember the
			// last topic instead of looking every name up.
			if !haveLast || tp.Topic != lastName {
				lastName, haveLast = tp.Topic, true
				lastTopic = x.topicIndex(tp.Topic)
				lastOK = lastTopic >= 0 && x.subscribes(c, lastTopic)
			}
			if !lastOK {
				continue
			}
			t := &x.topics[lastTopic]
			if tp.Partition < 0 || tp.Partition >= t.partitions {
				continue
			}
			if g := t.base + tp.Partition; owner[g] < 0 {
				owner[g] = i
			}
		}
	}
}

// output builds the Assignment from owner (one entry per partition, -1 for
// unassigned). All partitions share one backing array; every member's slice
// is capped so that appending to it cannot overwrite a neighbour's.
func (x *index) output(owner []int32) Assignment {
	m := len(x.order)
	start := make([]int32, m+1)
	for _, o := range owner {
		if o >= 0 {
			start[o+1]++
		}
	}
	for i := range m {
		start[i+1] += start[i]
	}
	tps := make([]TopicPartition, start[m])
	next := start[:m:m]
	for t := range x.topics {
		ti := &x.topics[t]
		for p := range ti.partitions {
			if o := owner[ti.base+p]; o >= 0 {
				tps[next[o]] = TopicPartition{Topic: ti.name, Partition: p}
				next[o]++
			}
		}
	}
	// next now holds each member's end, which is the next member's start:
	// rebuild the starts from the ends.
	a := make(Assignment, m)
	lo := int32(0)
	for i := range m {
		hi := next[i]
		a[x.memberID(int32(i))] = tps[lo:hi:hi]
		lo = hi
	}
	return a
}
