package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func (f *fleet) count(code int16) {
	f.mu.Lock()
	f.codes[code]++
	f.mu.Unlock()
}

// violation records a broken expectation; the first 20 are kept.
func (f *fleet) violation(expelled bool, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nViolations++
	if expelled {
		f.expelled++
	}
	if len(f.violations) < 20 {
		f.violations = append(f.violations, fmt.Sprintf(format, args...))
	}
}

// check fails tb if a violation was recorded.
func (f *fleet) check(tb testing.TB) {
	tb.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nViolations > 0 {
		tb.Fatalf("%d violations (%d expulsions), the first: %q", f.nViolations, f.expelled, f.violations)
	}
}

// errorCodes returns the heartbeat error codes seen, by name.
func (f *fleet) errorCodes() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int64{}
	for c, n := range f.codes {
		out[kerr.ErrorForCode(c).Error()] = n
	}
	return out
}

// served returns the successful heartbeats so far, in total.
func (f *fleet) served() int64 {
	var n int64
	for i := range f.ok {
		n += f.ok[i].Load()
	}
	return n
}

// joined returns the members whose join was answered: they hold an epoch.
func (f *fleet) joined() int {
	n := 0
	for _, l := range f.lanes {
		l.mu.Lock()
		for _, m := range l.members {
			if m.epoch > 0 {
				n++
			}
		}
		l.mu.Unlock()
	}
	return n
}

// memberState is a member as a snapshot shows it.
type memberState struct {
	epoch    int32
	owned    []int32
	reported bool
}

// snapshot copies every member's state, by group; each lane's members are
// copied between two of their answers.
func (f *fleet) snapshot() map[*fleetGroup][]memberState {
	out := make(map[*fleetGroup][]memberState, len(f.groups))
	for _, l := range f.lanes {
		l.mu.Lock()
		for _, m := range l.members {
			out[m.g] = append(out[m.g], memberState{epoch: m.epoch, owned: slices.Clone(m.owned), reported: m.reported})
		}
		l.mu.Unlock()
	}
	return out
}

// unsettled returns the groups whose members do not all hold their
// target: a settled group's members are at one epoch, own every partition
// of the topic between them, each exactly once, and have said so. It
// returns the count and a description of the first.
func (f *fleet) unsettled() (int, string) {
	n, first := 0, ""
	for g, ms := range f.snapshot() {
		owners := make([]int, f.cfg.partitions)
		ok := true
		for _, m := range ms {
			if m.epoch == 0 || m.epoch != ms[0].epoch || !m.reported {
				ok = false
			}
			for _, p := range m.owned {
				if int(p) >= len(owners) {
					ok = false
					continue
				}
				owners[p]++
			}
		}
		ok = ok && !slices.ContainsFunc(owners, func(c int) bool { return c != 1 })
		if !ok {
			if n == 0 {
				first = fmt.Sprintf("%s: %+v", g.name, ms)
			}
			n++
		}
	}
	return n, first
}

// epochs returns each member's epoch, by member ID.
func (f *fleet) epochs() map[string]int32 {
	out := map[string]int32{}
	for _, l := range f.lanes {
		l.mu.Lock()
		for _, m := range l.members {
			out[m.id] = m.epoch
		}
		l.mu.Unlock()
	}
	return out
}
