package assignor_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tenure-dev/tenure/assignor"
)

// show prints an assignment one member per line, in member order.
func show(a assignor.Assignment) {
	ids := make([]string, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		var parts []string
		for _, tp := range a[id] {
			parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
		}
		fmt.Printf("  %s: %s\n", id, strings.Join(parts, " "))
	}
}

// A fourth member joins a group of three: each member reports what it holds,
// and only the partitions the newcomer needs move.
func ExampleUniform() {
	topics := []assignor.Topic{{Name: "events", Partitions: 8}}
	u := assignor.Uniform()

	before, err := u.Assign(assignor.Input{
		Topics:  topics,
		Members: []assignor.Member{{ID: "a"}, {ID: "b"}, {ID: "c"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("three members:")
	show(before)

	after, err := u.Assign(assignor.Input{
		Topics: topics,
		Members: []assignor.Member{
			{ID: "a", Owned: before["a"]},
			{ID: "b", Owned: before["b"]},
			{ID: "c", Owned: before["c"]},
			{ID: "d"},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("d joins:")
	show(after)
	fmt.Println("moved:", assignor.Moves(before, after))
	// Output:
	// three members:
	//   a: events/0 events/1 events/2
	//   b: events/3 events/4 events/5
	//   c: events/6 events/7
	// d joins:
	//   a: events/0 events/1
	//   b: events/3 events/4
	//   c: events/6 events/7
	//   d: events/2 events/5
	// moved: 2
}

// Range deals each topic in contiguous ranges, the first members taking the
// remainder: the example of Kafka's RangeAssignor documentation.
func ExampleRange() {
	out, err := assignor.Range().Assign(assignor.Input{
		Topics:  []assignor.Topic{{Name: "t0", Partitions: 3}, {Name: "t1", Partitions: 3}},
		Members: []assignor.Member{{ID: "C0"}, {ID: "C1"}},
	})
	if err != nil {
		panic(err)
	}
	show(out)
	// Output:
	//   C0: t0/0 t0/1 t1/0 t1/1
	//   C1: t0/2 t1/2
}

// Rendezvous places partitions from the member set alone. When a member
// leaves, the others keep what they had unless a full member's overflow must
// go elsewhere; here only the leaver's partitions move.
func ExampleRendezvous() {
	topics := []assignor.Topic{{Name: "events", Partitions: 12}}
	r := assignor.Rendezvous(assignor.DefaultEpsilon)

	before, err := r.Assign(assignor.Input{
		Topics:  topics,
		Members: []assignor.Member{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("four members (at most 4 each):")
	show(before)

	after, err := r.Assign(assignor.Input{
		Topics:  topics,
		Members: []assignor.Member{{ID: "a"}, {ID: "b"}, {ID: "d"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("c leaves (at most 5 each):")
	show(after)
	fmt.Printf("c held %d, moved: %d\n", len(before["c"]), assignor.Moves(before, after))
	// Output:
	// four members (at most 4 each):
	//   a: events/0 events/10 events/11
	//   b: events/4 events/6
	//   c: events/5 events/7 events/8 events/9
	//   d: events/1 events/2 events/3
	// c leaves (at most 5 each):
	//   a: events/0 events/7 events/10 events/11
	//   b: events/4 events/5 events/6 events/9
	//   d: events/1 events/2 events/3 events/8
	// c held 4, moved: 4
}

// Imbalance is the spread between the most and the least loaded member;
// Moves counts the partitions that changed owner. Range, which ignores what
// members hold, moves more than Uniform when a member joins.
func ExampleMoves() {
	topics := []assignor.Topic{{Name: "a", Partitions: 5}, {Name: "b", Partitions: 5}}
	three := []assignor.Member{{ID: "m1"}, {ID: "m2"}, {ID: "m3"}}
	for _, name := range []string{"range", "uniform"} {
		a, _ := assignor.ByName(name)
		before, _ := a.Assign(assignor.Input{Topics: topics, Members: three})
		four := []assignor.Member{{ID: "m0"}}
		for _, m := range three {
			four = append(four, assignor.Member{ID: m.ID, Owned: before[m.ID]})
		}
		after, _ := a.Assign(assignor.Input{Topics: topics, Members: four})
		fmt.Printf("%s: imbalance %d -> %d, %d of 10 partitions moved\n",
			name, assignor.Imbalance(before), assignor.Imbalance(after), assignor.Moves(before, after))
	}
	// Output:
	// range: imbalance 2 -> 2, 6 of 10 partitions moved
	// uniform: imbalance 1 -> 1, 2 of 10 partitions moved
}

// ByName resolves the protocol names that group members send.
func ExampleByName() {
	for _, name := range append(assignor.Names(), "roundrobin") {
		a, ok := assignor.ByName(name)
		if !ok {
			fmt.Printf("%s: unknown\n", name)
			continue
		}
		fmt.Printf("%s: %s\n", name, a.Name())
	}
	// Output:
	// uniform: uniform
	// range: range
	// rendezvous: rendezvous
	// roundrobin: unknown
}
