//go:build unix

package chaos

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScheduleReplaysFromSeed(t *testing.T) {
	s := DefaultConfig().shape()
	a, b := Schedule(42, s), Schedule(42, s)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 drew two schedules:\n%v\n%v", a, b)
	}
	if reflect.DeepEqual(a, Schedule(43, s)) {
		t.Fatalf("seeds 42 and 43 drew the same schedule: %v", a)
	}
}

func TestScheduleShape(t *testing.T) {
	for _, s := range []Shape{
		DefaultConfig().shape(),
		{Duration: 20 * time.Second, Warmup: 4 * time.Second, Settle: 9 * time.Second, Session: 2 * time.Second, Workers: 4, Committers: 2},
		{Duration: 10 * time.Minute, Warmup: 5 * time.Second, Settle: 12 * time.Second, Session: 3 * time.Second, Workers: 16},
	} {
		kinds := map[string]int{}
		for seed := range uint64(200) {
			fs := Schedule(seed, s)
			zombies := 0
			busy := map[bool]time.Duration{} // track (process or not) -> end of its last fault
			for i, f := range fs {
				kinds[f.Kind]++
				if f.At < s.Warmup || f.End() > s.Duration-s.Settle || f.For <= 0 {
					t.Fatalf("seed %d fault %d %v outside the fault window [%v, %v]", seed, i, f, s.Warmup, s.Duration-s.Settle)
				}
				proc := isProcessFault(f.Kind)
				if f.At < busy[proc] {
					t.Fatalf("seed %d fault %d %v overlaps the previous fault of its track (until %v)", seed, i, f, busy[proc])
				}
				busy[proc] = f.End()
				if s.Committers == 0 && strings.Contains(f.Kind, "committer") {
					t.Fatalf("seed %d: %v without committers", seed, f)
				}
				// A zombie: a pause of two sessions or more with its
				// stretch to itself, from two sessions before it to a
				// session after it wakes (other long pauses may overlap
				// anything).
				if f.Kind == PauseWorker && f.For >= 2*s.Session && !slices.ContainsFunc(fs, func(g Fault) bool {
					return g.String() != f.String() && g.At < f.End()+s.Session && g.End() > f.At-2*s.Session
				}) {
					zombies++
				}
			}
			if zombies == 0 {
				t.Fatalf("seed %d: no zombie (a pause of two sessions or more, alone): %v", seed, fs)
			}
		}
		if s.Duration >= time.Minute {
			for _, k := range []string{KillWorker, PauseWorker, KillLeader, PauseLeader, KillNode, KillEtcd, PauseEtcd,
				Latency, CutCoordinators, IsolateWorker, ResetWorker, OneWay, IsolateLeader, ResetLeader, EtcdMinority, QuorumLoss} {
				if kinds[k] == 0 {
					t.Errorf("%v: 200 seeds drew no %s fault", s.Duration, k)
				}
			}
		}
	}
}

func isProcessFault(kind string) bool {
	return strings.HasPrefix(kind, "kill-") || strings.HasPrefix(kind, "pause-")
}

// TestFailoverSchedule: every seed takes one coordinator away for good
// (lost or frozen) at the end of the warm-up, adds a fresh node, and takes
// the other way at the end of the fault window; both kinds, and both
// groups as first target, come up over the seeds.
func TestFailoverSchedule(t *testing.T) {
	s := Shape{Duration: 28 * time.Second, Warmup: 4 * time.Second, Settle: 9 * time.Second, Session: 2 * time.Second,
		Workers: 6, Committers: 2, ClassicCommitters: 2, Failover: true}
	firsts := map[string]int{}
	for seed := range uint64(100) {
		fs := Schedule(seed, s)
		if !reflect.DeepEqual(fs, Schedule(seed, s)) {
			t.Fatalf("seed %d drew two schedules", seed)
		}
		if len(fs) != 3 || fs[1].Kind != JoinNode {
			t.Fatalf("seed %d: %v, want a loss, a join, a loss", seed, fs)
		}
		if kinds := []string{fs[0].Kind, fs[2].Kind}; !slices.Contains(kinds, LoseNode) || !slices.Contains(kinds, FreezeNode) {
			t.Fatalf("seed %d: %v, want one lose-node and one freeze-node", seed, fs)
		}
		if fs[0].Target == fs[2].Target {
			t.Fatalf("seed %d: %v aims twice at one group", seed, fs)
		}
		for _, f := range fs {
			if f.For != 0 || f.At < s.Warmup || f.At > s.Duration-s.Settle {
				t.Fatalf("seed %d: %v outside the fault window or healing", seed, f)
			}
		}
		firsts[fs[0].Kind+" "+fs[0].Target]++
	}
	if len(firsts) != 4 {
		t.Fatalf("100 seeds drew the first faults %v, want each kind at each group", firsts)
	}
	s.ClassicCommitters = 0
	for seed := range uint64(20) {
		for _, f := range Schedule(seed, s) {
			if f.Target == classicGroup {
				t.Fatalf("seed %d: %v without classic committers", seed, f)
			}
		}
	}
}
