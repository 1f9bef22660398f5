package assignor

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// rangeReference is Kafka's range assignment written the plain way.
func rangeReference(in Input) Assignment {
	out := Assignment{}
	for _, m := range in.Members {
		out[m.ID] = []TopicPartition{}
	}
	topics := slices.Clone(in.Topics)
	slices.SortFunc(topics, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	subs := subscribers(in)
	byID := map[string]Member{}
	for _, m := range in.Members {
		byID[m.ID] = m
	}
	for _, topic := range topics {
		var ms []Member
		for _, id := range subs[topic.Name] {
			ms = append(ms, byID[id])
		}
		slices.SortFunc(ms, func(a, b Member) int {
			switch {
			case a.InstanceID != "" && b.InstanceID != "":
				if c := strings.Compare(a.InstanceID, b.InstanceID); c != 0 {
					return c
				}
			case a.InstanceID != "":
				return -1
			case b.InstanceID != "":
				return 1
			}
			return strings.Compare(a.ID, b.ID)
		})
		n := int32(len(ms))
		for k, m := range ms {
			k := int32(k)
			per, extra := topic.Partitions/n, topic.Partitions%n
			first := per*k + min(k, extra)
			size := per
			if k < extra {
				size++
			}
			for p := first; p < first+size; p++ {
				out[m.ID] = append(out[m.ID], TopicPartition{topic.Name, p})
			}
		}
	}
	return out
}

func TestRangeMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t, genOpts{maxMembers: 8, maxPartitions: 12})
		out := mustAssign(t, Range(), in)
		checkValid(t, in, out)
		if want := rangeReference(in); !reflect.DeepEqual(out, want) {
			t.Fatalf("got  %v\nwant %v", out, want)
		}
		checkDeterministic(t, Range(), in, out)
	})
}

// TestRangeKafkaExample is the example of Kafka's RangeAssignor javadoc.
func TestRangeKafkaExample(t *testing.T) {
	in := Input{
		Topics:  []Topic{{Name: "t1", Partitions: 3}, {Name: "t0", Partitions: 3}},
		Members: []Member{{ID: "C1"}, {ID: "C0"}},
	}
	want := Assignment{
		"C0": {{"t0", 0}, {"t0", 1}, {"t1", 0}, {"t1", 1}},
		"C1": {{"t0", 2}, {"t1", 2}},
	}
	if got := mustAssign(t, Range(), in); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// TestRangeStaticFirst checks Kafka's member order: static members, by
// instance ID, ahead of dynamic ones, whatever their member IDs.
func TestRangeStaticFirst(t *testing.T) {
	in := Input{
		Topics: []Topic{{Name: "t", Partitions: 3}},
		Members: []Member{
			{ID: "a"},
			{ID: "b", InstanceID: "z"},
			{ID: "c", InstanceID: "y"},
		},
	}
	want := Assignment{"c": {{"t", 0}}, "b": {{"t", 1}}, "a": {{"t", 2}}}
	if got := mustAssign(t, Range(), in); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}
