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
