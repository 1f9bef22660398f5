package epoch

import (
	"context"
	"errors"
	"testing"
)

// TestMemFenceLosesSwapRace makes another writer change the partition's
// token between Admit's load and its compare-and-swap, and checks that
// Admit looks again instead of overwriting the other writer's token.
func TestMemFenceLosesSwapRace(t *testing.T) {
	tests := []struct {
		name        string
		interloper  Token // admitted by the other writer inside the race window
		wantCurrent Token
		wantStale   bool
	}{
		{"other writer's token is newer: ours becomes stale", 9, 9, true},
		{"other writer's token is older: ours still wins", 6, 7, false},
		{"other writer's token is equal", 7, 7, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			for _, p := range []Partition{4, DenseLimit + 4} {
				var f MemFence
				if err := f.Admit(ctx, p, 5); err != nil {
					t.Fatal(err)
				}
				fired := false
				testHookBeforeSwap = func() {
					if fired {
						return
					}
					fired = true
					if err := f.Admit(ctx, p, tt.interloper); err != nil {
						t.Errorf("interloper Admit(%d, %v) = %v", p, tt.interloper, err)
					}
				}
				err := f.Admit(ctx, p, 7)
				testHookBeforeSwap = nil
				if !fired {
					t.Fatal("the hook did not run: Admit no longer swaps where the test expects")
				}
				var se *StaleError
				if gotStale := errors.As(err, &se); gotStale != tt.wantStale {
					t.Errorf("partition %d: Admit(7) = %v, want stale %v", p, err, tt.wantStale)
				} else if gotStale && se.Current != tt.interloper {
					t.Errorf("partition %d: StaleError.Current = %v, want %v", p, se.Current, tt.interloper)
				}
				if got := f.Current(p); got != tt.wantCurrent {
					t.Errorf("partition %d: Current = %v, want %v", p, got, tt.wantCurrent)
				}
			}
		})
	}
}
