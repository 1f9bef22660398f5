//go:build unix

package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kinds of fault. The process faults act on one process with a signal; the
// network faults add toxics to the fabric's links.
const (
	// Process faults.
	KillWorker     = "kill-worker"     // SIGKILL a worker, restart it after For
	PauseWorker    = "pause-worker"    // SIGSTOP a worker for For
	KillLeader     = "kill-leader"     // SIGKILL the leading tenure node, restart it after For
	PauseLeader    = "pause-leader"    // SIGSTOP the leading tenure node for For: the deposed leader
	KillNode       = "kill-node"       // SIGKILL a tenure node, leader or not, restart it after For
	KillEtcd       = "kill-etcd"       // SIGKILL an etcd member, restart it after For
	PauseEtcd      = "pause-etcd"      // SIGSTOP an etcd member for For
	KillCommitter  = "kill-committer"  // SIGKILL an offset committer, restart it after For
	PauseCommitter = "pause-committer" // SIGSTOP an offset committer for For

	// Network faults.
	Latency         = "latency"          // add Latency ± Jitter to the target's links
	CutCoordinators = "cut-coordinators" // black-hole a worker's links to every tenure node, not to its resources: the zombie
	IsolateWorker   = "isolate-worker"   // black-hole every link of a worker
	ResetWorker     = "reset-worker"     // reset every connection of a worker as soon as it carries data
	OneWay          = "one-way"          // black-hole one direction (Stream) of a worker's links
	IsolateLeader   = "isolate-leader"   // black-hole every link to and from the leading tenure node
	ResetLeader     = "reset-leader"     // reset every connection to and from the leading tenure node
	EtcdMinority    = "etcd-minority"    // black-hole every link of one etcd member, raft included
	QuorumLoss      = "quorum-loss"      // black-hole every link of two etcd members

	// Faults of the fail-over variant, which stock consumers must not
	// notice. Their Target names a group: the fault hits the node that
	// coordinates it when the fault starts. They never heal: For is 0.
	LoseNode   = "lose-node"   // SIGKILL the group's coordinator, never restart it; its port refuses from then on
	FreezeNode = "freeze-node" // SIGSTOP the group's coordinator, never resume it
	JoinNode   = "join-node"   // start a fresh node on a new address (no Target)
)

// Fault is one entry of a run's schedule.
type Fault struct {
	// At is when the fault starts, from the start of the run.
	At time.Duration `json:"at"`
	// For is how long it lasts: the pause, the cut, or how long a killed
	// process stays down.
	For  time.Duration `json:"for"`
	Kind string        `json:"kind"`
	// Target names the process: "w3", "n1", "e2", "c0". The faults on "the
	// leader" leave it empty and name the node they found in the events.
	Target string `json:"target,omitempty"`
	// Targets are the two etcd members of a quorum loss.
	Targets []string `json:"targets,omitempty"`
	// Latency and Jitter of a latency fault.
	Latency time.Duration `json:"latency,omitempty"`
	Jitter  time.Duration `json:"jitter,omitempty"`
	// Stream of a one-way cut: "upstream" drops what the worker sends,
	// "downstream" what it receives.
	Stream string `json:"stream,omitempty"`
}

// End is when the fault heals.
func (f Fault) End() time.Duration { return f.At + f.For }

func (f Fault) String() string {
	s := fmt.Sprintf("%v %s", f.At.Round(time.Millisecond), f.Kind)
	switch {
	case f.Target != "":
		s += " " + f.Target
	case len(f.Targets) > 0:
		s += fmt.Sprintf(" %v", f.Targets)
	}
	if f.Latency > 0 {
		s += fmt.Sprintf(" %v±%v", f.Latency, f.Jitter)
	}
	if f.Stream != "" {
		s += " " + f.Stream
	}
	return s + fmt.Sprintf(" for %v", f.For.Round(time.Millisecond))
}

// Schedule draws the faults of a run from its seed: the same seed and shape
// give the same schedule. Faults come on two tracks that overlap each other,
// one of process faults and one of network faults, each a sequence of
// faults separated by short gaps, from the end of the warm-up until the
// settle period before the end of the run, where all is healed.
//
// Each schedule has one or two zombies: a worker paused for 2 to 3 session
// timeouts, the case the fence exists for and the one a control run must
// be caught in. A zombie has its stretch of the run to itself, from two
// sessions before it (so that no earlier fault's fail-over restarts its
// session while it sleeps: a new leader restarts every member's session)
// to a session after it wakes (so that its successors write before it
// does): no other fault overlaps that stretch. Every other pause, of any
// length, overlaps whatever the other track does.
func Schedule(seed uint64, s Shape) []Fault {
	if s.Failover {
		return FailoverSchedule(seed, s)
	}
	rng := rand.New(rand.NewPCG(seed, 0x7e4e5e))
	start, end := s.Warmup, s.Duration-s.Settle
	if end <= start {
		return nil
	}
	zombies, clear := zombieFaults(rng, s, start, end)
	out := slices.Clone(zombies)
	out = append(out, processTrack(rng, s, start, end, clear)...)
	out = append(out, networkTrack(rng, s, start, end, clear)...)
	sortFaults(out)
	return out
}

// FailoverSchedule is the fail-over variant's schedule: the losses that
// do not come back (docs/DESIGN.md, "Fail-over as the client sees it"),
// each aimed at the node coordinating one of the stock consumers' groups,
// which must not notice. At the end of the warm-up one coordinator is
// lost (SIGKILL, never restarted) or frozen (SIGSTOP, never resumed), the
// seed says which; in the middle of the fault window a fresh node joins
// on a new address; at the end of the window the other fault hits the
// coordinator of a group drawn from the seed. The set keeps two live
// nodes of four.
func FailoverSchedule(seed uint64, s Shape) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0xfa11))
	start, end := s.Warmup, s.Duration-s.Settle
	if end <= start {
		return nil
	}
	groups := []string{offsetGroup}
	if s.Committers == 0 {
		groups = nil
	}
	if s.ClassicCommitters > 0 {
		groups = append(groups, classicGroup)
	}
	if len(groups) == 0 {
		return nil
	}
	kinds := []string{LoseNode, FreezeNode}
	if rng.IntN(2) == 1 {
		kinds[0], kinds[1] = kinds[1], kinds[0]
	}
	first := rng.IntN(len(groups))
	return []Fault{
		{At: start, Kind: kinds[0], Target: groups[first]},
		{At: start + (end-start)/2, Kind: JoinNode},
		// The second fault aims at the other group if there is one: its
		// coordinator may or may not be the survivor of the first.
		{At: end, Kind: kinds[1], Target: groups[(first+1)%len(groups)]},
	}
}

// span is a stretch of a run, [from, to).
type span struct{ from, to time.Duration }

// zombieFaults places the zombies, one right after the warm-up and one in
// the middle of the fault window if it fits, and returns them with the
// stretches they keep clear of other faults.
func zombieFaults(rng *rand.Rand, s Shape, start, end time.Duration) ([]Fault, []span) {
	var out []Fault
	var clear []span
	at := start
	for _, want := range []time.Duration{start, start + (end-start)/2} {
		at = max(at, want)
		f := Fault{Kind: PauseWorker, Target: fmt.Sprintf("w%d", rng.IntN(s.Workers)), At: at,
			For: between(rng, 2*s.Session, 3*s.Session)}
		if f.End() > end {
			if len(out) > 0 {
				break
			}
			f.For = end - at // a run too short for a whole zombie still gets one
		}
		out = append(out, f)
		clear = append(clear, span{f.At - 2*s.Session, min(f.End()+s.Session, end)})
		at = f.End() + 3*s.Session
	}
	return out, clear
}

// place moves a fault drawn for t past the clear stretches it would
// overlap; ok is false if it no longer ends by end.
func place(f Fault, t, end time.Duration, clear []span) (Fault, bool) {
	f.At = t
	for moved := true; moved; {
		moved = false
		for _, c := range clear {
			if f.At < c.to && f.End() > c.from {
				f.At, moved = c.to, true
			}
		}
	}
	return f, f.End() <= end
}

// Shape is what a schedule depends on besides its seed.
type Shape struct {
	Duration, Warmup, Settle time.Duration
	Session                  time.Duration // the members' session timeout
	Workers, Committers      int
	// Failover draws the fail-over variant's schedule (FailoverSchedule);
	// ClassicCommitters says whether it may aim at the classic group.
	Failover          bool
	ClassicCommitters int
}

func processTrack(rng *rand.Rand, s Shape, start, end time.Duration, clear []span) []Fault {
	worker := func() string { return fmt.Sprintf("w%d", rng.IntN(s.Workers)) }
	pause := func() time.Duration { return between(rng, 100*time.Millisecond, 3*s.Session) }
	down := func() time.Duration { return between(rng, 200*time.Millisecond, 3*time.Second) }
	return track(rng, start, end, clear, func() (f Fault, ok bool) {
		switch pick(rng, 5, 2, 2, 2, 1, 1, 1, 1, 1) {
		case 0:
			f = Fault{Kind: PauseWorker, Target: worker(), For: pause()}
		case 1:
			f = Fault{Kind: KillWorker, Target: worker(), For: down()}
		case 2:
			f = Fault{Kind: PauseLeader, For: pause()}
		case 3:
			f = Fault{Kind: KillLeader, For: down()}
		case 4:
			f = Fault{Kind: KillNode, Target: fmt.Sprintf("n%d", rng.IntN(3)), For: down()}
		case 5:
			f = Fault{Kind: PauseEtcd, Target: fmt.Sprintf("e%d", rng.IntN(3)), For: pause()}
		case 6:
			f = Fault{Kind: KillEtcd, Target: fmt.Sprintf("e%d", rng.IntN(3)), For: down()}
		case 7:
			f = Fault{Kind: PauseCommitter, Target: fmt.Sprintf("c%d", rng.IntN(max(s.Committers, 1))), For: pause()}
		case 8:
			f = Fault{Kind: KillCommitter, Target: fmt.Sprintf("c%d", rng.IntN(max(s.Committers, 1))), For: down()}
		}
		return f, s.Committers > 0 || f.Kind != PauseCommitter && f.Kind != KillCommitter
	})
}

// track lays the faults draw gives one after another from start, each a
// short gap after the previous one heals and past the clear stretches,
// until one would not heal by end. A draw that is not ok is skipped.
func track(rng *rand.Rand, t, end time.Duration, clear []span, draw func() (Fault, bool)) []Fault {
	var out []Fault
	for t < end {
		f, ok := draw()
		if !ok {
			continue
		}
		if f, ok = place(f, t, end, clear); !ok {
			break
		}
		out = append(out, f)
		t = f.End() + between(rng, 300*time.Millisecond, 2*time.Second)
	}
	return out
}

func networkTrack(rng *rand.Rand, s Shape, start, end time.Duration, clear []span) []Fault {
	worker := func() string { return fmt.Sprintf("w%d", rng.IntN(s.Workers)) }
	cut := func() time.Duration { return between(rng, 200*time.Millisecond, 3*s.Session) }
	return track(rng, start+between(rng, 0, 2*time.Second), end, clear, func() (f Fault, ok bool) {
		switch pick(rng, 2, 3, 1, 1, 1, 2, 1, 1, 1) {
		case 0:
			lat := between(rng, 5*time.Millisecond, 200*time.Millisecond)
			f = Fault{Kind: Latency, Latency: lat, Jitter: between(rng, 0, lat/2), For: between(rng, time.Second, 5*time.Second)}
			switch rng.IntN(3) {
			case 0:
				f.Target = worker()
			case 1:
				f.Target = "leader"
			case 2:
				f.Target = "all"
			}
		case 1:
			f = Fault{Kind: CutCoordinators, Target: worker(), For: cut()}
		case 2:
			f = Fault{Kind: IsolateWorker, Target: worker(), For: cut()}
		case 3:
			f = Fault{Kind: ResetWorker, Target: worker(), For: between(rng, 200*time.Millisecond, 2*time.Second)}
		case 4:
			f = Fault{Kind: OneWay, Target: worker(), Stream: []string{"upstream", "downstream"}[rng.IntN(2)], For: cut()}
		case 5:
			f = Fault{Kind: IsolateLeader, For: cut()}
		case 6:
			f = Fault{Kind: ResetLeader, For: between(rng, 200*time.Millisecond, 2*time.Second)}
		case 7:
			f = Fault{Kind: EtcdMinority, Target: fmt.Sprintf("e%d", rng.IntN(3)), For: cut()}
		case 8:
			keep := rng.IntN(3)
			for i := range 3 {
				if i != keep {
					f.Targets = append(f.Targets, fmt.Sprintf("e%d", i))
				}
			}
			f.Kind, f.For = QuorumLoss, between(rng, 500*time.Millisecond, 2*s.Session)
		}
		return f, true
	})
}

// between draws a duration in [lo, hi), in whole milliseconds.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	ms := (hi - lo) / time.Millisecond
	if ms == 0 {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(ms)))*time.Millisecond
}

// pick draws an index with the given weights.
func pick(rng *rand.Rand, weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

func sortFaults(fs []Fault) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].At < fs[j-1].At; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}
