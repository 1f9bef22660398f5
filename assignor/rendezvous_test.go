package assignor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"pgregory.net/rapid"
)

// epsilons are the load slacks the tests draw from, exactly as fractions.
var epsilons = []struct {
	eps      float64
	num, den int64 // eps = num/den; den 0 means +Inf
}{
	{0, 0, 1}, {0.1, 1, 10}, {0.25, 1, 4}, {0.5, 1, 2}, {1, 1, 1}, {math.Inf(1), 1, 0},
}

// referenceCapacity is ⌈⌈P/n⌉·(1+eps)⌉ in exact arithmetic.
func referenceCapacity(partitions, members int, num, den int64) int {
	if den == 0 {
		return math.MaxInt32
	}
	even := (partitions + members - 1) / members
	c := new(big.Rat).Mul(big.NewRat(int64(even), 1), big.NewRat(den+num, den))
	q, r := new(big.Int).QuoRem(c.Num(), c.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return int(q.Int64())
}

// memberKeys returns the hash of every member's placement key.
func memberKeys(in Input) map[string]uint64 {
	keys := map[string]uint64{}
	for _, m := range in.Members {
		k := m.InstanceID
		if k == "" {
			k = m.ID
		}
		keys[m.ID] = hashString(k)
	}
	return keys
}

// weighAll weighs every subscriber of topic/partition, the plain way, and
// returns them by descending weight (ascending cost) with their costs: the
// definition that the ring walk must reproduce exactly.
func weighAll(keys map[string]uint64, subs []string, topic string, partition int32) ([]string, map[string]float64) {
	pp := hash2(hashString(topic), uint64(partition))
	c := map[string]float64{}
	for _, id := range subs {
		d := uint64(math.MaxUint64)
		for v := range ringPoints {
			d = min(d, memberPoint(keys[id], v)-pp)
		}
		c[id] = cost(keys[id], pp, d)
	}
	pref := slices.Clone(subs)
	slices.SortFunc(pref, func(a, b string) int {
		if c[a] != c[b] {
			if c[a] < c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return pref, c
}

// firstChoice is the member of highest weight for topic/partition.
func firstChoice(keys map[string]uint64, subs []string, topic string, partition int32) string {
	pref, _ := weighAll(keys, subs, topic, partition)
	return pref[0]
}

// rendezvousReference is the documented definition: take every (member,
// partition) pair of a subscriber and a partition of its topic, by
// descending weight (then member ID, then partition order); a partition goes
// to the member of the first pair in which the partition is still free and
// the member has room. What is left goes, in partition order, to its
// least-loaded subscriber (ties to the higher weight).
func rendezvousReference(in Input, num, den int64) Assignment {
	out := Assignment{}
	for _, m := range in.Members {
		out[m.ID] = []TopicPartition{}
	}
	ids, total := participants(in)
	if len(ids) == 0 {
		return out
	}
	capacity := referenceCapacity(total, len(ids), num, den)
	subs := subscribers(in)
	keys := memberKeys(in)
	topics := slices.Clone(in.Topics)
	slices.SortFunc(topics, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })

	type pair struct {
		c   float64 // cost, the inverse of the weight
		id  string
		tp  TopicPartition
		pos int // partition order
	}
	var pairs []pair
	var order []TopicPartition
	prefs := map[TopicPartition][]string{}
	for _, topic := range topics {
		if len(subs[topic.Name]) == 0 {
			continue
		}
		for p := range topic.Partitions {
			tp := TopicPartition{topic.Name, p}
			pref, c := weighAll(keys, subs[topic.Name], topic.Name, p)
			prefs[tp] = pref
			for _, id := range pref {
				pairs = append(pairs, pair{c[id], id, tp, len(order)})
			}
			order = append(order, tp)
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		switch {
		case a.c < b.c:
			return -1
		case a.c > b.c:
			return 1
		case a.id != b.id:
			return strings.Compare(a.id, b.id)
		}
		return a.pos - b.pos
	})
	owner := map[TopicPartition]string{}
	for _, pr := range pairs {
		if _, taken := owner[pr.tp]; !taken && len(out[pr.id]) < capacity {
			owner[pr.tp] = pr.id
			out[pr.id] = append(out[pr.id], pr.tp)
		}
	}
	for _, tp := range order {
		if _, taken := owner[tp]; taken {
			continue
		}
		pref := prefs[tp]
		chosen := pref[0]
		for _, id := range pref {
			if len(out[id]) < len(out[chosen]) {
				chosen = id
			}
		}
		owner[tp] = chosen
		out[chosen] = append(out[chosen], tp)
	}
	for _, tps := range out {
		slices.SortFunc(tps, compareTP)
	}
	return out
}

func TestRendezvousMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := rapid.SampledFrom(epsilons).Draw(t, "epsilon")
		in := genInput(t, genOpts{maxMembers: 8, maxPartitions: 12, homogeneous: rapid.Bool().Draw(t, "homogeneous")})
		out := mustAssign(t, Rendezvous(e.eps), in)
		checkValid(t, in, out)
		if want := rendezvousReference(in, e.num, e.den); !reflect.DeepEqual(out, want) {
			t.Fatalf("got  %v\nwant %v", out, want)
		}
		checkDeterministic(t, Rendezvous(e.eps), in, out)
	})
}

// TestRendezvousMatchesReferenceLarge compares with the reference on a group
// large enough that the ring walk stops long before it has seen every
// member, and on a heterogeneous one.
func TestRendezvousMatchesReferenceLarge(t *testing.T) {
	for _, tc := range []struct {
		name string
		eps  float64
		num  int64
		den  int64
		het  bool
	}{
		{"eps=0.25", 0.25, 1, 4, false},
		{"eps=0", 0, 0, 1, false},
		{"heterogeneous", 0.25, 1, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Topics: []Topic{{Name: "a", Partitions: 300}, {Name: "b", Partitions: 200}, {Name: "c", Partitions: 100}}}
			for i := range 90 {
				m := Member{ID: fmt.Sprintf("member-%03d", i)}
				if tc.het {
					m.Topics = [][]string{{"a"}, {"a", "b"}, {"c"}}[i%3]
				}
				in.Members = append(in.Members, m)
			}
			out := mustAssign(t, Rendezvous(tc.eps), in)
			checkValid(t, in, out)
			if want := rendezvousReference(in, tc.num, tc.den); !reflect.DeepEqual(out, want) {
				t.Fatalf("differs from the reference")
			}
		})
	}
}

// TestRendezvousOverCapacity covers heterogeneous subscriptions that the
// capacity cannot accommodate: a topic with a single subscriber.
func TestRendezvousOverCapacity(t *testing.T) {
	in := Input{
		Topics: []Topic{{Name: "solo", Partitions: 10}, {Name: "shared", Partitions: 10}},
		Members: []Member{
			{ID: "m1", Topics: []string{"solo", "shared"}},
			{ID: "m2", Topics: []string{"shared"}},
			{ID: "m3", Topics: []string{"shared"}},
			{ID: "m4", Topics: []string{"shared"}},
		},
	}
	out := mustAssign(t, Rendezvous(DefaultEpsilon), in)
	checkValid(t, in, out)
	if want := rendezvousReference(in, 1, 4); !reflect.DeepEqual(out, want) {
		t.Fatalf("got  %v\nwant %v", out, want)
	}
	// Capacity is ⌈⌈20/4⌉·1.25⌉ = 7, but m1 is solo's only subscriber.
	if n := len(out["m1"]); n < 10 {
		t.Fatalf("m1 holds %d, want all 10 of solo", n)
	}
}

func TestRendezvousLoadBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := rapid.SampledFrom(epsilons).Draw(t, "epsilon")
		in := genInput(t, genOpts{maxMembers: 12, maxPartitions: 40, homogeneous: true, noOwned: true})
		out := mustAssign(t, Rendezvous(e.eps), in)
		ids, total := participants(in)
		if len(ids) == 0 {
			return
		}
		capacity := referenceCapacity(total, len(ids), e.num, e.den)
		for _, id := range ids {
			if len(out[id]) > capacity {
				t.Fatalf("member %s holds %d, capacity %d", id, len(out[id]), capacity)
			}
		}
	})
}

// TestRendezvousLeave checks what a leave can move: a partition changes owner
// only if the leaver owned it or if it was not placed with its
// highest-weight member (overflow), before or after. Weights do not depend
// on the other members, so this holds exactly.
func TestRendezvousLeave(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := rapid.SampledFrom(epsilons).Draw(t, "epsilon")
		in := genInput(t, genOpts{maxMembers: 12, maxPartitions: 40, homogeneous: rapid.Bool().Draw(t, "homogeneous"), noOwned: true})
		k := rapid.IntRange(0, len(in.Members)-1).Draw(t, "leaver")
		leaver := in.Members[k].ID
		after := in
		after.Members = slices.Delete(slices.Clone(in.Members), k, k+1)

		a := mustAssign(t, Rendezvous(e.eps), in)
		b := mustAssign(t, Rendezvous(e.eps), after)
		ownerA, ownerB := owners(a), owners(b)
		subsA, subsB := subscribers(in), subscribers(after)
		for tp, oa := range ownerA {
			ob, ok := ownerB[tp]
			if !ok || oa == ob || oa == leaver {
				continue
			}
			firstA := firstChoice(memberKeys(in), subsA[tp.Topic], tp.Topic, tp.Partition)
			firstB := firstChoice(memberKeys(after), subsB[tp.Topic], tp.Topic, tp.Partition)
			if oa == firstA && ob == firstB {
				t.Fatalf("%v moved from %s to %s, both first choices, though %s left", tp, oa, ob, leaver)
			}
		}
	})
}

// TestRendezvousOverflow checks the leave bound on a realistic group and that
// overflow stays small: a weight function that spread first choices
// unevenly would overflow far more. Figures are logged.
func TestRendezvousOverflow(t *testing.T) {
	in := Input{Topics: []Topic{{Name: "t", Partitions: 2000}}}
	for i := range 100 {
		in.Members = append(in.Members, Member{ID: fmt.Sprintf("member-%03d", i)})
	}
	after := in
	after.Members = in.Members[1:]
	a := mustAssign(t, Rendezvous(DefaultEpsilon), in)
	b := mustAssign(t, Rendezvous(DefaultEpsilon), after)

	overflowed := func(in Input, out Assignment) map[TopicPartition]bool {
		subs, keys := subscribers(in), memberKeys(in)
		o := map[TopicPartition]bool{}
		for id, tps := range out {
			for _, tp := range tps {
				if firstChoice(keys, subs[tp.Topic], tp.Topic, tp.Partition) != id {
					o[tp] = true
				}
			}
		}
		return o
	}
	oa, ob := overflowed(in, a), overflowed(after, b)
	either := len(oa)
	for tp := range ob {
		if !oa[tp] {
			either++
		}
	}
	held, moves := len(a[in.Members[0].ID]), Moves(a, b)
	t.Logf("leaver held %d of 2000; %d moved; overflow %d before, %d after; imbalance %d -> %d",
		held, moves, len(oa), len(ob), Imbalance(a), Imbalance(b))
	if moves > held+either {
		t.Errorf("%d moved, more than the leaver's %d plus %d overflowed", moves, held, either)
	}
	for _, n := range []int{len(oa), len(ob)} {
		if n > 2000/10 {
			t.Errorf("%d of 2000 partitions overflowed, want under 10%%", n)
		}
	}
}

// TestHash2 checks the inlined hash against the xxhash library.
func TestHash2(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := rapid.Uint64().Draw(t, "a"), rapid.Uint64().Draw(t, "b")
		var buf [16]byte
		binary.LittleEndian.PutUint64(buf[:8], a)
		binary.LittleEndian.PutUint64(buf[8:], b)
		if got, want := hash2(a, b), xxhash.Sum64(buf[:]); got != want {
			t.Fatalf("hash2(%#x, %#x) = %#x, xxhash says %#x", a, b, got, want)
		}
	})
}

// TestRing checks that the ring's points are sorted and that search finds
// the first point at or after any position.
func TestRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 300).Draw(t, "points")
		pos, mem := make([]uint64, n), make([]int32, n)
		for k := range n {
			// Few distinct high bits and repeats, to crowd buckets.
			pos[k] = rapid.SampledFrom([]uint64{0, 1, 1 << 62, 1<<63 + 5, math.MaxUint64}).Draw(t, "base") + uint64(rapid.IntRange(0, 3).Draw(t, "off"))
			mem[k] = int32(rapid.IntRange(0, 9).Draw(t, "mem"))
		}
		r := newRing(slices.Clone(pos), slices.Clone(mem))
		for k := 1; k < n; k++ {
			if r.pos[k] < r.pos[k-1] || r.pos[k] == r.pos[k-1] && r.mem[k] < r.mem[k-1] {
				t.Fatalf("not sorted at %d: %v %v", k, r.pos, r.mem)
			}
		}
		for _, pp := range append(pos, 0, 2, 1<<62-1, math.MaxUint64) {
			want, _ := slices.BinarySearch(r.pos, pp)
			if got := r.search(pp); got != want {
				t.Fatalf("search(%#x) = %d, want %d", pp, got, want)
			}
		}
	})
}

func TestRendezvousEpsilon(t *testing.T) {
	in := Input{Topics: []Topic{{Name: "t", Partitions: 8}}, Members: []Member{{ID: "a"}}}
	for _, eps := range []float64{-0.1, math.NaN(), math.Inf(-1)} {
		if _, err := Rendezvous(eps).Assign(in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("epsilon %v: err = %v, want ErrInvalidInput", eps, err)
		}
	}
	for _, tc := range []struct {
		p, n int32
		eps  float64
		want int32
	}{
		{64, 16, 0.25, 5},
		{100, 10, 0.1, 11}, // 10 × 1.1 is 11.000000000000002 in floats
		{64, 16, 0, 4},
		{65, 16, 0, 5},
		{1000, 3, 1, 668},
		{10, 3, math.Inf(1), math.MaxInt32},
	} {
		if got := capacity(tc.p, tc.n, tc.eps); got != tc.want {
			t.Errorf("capacity(%d, %d, %v) = %d, want %d", tc.p, tc.n, tc.eps, got, tc.want)
		}
	}
}
