package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// fidProcs says which program the members of a process case run.
type fidProcs int

const (
	fidMemberProcs fidProcs = iota // internal/memberconsumer: the member library
	fidKgoProcs                    // internal/kgoconsumer: stock kgo, KIP-848
)

// runProcesses runs a fidelity case with every part a process of its own:
// `tenure serve` (memory store, the fidelity timing) and four member
// processes, m1 to m4, of the given program, which print the partitions
// they start and stop working on. The fault is a signal, as the operating
// system would deliver it: SIGKILL for a process crash (the kernel closes
// its connections), SIGSTOP for a pause (the whole process stops, its
// timers too, and its kernel still answers for its sockets; it is never
// continued), SIGTERM for a graceful leave (the program closes its client,
// which leaves the group). It returns the time from the signal until a
// member other than the victim says it works on each of the victim's
// partitions, and the epoch bumps.
func runProcesses(t *testing.T, procs fidProcs, f fidFault) (time.Duration, int64) {
	bins := build(t, mod+"cmd/tenure", mod+"internal/memberconsumer", mod+"internal/kgoconsumer")
	srv := proctest.Start(t, "tenure", bins[0], "serve", "--listen", "{addr}", "--store", "memory", "--http", "",
		"--log-level", "warn", "--consumer-session-timeout", fidSession.String(),
		"--consumer-heartbeat-interval", fidInterval.String(), "--conn-loss-grace", fidGrace.String())
	createTopicN(t, srv.Addr, fidTopic, fidParts)
	bin, args := bins[1], []string{"-brokers", srv.Addr, "-group", fidGroup, "-topic", fidTopic,
		"-session-timeout", fidSession.String(), "-rebalance-timeout", fidRebalance.String(),
		"-suspect-margin", fidMargin.String(), "-request-timeout", fidRequest.String(), "-max-drift", "0.01"}
	if procs == fidKgoProcs {
		bin, args = bins[2], []string{"-brokers", srv.Addr, "-group", fidGroup, "-topic", fidTopic, "-protocol", "consumer"}
	}
	o := newOwners()
	var ps []*kgoProc
	var names []string
	for i := range fidMembers {
		name := fmt.Sprintf("m%d", i+1)
		ps, names = append(ps, startKgo(t, bin, o, name, args...)), append(names, name)
	}
	wait(t, o.when(split(fidParts/fidMembers, names...)), time.Minute, "the group to settle", o, ps...)
	time.Sleep(time.Second)

	brokers := []string{srv.Addr}
	before := fidEpoch(t, brokers)
	victim := fidVictim(f)
	vi := fidMembers - 1
	if victim == "m1" {
		vi = 0
	}
	victims := o.holds(victim)
	back := o.when(func(held map[string]map[int32]bool) bool {
		for _, p := range victims {
			other := false
			for name, h := range held {
				if name != victim && h[p] {
					other = true
				}
			}
			if !other {
				return false
			}
		}
		return true
	})
	sig := map[fidFault]syscall.Signal{fidCrash: syscall.SIGKILL, fidPause: syscall.SIGSTOP, fidLeave: syscall.SIGTERM}[f]
	start := time.Now()
	ps[vi].signal(sig)
	took := wait(t, back, 4*fidSession, victim+"'s partitions to be taken over", o, ps...).Sub(start)
	time.Sleep(2 * fidInterval)
	return took, fidEpoch(t, brokers) - before
}
