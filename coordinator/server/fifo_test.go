package server

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// TestFifo drives a fifo and a plain slice with the same random pushes and
// drops, in bursts as a group's replies come and go: the fifo holds what
// the slice holds, in order, and keeps no reference to what it dropped
// (a held reply pins its response until then).
func TestFifo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q fifo[*int]
	var want []*int
	for step := range 20000 {
		if rng.IntN(2) == 0 {
			for range rng.IntN(40) {
				v := new(int)
				*v = step
				q.push(v)
				want = append(want, v)
			}
		} else {
			n := rng.IntN(len(want) + 1)
			q.drop(n)
			want = want[n:]
		}
		if step%997 == 0 {
			q.reset()
			want = nil
		}
		if got := q.items(); !slices.Equal(got, want) {
			t.Fatalf("step %d: the fifo holds %d items, want %d", step, len(got), len(want))
		}
		for i, v := range q.buf[:q.head] {
			if v != nil {
				t.Fatalf("step %d: dropped slot %d still holds %d", step, i, *v)
			}
		}
		for i, v := range q.buf[len(q.buf):cap(q.buf)] {
			if v != nil {
				t.Fatalf("step %d: slot %d past the end still holds %d", step, len(q.buf)+i, *v)
			}
		}
	}
}

// BenchmarkHeldReplies releases a group's held replies one at a time, as
// its writes are acknowledged, with depth replies waiting behind (a
// thousand members of one group committing keep about that many held):
// shifting the rest down at each release (the held replies' queue before
// fifo) costs a copy of all of them per reply, a fifo the same whatever
// the depth.
func BenchmarkHeldReplies(b *testing.B) {
	for _, depth := range []int{10, 100, 1000, 10000} {
		r := heldReply{r: coordinator.Reply{Ref: &slot{}, Msg: kmsg.NewPtrOffsetCommitResponse()}}
		b.Run(fmt.Sprintf("shift/depth=%d", depth), func(b *testing.B) {
			s := make([]heldReply, 0, depth+1)
			for range depth {
				s = append(s, r)
			}
			for b.Loop() {
				s = append(s, r)
				s = shift(s, 1)
			}
		})
		b.Run(fmt.Sprintf("fifo/depth=%d", depth), func(b *testing.B) {
			var q fifo[heldReply]
			for range depth {
				q.push(r)
			}
			for b.Loop() {
				q.push(r)
				q.drop(1)
			}
		})
	}
}
