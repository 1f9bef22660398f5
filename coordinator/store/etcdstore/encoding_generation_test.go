package etcdstore

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
)

// randGenerationRecord is a generation log entry drawn from rng, with
// plain strings most of the time (else from groupValueStrings), nil and
// empty lists, zero and extreme numbers and times.
func randGenerationRecord(rng *rand.Rand) *coordinator.GenerationRecord {
	str := randStr(rng)
	num := func() int64 { return randNum(rng, []int64{math.MinInt32, math.MaxInt32, -1, 1}, 1<<30) }
	when := func() time.Time {
		if rng.IntN(3) == 0 {
			return time.Time{}
		}
		return time.Unix(0, rng.Int64N(1<<62))
	}
	strs := func() []string {
		n := rng.IntN(5) - 1
		if n < 0 {
			return nil
		}
		out := make([]string, n)
		for i := range out {
			out[i] = str()
		}
		return out
	}
	r := &coordinator.GenerationRecord{
		Group: "g", Epoch: int32(num()), Type: coordinator.GroupType(rng.IntN(256)), Time: when(), Reason: str(),
		Members: int(num()), Joined: strs(), Left: strs(), MinMoves: int(num()), Assigned: rng.IntN(2) == 0,
		Handoff: coordinator.Handoff{Done: rng.IntN(2) == 0, Completed: when(), Granted: int(num()), Superseded: int(num()),
			Unowned: time.Duration(num()), MaxUnowned: time.Duration(num())},
		AfterFailover: when(), Trim: int32(num()),
	}
	if n := rng.IntN(6) - 1; n >= 0 {
		r.Moves = make([]coordinator.Move, n)
		for i := range r.Moves {
			r.Moves[i] = coordinator.Move{Topic: str(), Partition: int32(num()), From: str(), OldToken: epoch.Token(num()),
				To: str(), NewToken: epoch.Token(num())}
		}
	}
	return r
}

// joinGeneration is the generation log entry of a bump of BenchmarkJoin's
// fleet, closed: a member joined, and took one partition from another
// member and one that had no owner.
func joinGeneration() *coordinator.GenerationRecord {
	at := time.Unix(1700000000, 5)
	return &coordinator.GenerationRecord{Group: "bench-00017", Epoch: 9, Type: coordinator.Consumer, Time: at,
		Reason: "member-joined", Members: 9, Joined: []string{"bench-00017-008-0000000000"}, Left: []string{},
		Moves: []coordinator.Move{
			{Topic: "bench", Partition: 3, From: "bench-00017-001-0000000000", OldToken: 7, To: "bench-00017-008-0000000000", NewToken: 9},
			{Topic: "bench", Partition: 60, To: "bench-00017-008-0000000000", NewToken: 9},
		},
		MinMoves: 7, Assigned: true,
		Handoff: coordinator.Handoff{Done: true, Completed: at.Add(time.Second), Granted: 1, Superseded: 1, Unowned: time.Second, MaxUnowned: time.Second},
	}
}

// checkEncodeGeneration checks that the fast encoder writes what the
// general one writes for r, byte for byte, and takes every entry whose
// strings are plain.
func checkEncodeGeneration(t *testing.T, r *coordinator.GenerationRecord) {
	t.Helper()
	strs := append(append([]string{r.Reason}, r.Joined...), r.Left...)
	for _, m := range r.Moves {
		strs = append(strs, m.Topic, m.From, m.To)
	}
	got, ok := appendGenerationFast([]byte("prefix"), r)
	checkFastEncoder(t, r, marshalGeneration(r), got, ok, allPlain(strs))
}

// TestGenerationValueFast runs FuzzEncodeGenerationValues' check over
// random entries, and checks a join's entry byte for byte and read back.
func TestGenerationValueFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 48))
	fast := 0
	for range 20000 {
		r := randGenerationRecord(rng)
		checkEncodeGeneration(t, r)
		if _, ok := appendGenerationFast(nil, r); ok {
			fast++
		}
	}
	if fast < 10000 {
		t.Fatalf("the fast encoder took %d of 20000 entries", fast)
	}
	r := joinGeneration()
	checkEncodeGeneration(t, r)
	want := `{"v":2,"t":2,"at":1700000000000000005,"r":"member-joined","n":9,"j":["bench-00017-008-0000000000"],"l":[],` +
		`"m":[{"t":"bench","p":3,"f":"bench-00017-001-0000000000","fk":7,"to":"bench-00017-008-0000000000","tk":9},` +
		`{"t":"bench","p":60,"to":"bench-00017-008-0000000000","tk":9}],"mm":7,"a":true,"hd":true,"hc":1700000001000000005,` +
		`"hg":1,"hs":1,"hu":1000000000,"hm":1000000000}`
	if got, _ := appendGenerationFast(nil, r); string(got) != want {
		t.Fatalf("wrote\n%s\nwant\n%s", got, want)
	}
	back, err := decodeValue(parsedKey{kind: kindLog, group: r.Group, partition: r.Epoch}, []byte(want))
	if err != nil {
		t.Fatal(err)
	}
	g := back.(*coordinator.GenerationRecord)
	if again := encodeValue(g); g.Reason != r.Reason || len(g.Moves) != 2 || g.Moves[1] != r.Moves[1] || string(again) != want {
		t.Fatalf("read back as %+v, written again as\n%s\nwant\n%s", g, again, want)
	}
}

// FuzzEncodeGenerationValues checks that the fast encoder writes what the
// general one writes, byte for byte, for entries drawn from a seed.
func FuzzEncodeGenerationValues(f *testing.F) {
	for s := range uint64(16) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		for range 8 {
			checkEncodeGeneration(t, randGenerationRecord(rng))
		}
	})
}

// BenchmarkGenerationValue encodes joinGeneration as the store's writer
// did before the fast encoder (general) and as it does now (fast).
func BenchmarkGenerationValue(b *testing.B) {
	r := joinGeneration()
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = string(marshalGeneration(r))
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = valueString(r)
		}
	})
}
