package e2e

import (
	"slices"
	"testing"
	"time"
)

// TestOutageTimes checks the steps BenchmarkTakeover reports apart
// (found-max-s, queued-max-s, answered-max-s): each group's own, sorted,
// timed from the kill or from the step before, and an outage that began
// before the kill or was never served left out.
func TestOutageTimes(t *testing.T) {
	kill := time.Unix(1000, 0)
	at := func(ms int) time.Time { return kill.Add(time.Duration(ms) * time.Millisecond) }
	group := func(name string, o outage) *fleetGroup { return &fleetGroup{name: name, lastOut: o} }
	groups := []*fleetGroup{
		group("a", outage{lost: at(100), found: at(5000), sent: at(5900), served: at(6000), lookups: 1}),
		group("b", outage{lost: at(300), found: at(5200), sent: at(5300), served: at(5700), lookups: 2}),
		group("before", outage{lost: at(-50), found: at(10), sent: at(20), served: at(30), lookups: 1}),
		group("unserved", outage{lost: at(200), found: at(5100), sent: at(5200), lookups: 1}),
	}
	st := outageTimesOf(groups, kill)
	ms := func(ds ...int) []time.Duration {
		out := make([]time.Duration, len(ds))
		for i, d := range ds {
			out[i] = time.Duration(d) * time.Millisecond
		}
		return out
	}
	for _, c := range []struct {
		name      string
		got, want []time.Duration
	}{
		{"lost", st.lost, ms(100, 300)},
		{"found", st.found, ms(5000, 5200)},
		{"lookup", st.lookup, ms(4900, 4900)},
		{"queued", st.queued, ms(100, 900)},
		{"answer", st.answer, ms(100, 400)},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if st.lastName != "a" || !slices.Equal(st.lookups, []int{1, 2}) {
		t.Errorf("served last %q with lookups %v, want a with [1 2]", st.lastName, st.lookups)
	}
	if got := most(st.queued); got != 900*time.Millisecond {
		t.Errorf("queued-max %v, want 900ms", got)
	}
	if got := most(nil); got != 0 {
		t.Errorf("most of none %v, want 0", got)
	}
}
