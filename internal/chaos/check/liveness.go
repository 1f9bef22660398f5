package check

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// clock places History's revisions in time from the RevTimes samples. A
// revision is placed at the first sample that had reached it: the latest
// it can have happened (the samples are ~100 ms apart, so it is up to
// that much late). Revisions after the last sample are placed at it.
type clock struct {
	revs  []int64 // running maximum, in time order
	times []time.Time
}

func newClock(rts []RevTime) clock {
	rts = slices.Clone(rts)
	slices.SortStableFunc(rts, func(a, b RevTime) int { return a.T.Compare(b.T) })
	c := clock{revs: make([]int64, len(rts)), times: make([]time.Time, len(rts))}
	var top int64
	for i, s := range rts {
		top = max(top, s.Rev)
		c.revs[i], c.times[i] = top, s.T
	}
	return c
}

func (c clock) from() time.Time { return c.times[0] }
func (c clock) to() time.Time   { return c.times[len(c.times)-1] }

func (c clock) at(rev int64) time.Time {
	i := sort.Search(len(c.revs), func(i int) bool { return c.revs[i] >= rev })
	if i == len(c.revs) {
		return c.to()
	}
	return c.times[i]
}

// gap is a stretch of time in which a partition had no owner; Open if it
// lasted to the end of the observation.
type gap struct {
	From, To time.Time
	Open     bool
}

// gaps returns each partition's stretches without an owner within the
// observation, from the group's first record (what came before, the
// runner starting its processes, is not the coordinator's doing), or the
// start of the observation if the group has none.
func gaps(run *Run, h *history, c clock) map[int32][]gap {
	out := make(map[int32][]gap)
	from := c.from()
	if h.firstRev != 0 && c.at(h.firstRev).After(from) {
		from = c.at(h.firstRev)
	}
	for p := range run.Partitions {
		owned, start := false, from
		for _, tr := range h.transitions[p] {
			t := c.at(tr.Rev)
			switch {
			case tr.Owned && !owned:
				if t.After(start) {
					out[p] = append(out[p], gap{From: start, To: t})
				}
			case !tr.Owned && owned:
				start = t
			}
			owned = tr.Owned
		}
		if !owned {
			out[p] = append(out[p], gap{From: start, To: c.to(), Open: true})
		}
	}
	return out
}

// span is a stretch in which some fault was active; Open if one never
// healed.
type span struct {
	From, To time.Time
	Open     bool
}

// activeSpans merges the faults' [Start, End) into disjoint spans, in
// time order.
func activeSpans(faults []Fault) []span {
	var ss []span
	for _, f := range faults {
		ss = append(ss, span{From: f.Start, To: f.End, Open: f.End.IsZero()})
	}
	slices.SortFunc(ss, func(a, b span) int { return a.From.Compare(b.From) })
	var out []span
	for _, s := range ss {
		if n := len(out); n > 0 && (out[n-1].Open || !s.From.After(out[n-1].To)) {
			last := &out[n-1]
			last.Open = last.Open || s.Open
			if s.To.After(last.To) {
				last.To = s.To
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// quietStart is the first moment at or after t with no fault active;
// false if a fault that never healed is active at t.
func quietStart(spans []span, t time.Time) (time.Time, bool) {
	for _, s := range spans {
		if t.Before(s.From) {
			break
		}
		if s.Open {
			return time.Time{}, false
		}
		if t.Before(s.To) {
			return s.To, true
		}
	}
	return t, true
}

// quietParts returns the parts of [from, to) with no fault active.
func quietParts(spans []span, from, to time.Time) [][2]time.Time {
	var out [][2]time.Time
	t := from
	for _, s := range spans {
		if !t.Before(to) {
			break
		}
		if !s.Open && !s.To.After(t) {
			continue
		}
		if s.From.After(t) {
			out = append(out, [2]time.Time{t, minTime(s.From, to)})
		}
		if s.Open {
			return out
		}
		t = s.To
	}
	if t.Before(to) {
		out = append(out, [2]time.Time{t, to})
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// checkLiveness is check 8: while no fault is active, no partition is
// without an owner for longer than bound (measured from its losing the
// owner, or from the last heal if a fault was active then). It also
// measures the recovery after each fault and the unowned partition-time.
func checkLiveness(run *Run, h *history, c clock, bound time.Duration, st *Stats) []Violation {
	var vs []Violation
	spans := activeSpans(run.Faults)
	gs := gaps(run, h, c)
	for p := range run.Partitions {
		for _, g := range gs[p] {
			for _, q := range quietParts(spans, g.From, g.To) {
				if q[1].Sub(q[0]) > bound {
					vs = append(vs, Violation{Kind: NoOwner, Partition: p, Evidence: gapEvidence(g, q[0], bound)})
					break
				}
				if g.Open && q[1].Equal(g.To) {
					vs = append(vs, Violation{Kind: NoOwner, Partition: p,
						Evidence: gapEvidence(g, q[0], bound) + fmt.Sprintf("; the run was observed only %v of the %v bound after that",
							q[1].Sub(q[0]).Round(time.Millisecond), bound)})
				}
			}
		}
	}

	if h.formedRev != 0 {
		st.FormedAt = c.at(h.formedRev)
	}
	split := c.to()
	if !st.FormedAt.IsZero() {
		split = st.FormedAt
	}
	for p := range run.Partitions {
		for _, g := range gs[p] {
			st.StartupUnowned += overlap(g.From, g.To, c.from(), split)
			st.Unowned += overlap(g.From, g.To, split, c.to())
		}
	}

	for i, f := range run.Faults {
		rc := Recovery{Fault: f, Healed: !f.End.IsZero()}
		if !rc.Healed {
			st.Recoveries = append(st.Recoveries, rc)
			continue
		}
		window := c.to()
		if q, ok := quietStart(spans, f.End); ok {
			rc.Deadline = q.Add(bound)
			window = minTime(window, rc.Deadline)
		}
		for j, g := range run.Faults {
			if j != i && !g.Start.Before(f.End) {
				window = minTime(window, g.Start)
			}
		}
		rc.Recovered = f.End
		for p := range run.Partitions {
			for _, g := range gs[p] {
				if g.From.Before(window) && g.To.After(f.Start) {
					rc.Unrecovered = rc.Unrecovered || g.Open
					if g.To.After(rc.Recovered) {
						rc.Recovered = g.To
					}
				}
			}
		}
		rc.Took = max(0, rc.Recovered.Sub(f.End))
		st.Recoveries = append(st.Recoveries, rc)
	}
	return vs
}

func gapEvidence(g gap, quiet time.Time, bound time.Duration) string {
	to := "the end of the run at " + stamp(g.To)
	if !g.Open {
		to = stamp(g.To)
	}
	return fmt.Sprintf("no owner from %s to %s (%v), no fault active from %s; bound %v",
		stamp(g.From), to, g.To.Sub(g.From).Round(time.Millisecond), stamp(quiet), bound)
}

// overlap is the length of [a, b) ∩ [c, d).
func overlap(a, b, c, d time.Time) time.Duration {
	lo, hi := a, b
	if c.After(lo) {
		lo = c
	}
	if d.Before(hi) {
		hi = d
	}
	if hi.After(lo) {
		return hi.Sub(lo)
	}
	return 0
}
