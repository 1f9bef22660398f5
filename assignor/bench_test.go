package assignor_test

import (
	"fmt"
	"testing"

	"github.com/tenure-dev/tenure/assignor"
)

// benchSizes are the group shapes the benchmarks cover: the default tenure
// group, a mid-sized one, and the 100,000-partition, 10,000-member group that
// must assign in under 100 ms.
var benchSizes = []struct {
	partitions, members, topics int
}{
	{64, 16, 1},
	{1000, 100, 10},
	{100000, 10000, 10},
}

// benchInput returns a homogeneous group of members subscribed to topics
// topics that share partitions partitions, with member IDs shaped like
// client-generated ones.
func benchInput(partitions, members, topics int) assignor.Input {
	in := assignor.Input{}
	names := make([]string, topics)
	for t := range topics {
		names[t] = fmt.Sprintf("events.shard-%02d", t)
		n := partitions / topics
		if t < partitions%topics {
			n++
		}
		in.Topics = append(in.Topics, assignor.Topic{Name: names[t], Partitions: int32(n)})
	}
	for i := range members {
		in.Members = append(in.Members, assignor.Member{
			ID:     fmt.Sprintf("consumer-%05d-%08x-4e1f-9c2b", i, uint32(i)*2654435761),
			Topics: names,
		})
	}
	return in
}

// withOwned sets each member's Owned from a.
func withOwned(in assignor.Input, a assignor.Assignment) assignor.Input {
	ms := make([]assignor.Member, len(in.Members))
	copy(ms, in.Members)
	for i := range ms {
		ms[i].Owned = a[ms[i].ID]
	}
	in.Members = ms
	return in
}

// stickyCases derive the inputs of the sticky benchmarks from a fresh group.
var stickyCases = []struct {
	name  string
	input func(tb testing.TB, in assignor.Input) assignor.Input
}{
	{"fresh", func(_ testing.TB, in assignor.Input) assignor.Input { return in }},
	{"steady", func(tb testing.TB, in assignor.Input) assignor.Input {
		return withOwned(in, mustAssign(tb, assignor.Uniform(), in))
	}},
	{"join", func(tb testing.TB, in assignor.Input) assignor.Input {
		// The group without its last member is balanced; then it joins.
		before := in
		before.Members = in.Members[:len(in.Members)-1]
		return withOwned(in, mustAssign(tb, assignor.Uniform(), before))
	}},
	{"leave", func(tb testing.TB, in assignor.Input) assignor.Input {
		// The group is balanced with one more member, which crashes.
		extra := in
		extra.Members = append(append([]assignor.Member(nil), in.Members...), assignor.Member{
			ID: "consumer-zz-crashed", Topics: in.Members[0].Topics,
		})
		return withOwned(in, mustAssign(tb, assignor.Uniform(), extra))
	}},
}

func mustAssign(tb testing.TB, a assignor.Assignor, in assignor.Input) assignor.Assignment {
	tb.Helper()
	out, err := a.Assign(in)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func benchAssign(b *testing.B, a assignor.Assignor, in assignor.Input) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Assign(in); err != nil {
			b.Fatal(err)
		}
	}
}

func sizeName(partitions, members int) string {
	return fmt.Sprintf("P=%d/M=%d", partitions, members)
}

func BenchmarkUniform(b *testing.B) {
	for _, c := range stickyCases {
		for _, s := range benchSizes {
			b.Run(c.name+"/"+sizeName(s.partitions, s.members), func(b *testing.B) {
				in := c.input(b, benchInput(s.partitions, s.members, s.topics))
				benchAssign(b, assignor.Uniform(), in)
			})
		}
	}
}

func BenchmarkRange(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(sizeName(s.partitions, s.members), func(b *testing.B) {
			benchAssign(b, assignor.Range(), benchInput(s.partitions, s.members, s.topics))
		})
	}
}

func BenchmarkRendezvous(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(sizeName(s.partitions, s.members), func(b *testing.B) {
			benchAssign(b, assignor.Rendezvous(assignor.DefaultEpsilon), benchInput(s.partitions, s.members, s.topics))
		})
	}
}

// BenchmarkUniformHeterogeneous covers the greedy path: half the members
// subscribe to every topic, the other half to the first half of the topics.
func BenchmarkUniformHeterogeneous(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(sizeName(s.partitions, s.members), func(b *testing.B) {
			in := benchInput(s.partitions, s.members, max(2, s.topics))
			names := in.Members[0].Topics
			for i := range in.Members {
				if i%2 == 1 {
					in.Members[i].Topics = names[:len(names)/2]
				}
			}
			benchAssign(b, assignor.Uniform(), in)
		})
	}
}
