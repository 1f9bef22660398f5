package assignor

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"pgregory.net/rapid"
)

// Generators and checkers shared by the property tests. They work on small
// inputs (a handful of topics and members) so that shrinking gives readable
// counterexamples, and deliberately produce the awkward cases: unknown
// topics, empty subscriptions, duplicate and out-of-range claims.

// fataler is what the checkers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

var (
	topicPool    = []string{"a", "b", "c", "d", "e"}
	unknownTopic = "zz" // subscribed to or claimed, but not in Input.Topics
)

type genOpts struct {
	maxMembers    int
	maxPartitions int
	homogeneous   bool
	// noOwned leaves Member.Owned empty.
	noOwned bool
}

// genInput draws an Input.
func genInput(t *rapid.T, o genOpts) Input {
	var in Input
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(topicPool), 1, len(topicPool), rapid.ID[string]).Draw(t, "topics")
	for _, n := range names {
		in.Topics = append(in.Topics, Topic{Name: n, Partitions: int32(rapid.IntRange(0, o.maxPartitions).Draw(t, "partitions"))})
	}
	ids := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) string {
		return fmt.Sprintf("m%d", rapid.IntRange(0, 30).Draw(t, "id"))
	}), 1, o.maxMembers, rapid.ID[string]).Draw(t, "members")

	subTopics := append(slices.Clone(topicPool), unknownTopic)
	genSub := func(label string) []string {
		if rapid.IntRange(0, 3).Draw(t, label+"-nil") == 0 {
			return nil // every topic
		}
		return rapid.SliceOfN(rapid.SampledFrom(subTopics), 0, 6).Draw(t, label)
	}
	common := genSub("subscription")
	for _, id := range ids {
		m := Member{ID: id}
		switch {
		case o.homogeneous && rapid.IntRange(0, 9).Draw(t, "idle") == 0:
			// A member whose subscription matches nothing.
			m.Topics = []string{unknownTopic}
		case o.homogeneous:
			m.Topics = permuted(t, common, "order")
		default:
			m.Topics = genSub("subscription")
		}
		if rapid.IntRange(0, 3).Draw(t, "static") == 0 {
			m.InstanceID = fmt.Sprintf("i%d", rapid.IntRange(0, 5).Draw(t, "instance"))
		}
		in.Members = append(in.Members, m)
	}
	if !o.noOwned {
		genOwned(t, &in, o.maxPartitions)
	}
	return in
}

// genOwned draws current ownership: either arbitrary claims (including
// conflicting, unknown and out-of-range ones), or the assignment a group of
// overlapping members had before some joined and others left.
func genOwned(t *rapid.T, in *Input, maxPartitions int) {
	switch rapid.IntRange(0, 2).Draw(t, "owned-kind") {
	case 0:
		return
	case 1:
		claimTopics := append(slices.Clone(topicPool), unknownTopic)
		for i := range in.Members {
			in.Members[i].Owned = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) TopicPartition {
				return TopicPartition{
					Topic:     rapid.SampledFrom(claimTopics).Draw(t, "claim-topic"),
					Partition: int32(rapid.IntRange(-1, maxPartitions).Draw(t, "claim-partition")),
				}
			}), 0, 2*maxPartitions).Draw(t, "claims")
		}
	case 2:
		// A previous generation: some of today's members plus some
		// that have since left, assigned by Uniform.
		prev := *in
		prev.Members = nil
		for _, m := range in.Members {
			if rapid.IntRange(0, 3).Draw(t, "was-member") > 0 {
				prev.Members = append(prev.Members, Member{ID: m.ID, Topics: m.Topics})
			}
		}
		for k := range rapid.IntRange(0, 3).Draw(t, "left") {
			prev.Members = append(prev.Members, Member{ID: fmt.Sprintf("gone%d", k)})
		}
		a, err := Uniform().Assign(prev)
		if err != nil {
			t.Fatalf("previous generation: %v", err)
		}
		for i := range in.Members {
			in.Members[i].Owned = a[in.Members[i].ID]
		}
	}
}

// permute draws the same input in another order: members, topics, and each
// member's topics and claims.
func permute(t *rapid.T, in Input) Input {
	out := Input{
		Members: rapid.Permutation(in.Members).Draw(t, "member-order"),
		Topics:  rapid.Permutation(in.Topics).Draw(t, "topic-order"),
	}
	for i := range out.Members {
		m := &out.Members[i]
		m.Topics = permuted(t, m.Topics, "subscription-order")
		m.Owned = permuted(t, m.Owned, "owned-order")
	}
	return out
}

// permuted draws a permutation of s, keeping nil and empty apart (rapid
// returns nil for an empty slice, and a nil subscription means every topic).
func permuted[S ~[]E, E any](t *rapid.T, s S, label string) S {
	if len(s) == 0 {
		return s
	}
	return rapid.Permutation(s).Draw(t, label)
}

// subscribers returns, per topic of in with partitions, the IDs of the
// members subscribed to it, computed the plain way.
func subscribers(in Input) map[string][]string {
	known := map[string]int32{}
	for _, tp := range in.Topics {
		known[tp.Name] = tp.Partitions
	}
	subs := map[string][]string{}
	for _, m := range in.Members {
		topics := m.Topics
		if topics == nil {
			for _, tp := range in.Topics {
				topics = append(topics, tp.Name)
			}
		}
		seen := map[string]bool{}
		for _, name := range topics {
			if n, ok := known[name]; ok && n > 0 && !seen[name] {
				seen[name] = true
				subs[name] = append(subs[name], m.ID)
			}
		}
	}
	for _, s := range subs {
		sort.Strings(s)
	}
	return subs
}

// checkValid checks what every assignor promises: an entry (non-nil, sorted)
// for every member, each partition of a subscribed topic exactly once and
// with a subscriber, nothing else.
func checkValid(t fataler, in Input, out Assignment) {
	t.Helper()
	if len(out) != len(in.Members) {
		t.Fatalf("assignment has %d members, input %d", len(out), len(in.Members))
	}
	subs := subscribers(in)
	partitions := map[string]int32{}
	for _, tp := range in.Topics {
		partitions[tp.Name] = tp.Partitions
	}
	seen := map[TopicPartition]string{}
	for _, m := range in.Members {
		tps, ok := out[m.ID]
		if !ok || tps == nil {
			t.Fatalf("member %s: missing or nil entry", m.ID)
		}
		for k, tp := range tps {
			if k > 0 && compareTP(tps[k-1], tp) >= 0 {
				t.Fatalf("member %s: not sorted: %v", m.ID, tps)
			}
			if tp.Partition < 0 || tp.Partition >= partitions[tp.Topic] {
				t.Fatalf("member %s: %v does not exist", m.ID, tp)
			}
			if !slices.Contains(subs[tp.Topic], m.ID) {
				t.Fatalf("member %s: got %v without subscribing to its topic", m.ID, tp)
			}
			if o, dup := seen[tp]; dup {
				t.Fatalf("%v assigned to both %s and %s", tp, o, m.ID)
			}
			seen[tp] = m.ID
		}
	}
	for topic, s := range subs {
		for p := range partitions[topic] {
			if _, ok := seen[TopicPartition{topic, p}]; !ok && len(s) > 0 {
				t.Fatalf("%s/%d unassigned although %v subscribe", topic, p, s)
			}
		}
	}
}

// validOwners is the reference for resolveOwned: each partition's current
// valid owner, the first claimant in member ID order whose claim is valid.
func validOwners(in Input) Assignment {
	subs := subscribers(in)
	partitions := map[string]int32{}
	for _, tp := range in.Topics {
		partitions[tp.Name] = tp.Partitions
	}
	ms := slices.Clone(in.Members)
	slices.SortFunc(ms, func(a, b Member) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	taken := map[TopicPartition]bool{}
	out := Assignment{}
	for _, m := range ms {
		out[m.ID] = []TopicPartition{}
		for _, tp := range m.Owned {
			if tp.Partition < 0 || tp.Partition >= partitions[tp.Topic] || !slices.Contains(subs[tp.Topic], m.ID) || taken[tp] {
				continue
			}
			taken[tp] = true
			out[m.ID] = append(out[m.ID], tp)
		}
	}
	return out
}

// loads returns each member's partition count.
func loads(a Assignment) map[string]int {
	l := map[string]int{}
	for id, tps := range a {
		l[id] = len(tps)
	}
	return l
}

// withOwnedFrom returns in with every member's Owned taken from a.
func withOwnedFrom(in Input, a Assignment) Input {
	out := in
	out.Members = slices.Clone(in.Members)
	for i := range out.Members {
		out.Members[i].Owned = a[out.Members[i].ID]
	}
	return out
}

func mustAssign(t fataler, a Assignor, in Input) Assignment {
	t.Helper()
	out, err := a.Assign(in)
	if err != nil {
		t.Fatalf("%s: %v", a.Name(), err)
	}
	return out
}

// checkDeterministic checks that a permutation of in assigns the same.
func checkDeterministic(t *rapid.T, a Assignor, in Input, out Assignment) {
	again := mustAssign(t, a, permute(t, in))
	if !reflect.DeepEqual(out, again) {
		t.Fatalf("%s: permuted input assigned differently:\n%v\n%v", a.Name(), out, again)
	}
}

// compareTP orders partitions by topic, then partition.
func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}
