package assignor

import (
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// participants returns the IDs of the members whose subscription matches a
// partition, and how many partitions those subscriptions cover (for a
// homogeneous input, where they all match the same).
func participants(in Input) (ids []string, total int) {
	subs := subscribers(in)
	set := map[string]bool{}
	for _, s := range subs {
		for _, id := range s {
			set[id] = true
		}
	}
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, tp := range in.Topics {
		if len(subs[tp.Name]) > 0 {
			total += int(tp.Partitions)
		}
	}
	return ids, total
}

// minMoves is the counting reference: the fewest partitions that must change
// owner to get from the valid ownership prev to any balanced assignment. In
// a balanced assignment of P partitions to n members exactly r = P mod n
// members hold q+1 = ⌊P/n⌋+1 and the rest q; a member can keep at most
// min(held, quota) of what it holds. It tries every choice of the r members,
// so it does not rely on Uniform's argument for which members those are.
func minMoves(in Input, prev Assignment) int {
	ids, total := participants(in)
	n := len(ids)
	if n == 0 {
		return 0
	}
	q, r := total/n, total%n
	held := 0
	for _, id := range ids {
		held += len(prev[id])
	}
	bestKept := 0
	for set := range 1 << n {
		if bits.OnesCount(uint(set)) != r {
			continue
		}
		kept := 0
		for k, id := range ids {
			quota := q
			if set&(1<<k) != 0 {
				quota++
			}
			kept += min(len(prev[id]), quota)
		}
		bestKept = max(bestKept, kept)
	}
	return held - bestKept
}

// checkBalanced checks that every participant holds ⌊P/n⌋ or ⌈P/n⌉.
func checkBalanced(t fataler, in Input, out Assignment) {
	t.Helper()
	ids, total := participants(in)
	if len(ids) == 0 {
		return
	}
	q := total / len(ids)
	for _, id := range ids {
		if l := len(out[id]); l != q && (l != q+1 || total%len(ids) == 0) {
			t.Fatalf("member %s holds %d, want %d or %d (P=%d, n=%d)", id, l, q, q+1, total, len(ids))
		}
	}
	if Imbalance(restrict(out, ids)) > 1 {
		t.Fatalf("imbalance %d among %v", Imbalance(restrict(out, ids)), ids)
	}
}

func restrict(a Assignment, ids []string) Assignment {
	out := Assignment{}
	for _, id := range ids {
		out[id] = a[id]
	}
	return out
}

func TestUniformHomogeneous(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t, genOpts{maxMembers: 8, maxPartitions: 12, homogeneous: true})
		out := mustAssign(t, Uniform(), in)
		checkValid(t, in, out)
		checkBalanced(t, in, out)

		prev := validOwners(in)
		if got, want := Moves(prev, out), minMoves(in, prev); got != want {
			t.Fatalf("moved %d partitions, the minimum is %d\nheld: %v\nout:  %v", got, want, prev, out)
		}
		checkDeterministic(t, Uniform(), in, out)

		// A balanced, valid assignment is kept as it is.
		again := mustAssign(t, Uniform(), withOwnedFrom(in, out))
		if !reflect.DeepEqual(out, again) {
			t.Fatalf("reassigning its own output moved partitions:\n%v\n%v", out, again)
		}
	})
}

// TestUniformChurn runs a group through joins, leaves and crashed members
// that come back claiming what they held, checking after every step that the
// group is balanced and that exactly the necessary partitions moved.
func TestUniformChurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		partitions := rapid.IntRange(1, 40).Draw(t, "partitions")
		in := Input{Topics: []Topic{{Name: "t", Partitions: int32(partitions)}, {Name: "u", Partitions: 3}}}
		next := 0
		join := func() {
			in.Members = append(in.Members, Member{ID: fmt.Sprintf("m%02d", next)})
			next++
		}
		for range rapid.IntRange(1, 4).Draw(t, "initial") {
			join()
		}
		cur := mustAssign(t, Uniform(), in)
		var crashed []Member
		for step := range 12 {
			switch op := rapid.SampledFrom([]string{"join", "leave", "return"}).Draw(t, "op"); {
			case op == "join" && len(in.Members) < 9:
				join()
			case op == "leave" && len(in.Members) > 1:
				k := rapid.IntRange(0, len(in.Members)-1).Draw(t, "who")
				gone := in.Members[k]
				gone.Owned = cur[gone.ID]
				crashed = append(crashed, gone)
				in.Members = slices.Delete(slices.Clone(in.Members), k, k+1)
			case op == "return" && len(crashed) > 0 && len(in.Members) < 9:
				// A crashed member rejoins with its stale claims,
				// which may now conflict with the new owners'.
				k := rapid.IntRange(0, len(crashed)-1).Draw(t, "who")
				in.Members = append(in.Members, crashed[k])
				crashed = slices.Delete(crashed, k, k+1)
			default:
				continue
			}
			stale := map[string][]TopicPartition{}
			for _, m := range in.Members {
				if _, known := cur[m.ID]; !known {
					stale[m.ID] = m.Owned // a returning member's claims
				}
			}
			in = withOwnedFrom(in, cur)
			for i, m := range in.Members {
				if claims, ok := stale[m.ID]; ok {
					in.Members[i].Owned = claims
				}
			}
			// Moves counts against what members held and could keep.
			prev := validOwners(in)
			out := mustAssign(t, Uniform(), in)
			checkValid(t, in, out)
			checkBalanced(t, in, out)
			if got, want := Moves(prev, out), minMoves(in, prev); got != want {
				t.Fatalf("step %d: moved %d, minimum %d", step, got, want)
			}
			cur = out
		}
	})
}

func TestUniformHeterogeneous(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t, genOpts{maxMembers: 8, maxPartitions: 12})
		out := mustAssign(t, Uniform(), in)
		checkValid(t, in, out)
		checkDeterministic(t, Uniform(), in, out)

		// No partition could move to another subscriber of its topic
		// and narrow the gap between the two.
		l := loads(out)
		subs := subscribers(in)
		for id, tps := range out {
			for _, tp := range tps {
				for _, s := range subs[tp.Topic] {
					if l[id] > l[s]+1 {
						t.Fatalf("%v is with %s (%d partitions) but %s subscribes and has %d", tp, id, l[id], s, l[s])
					}
				}
			}
		}

		// A valid, locally balanced assignment is kept as it is.
		again := mustAssign(t, Uniform(), withOwnedFrom(in, out))
		if !reflect.DeepEqual(out, again) {
			t.Fatalf("reassigning its own output moved partitions:\n%v\n%v", out, again)
		}
	})
}

// TestUniformHeterogeneousSticky checks that the greedy keeps what it can:
// partitions stay with valid owners unless they must move for balance, so a
// member whose claims do not exceed the least-loaded subscriber's by more
// than one keeps them all.
func TestUniformHeterogeneousSticky(t *testing.T) {
	in := Input{
		Topics: []Topic{{Name: "a", Partitions: 4}, {Name: "b", Partitions: 4}},
		Members: []Member{
			{ID: "m1", Topics: []string{"a"}, Owned: []TopicPartition{{"a", 3}, {"a", 2}}},
			{ID: "m2", Topics: []string{"a", "b"}, Owned: []TopicPartition{{"a", 0}, {"b", 1}}},
			{ID: "m3", Topics: []string{"b"}},
		},
	}
	out := mustAssign(t, Uniform(), in)
	checkValid(t, in, out)
	// Free: a1, b0, b2, b3. Topics a and b have two subscribers each, so
	// a goes first: a1 to m1 (tied with m2 at two, m1 sorts first). Then
	// b0 and b2 to m3 (least loaded), b3 to m2 (tied with m3 at two).
	want := Assignment{
		"m1": {{"a", 1}, {"a", 2}, {"a", 3}},
		"m2": {{"a", 0}, {"b", 1}, {"b", 3}},
		"m3": {{"b", 0}, {"b", 2}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got  %v\nwant %v", out, want)
	}
}

func TestUniformScenarios(t *testing.T) {
	group := func(partitions int32, ids ...string) Input {
		in := Input{Topics: []Topic{{Name: "t", Partitions: partitions}}}
		for _, id := range ids {
			in.Members = append(in.Members, Member{ID: id})
		}
		return in
	}
	ids := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("m%02d", i))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		before    Input
		after     func(Input) Input
		wantMoves int
	}{
		{
			name:   "17th member joins 64 partitions",
			before: group(64, ids(16)...),
			after: func(in Input) Input {
				in.Members = append(in.Members, Member{ID: "new"})
				return in
			},
			// 13 members keep 4, three give one each to the new member.
			wantMoves: 3,
		},
		{
			name:   "one of 16 members leaves",
			before: group(64, ids(16)...),
			after: func(in Input) Input {
				in.Members = in.Members[1:]
				return in
			},
			wantMoves: 4, // the leaver's four, nobody else's
		},
		{
			name:      "nothing changes",
			before:    group(64, ids(16)...),
			after:     func(in Input) Input { return in },
			wantMoves: 0,
		},
		{
			name:   "second member joins",
			before: group(7, "a"),
			after: func(in Input) Input {
				in.Members = append(in.Members, Member{ID: "b"})
				return in
			},
			wantMoves: 3, // a keeps four of its seven
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := mustAssign(t, Uniform(), tc.before)
			in := withOwnedFrom(tc.after(tc.before), prev)
			out := mustAssign(t, Uniform(), in)
			checkValid(t, in, out)
			checkBalanced(t, in, out)
			if got := Moves(prev, out); got != tc.wantMoves {
				t.Fatalf("Moves = %d, want %d", got, tc.wantMoves)
			}
		})
	}
}
