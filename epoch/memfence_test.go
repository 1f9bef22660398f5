package epoch_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
)

// fataler is what testing.T and rapid.T have in common.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// admitResult classifies an Admit outcome so that two fences can be
// compared: "ok", "none" (ErrNoToken) or the StaleError's message.
func admitResult(t fataler, err error) string {
	t.Helper()
	if err == nil {
		return "ok"
	}
	if errors.Is(err, epoch.ErrNoToken) {
		if errors.Is(err, epoch.ErrStale) {
			t.Fatalf("error %v wraps both ErrNoToken and ErrStale", err)
		}
		return "none"
	}
	var se *epoch.StaleError
	if !errors.As(err, &se) || !errors.Is(err, epoch.ErrStale) {
		t.Fatalf("error %v is neither ErrNoToken nor a StaleError wrapping ErrStale", err)
	}
	return se.Error()
}

func TestMemFenceAdmit(t *testing.T) {
	type step struct {
		p       epoch.Partition
		tok     epoch.Token
		want    string // "ok", "none", or the StaleError's message
		current epoch.Token
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first token is admitted", []step{
			{3, 7, "ok", 7},
		}},
		{"equal token is admitted", []step{
			{3, 7, "ok", 7},
			{3, 7, "ok", 7},
		}},
		{"older token is rejected and changes nothing", []step{
			{3, 7, "ok", 7},
			{3, 6, "epoch: stale token 6 for partition 3 (current 7)", 7},
			{3, 1, "epoch: stale token 1 for partition 3 (current 7)", 7},
		}},
		{"newer token replaces", []step{
			{3, 7, "ok", 7},
			{3, 9, "ok", 9},
			{3, 8, "epoch: stale token 8 for partition 3 (current 9)", 9},
		}},
		{"zero and negative tokens carry no ownership", []step{
			{3, 0, "none", epoch.None},
			{3, -1, "none", epoch.None},
			{3, 2, "ok", 2},
			{3, 0, "none", 2},
			{3, math.MinInt64, "none", 2},
		}},
		{"partitions are independent", []step{
			{0, 5, "ok", 5},
			{1, 2, "ok", 2},
			{0, 3, "epoch: stale token 3 for partition 0 (current 5)", 5},
			{1, 3, "ok", 3},
		}},
		{"last dense and first sparse partitions", []step{
			{epoch.DenseLimit - 1, 4, "ok", 4},
			{epoch.DenseLimit, 2, "ok", 2},
			{epoch.DenseLimit, 1, "epoch: stale token 1 for partition 256 (current 2)", 2},
			{epoch.DenseLimit - 1, 3, "epoch: stale token 3 for partition 255 (current 4)", 4},
		}},
		{"negative and extreme partitions", []step{
			{-1, 4, "ok", 4},
			{math.MinInt32, 9, "ok", 9},
			{math.MaxInt32, 1, "ok", 1},
			{-1, 3, "epoch: stale token 3 for partition -1 (current 4)", 4},
			{math.MinInt32, 9, "ok", 9},
			{math.MaxInt32, math.MaxInt64, "ok", math.MaxInt64},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f epoch.MemFence
			for i, s := range tt.steps {
				got := admitResult(t, f.Admit(context.Background(), s.p, s.tok))
				if got != s.want {
					t.Errorf("step %d: Admit(%d, %d) = %q, want %q", i, s.p, s.tok, got, s.want)
				}
				if cur := f.Current(s.p); cur != s.current {
					t.Errorf("step %d: Current(%d) = %v, want %v", i, s.p, cur, s.current)
				}
			}
		})
	}
}

func TestMemFenceStaleErrorFields(t *testing.T) {
	var f epoch.MemFence
	ctx := context.Background()
	if err := f.Admit(ctx, 300, 10); err != nil {
		t.Fatal(err)
	}
	err := f.Admit(ctx, 300, 4)
	var se *epoch.StaleError
	if !errors.As(err, &se) {
		t.Fatalf("Admit(300, 4) = %v, want a *StaleError", err)
	}
	if want := (epoch.StaleError{Partition: 300, Token: 4, Current: 10}); *se != want {
		t.Errorf("StaleError = %+v, want %+v", *se, want)
	}
}

func TestMemFenceCurrentUnknown(t *testing.T) {
	var f epoch.MemFence
	for _, p := range []epoch.Partition{0, 63, epoch.DenseLimit, -5, math.MaxInt32} {
		if cur := f.Current(p); cur != epoch.None {
			t.Errorf("Current(%d) of an empty fence = %v, want none", p, cur)
		}
	}
	// A rejected call must not make a sparse partition known with a token.
	_ = f.Admit(context.Background(), 1000, 0)
	if cur := f.Current(1000); cur != epoch.None {
		t.Errorf("Current(1000) after a rejected Admit = %v, want none", cur)
	}
}

func TestMemFenceAcceptDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	var f epoch.MemFence
	ctx := context.Background()
	tok := epoch.Token(1)
	allocs := testing.AllocsPerRun(1000, func() {
		for p := epoch.Partition(0); p < epoch.DenseLimit; p++ {
			if err := f.Admit(ctx, p, tok); err != nil {
				t.Fatal(err)
			}
		}
		tok++ // every round raises every partition: the compare-and-swap path
	})
	if allocs != 0 {
		t.Errorf("Admit on dense partitions allocates %v times per %d calls, want 0", allocs, epoch.DenseLimit)
	}
}

// refFence is the naive reference: a map under a mutex.
type refFence struct {
	mu sync.Mutex
	hi map[epoch.Partition]epoch.Token
}

func (r *refFence) Admit(p epoch.Partition, tok epoch.Token) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tok <= 0 {
		return epoch.ErrNoToken
	}
	cur := r.hi[p]
	if tok < cur {
		return &epoch.StaleError{Partition: p, Token: tok, Current: cur}
	}
	r.hi[p] = tok
	return nil
}

// partitionGen favours a few hot dense partitions, and reaches the edges of
// the dense range and the sparse partitions beyond it.
var partitionGen = rapid.OneOf(
	rapid.Map(rapid.Int32Range(0, 3), func(p int32) epoch.Partition { return epoch.Partition(p) }),
	rapid.Map(rapid.Int32Range(-2, epoch.DenseLimit+2), func(p int32) epoch.Partition { return epoch.Partition(p) }),
	rapid.SampledFrom([]epoch.Partition{math.MinInt32, math.MaxInt32, epoch.DenseLimit - 1, epoch.DenseLimit, 100000}),
)

func TestMemFenceMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f epoch.MemFence
		ref := &refFence{hi: map[epoch.Partition]epoch.Token{}}
		seen := map[epoch.Partition]bool{}
		n := rapid.IntRange(1, 200).Draw(t, "n")
		for i := range n {
			p := partitionGen.Draw(t, "partition")
			tok := epoch.Token(rapid.Int64Range(-2, 12).Draw(t, "token"))
			seen[p] = true
			got := admitResult(t, f.Admit(context.Background(), p, tok))
			want := admitResult(t, ref.Admit(p, tok))
			if got != want {
				t.Fatalf("call %d: Admit(%d, %d) = %q, reference says %q", i, p, tok, got, want)
			}
		}
		for p := range seen {
			if got, want := f.Current(p), ref.hi[p]; got != want {
				t.Fatalf("Current(%d) = %v, reference says %v", p, got, want)
			}
		}
		// Partitions never named stay empty.
		for _, p := range []epoch.Partition{-3, epoch.DenseLimit + 3, 99999} {
			if !seen[p] && f.Current(p) != epoch.None {
				t.Fatalf("Current(%d) = %v for a partition never admitted", p, f.Current(p))
			}
		}
	})
}

// TestMemFenceConcurrent races goroutines over a few partitions, with tokens
// that rise over time so that compare-and-swaps collide, and checks what
// linearizability demands of every history:
//   - the tokens one goroutine gets admitted for a partition never decrease
//     (its calls are ordered, so they linearize in that order);
//   - right after its Admit(p, t) succeeds, the goroutine reads Current(p) ≥ t;
//   - a rejection names a newer token that some goroutine got admitted;
//   - in the end Current(p) is the highest token admitted for p.
func TestMemFenceConcurrent(t *testing.T) {
	t.Run("spread", func(t *testing.T) {
		admitConcurrently(t, []epoch.Partition{0, 1, 63, epoch.DenseLimit, -7}, 8, 3000, 16)
	})
	// One partition, tokens rising slowly: the most compare-and-swap
	// collisions, where a lost update would show.
	t.Run("hot", func(t *testing.T) {
		admitConcurrently(t, []epoch.Partition{5}, 4, 20000, 4)
	})
	t.Run("hot sparse", func(t *testing.T) {
		admitConcurrently(t, []epoch.Partition{-5}, 4, 20000, 4)
	})
}

// admitConcurrently runs goroutines that each make calls Admits on
// partitions; the token of call i is 1 + i/slowness plus a random 0..3. The
// calls are drawn beforehand and the goroutines released together, so
// that their Admits overlap as much as the machine allows.
func admitConcurrently(t *testing.T, partitions []epoch.Partition, goroutines, calls, slowness int) {
	type call struct {
		p   epoch.Partition
		tok epoch.Token
		err error
		cur epoch.Token // Current(p) read right after an admitted call
	}
	plans := make([][]call, goroutines)
	for g := range plans {
		rng := rand.New(rand.NewPCG(uint64(g), 42))
		plans[g] = make([]call, calls)
		for i := range plans[g] {
			plans[g][i] = call{
				p:   partitions[rng.IntN(len(partitions))],
				tok: epoch.Token(1 + i/slowness + rng.IntN(4)),
			}
		}
	}
	var (
		f     epoch.MemFence
		wg    sync.WaitGroup
		ready sync.WaitGroup
		start = make(chan struct{})
	)
	ready.Add(goroutines)
	for g := range goroutines {
		wg.Go(func() {
			plan := plans[g]
			ready.Done()
			<-start
			for i := range plan {
				c := &plan[i]
				c.err = f.Admit(context.Background(), c.p, c.tok)
				if c.err == nil {
					c.cur = f.Current(c.p)
				}
			}
		})
	}
	ready.Wait()
	close(start)
	wg.Wait()

	highest := map[epoch.Partition]epoch.Token{}
	admitted := map[epoch.Partition]map[epoch.Token]bool{}
	for _, p := range partitions {
		admitted[p] = map[epoch.Token]bool{}
	}
	for g, plan := range plans {
		last := map[epoch.Partition]epoch.Token{}
		for i, c := range plan {
			if c.err != nil {
				continue
			}
			if c.tok < last[c.p] {
				t.Errorf("goroutine %d call %d: partition %d admitted %v after %v", g, i, c.p, c.tok, last[c.p])
			}
			if c.cur < c.tok {
				t.Errorf("goroutine %d call %d: Current(%d) = %v right after %v was admitted", g, i, c.p, c.cur, c.tok)
			}
			last[c.p] = c.tok
			admitted[c.p][c.tok] = true
			highest[c.p] = max(highest[c.p], c.tok)
		}
	}
	rejections := 0
	for g, plan := range plans {
		for i, c := range plan {
			if c.err == nil {
				continue
			}
			rejections++
			var se *epoch.StaleError
			if !errors.As(c.err, &se) {
				t.Errorf("goroutine %d call %d: unexpected error %v", g, i, c.err)
				continue
			}
			if se.Partition != c.p || se.Token != c.tok || se.Current <= se.Token {
				t.Errorf("goroutine %d call %d: Admit(%d, %v) rejected with %+v", g, i, c.p, c.tok, *se)
			}
			if !admitted[c.p][se.Current] {
				t.Errorf("goroutine %d call %d: rejection %+v names a token nobody got admitted", g, i, *se)
			}
		}
	}
	for _, p := range partitions {
		if got := f.Current(p); got != highest[p] {
			t.Errorf("Current(%d) = %v, want the highest admitted token %v", p, got, highest[p])
		}
	}
	if rejections == 0 {
		t.Errorf("no Admit was rejected: the test no longer makes goroutines collide")
	}
}

func BenchmarkMemFenceAdmit(b *testing.B) {
	ctx := context.Background()
	// hot: one partition, the same token each time (an owner's steady state).
	// spread64: 64 partitions in turn. rising: a newer token each time, so
	// every call is a compare-and-swap. sparse: partitions past DenseLimit.
	b.Run("serial/hot", func(b *testing.B) {
		var f epoch.MemFence
		for b.Loop() {
			if err := f.Admit(ctx, 7, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("serial/spread64", func(b *testing.B) {
		var f epoch.MemFence
		p := epoch.Partition(0)
		for b.Loop() {
			if err := f.Admit(ctx, p&63, 1); err != nil {
				b.Fatal(err)
			}
			p++
		}
	})
	b.Run("serial/rising", func(b *testing.B) {
		var f epoch.MemFence
		tok := epoch.Token(0)
		for b.Loop() {
			tok++
			if err := f.Admit(ctx, 7, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("serial/sparse64", func(b *testing.B) {
		var f epoch.MemFence
		p := epoch.Partition(0)
		for b.Loop() {
			if err := f.Admit(ctx, epoch.DenseLimit+(p&63), 1); err != nil {
				b.Fatal(err)
			}
			p++
		}
	})
	b.Run("parallel/hot", func(b *testing.B) {
		var f epoch.MemFence
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := f.Admit(ctx, 7, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("parallel/spread64", func(b *testing.B) {
		var f epoch.MemFence
		b.RunParallel(func(pb *testing.PB) {
			p := epoch.Partition(rand.IntN(64))
			for pb.Next() {
				if err := f.Admit(ctx, p&63, 1); err != nil {
					b.Error(err)
					return
				}
				p++
			}
		})
	})
	b.Run("parallel/sparse64", func(b *testing.B) {
		var f epoch.MemFence
		b.RunParallel(func(pb *testing.PB) {
			p := epoch.Partition(rand.IntN(64))
			for pb.Next() {
				if err := f.Admit(ctx, epoch.DenseLimit+(p&63), 1); err != nil {
					b.Error(err)
					return
				}
				p++
			}
		})
	})
}
