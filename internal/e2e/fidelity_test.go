package e2e

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tenure-dev/tenure/sim"
)

// The fidelity scenario: 4 members share 16 partitions; one goes away;
// the session timeout is 3 s, heartbeats go every 300 ms and the
// connection-loss grace is 1 s. Run in the simulator and with real
// servers and members, the time from the fault until the member's
// partitions are worked on again, and the number of rebalances it causes,
// must agree: for a process crash (its connections close: the grace
// decides), a host crash (its connections go silent: the session
// decides), a graceful leave (the member releases its partitions and
// leaves; nothing waits for a timeout), a pause past the session (the
// coordinator expires it, alive) and a coordinator fail-over that takes a
// member's process with it (the successor never had its connection: the
// takeover grace decides). The graceful leave is m4's, the member the
// simulator's scale-in picks; the others are m1's.
const (
	fidMembers   = 4
	fidParts     = 16
	fidSession   = 3 * time.Second
	fidInterval  = 300 * time.Millisecond
	fidRebalance = 2 * time.Second
	fidMargin    = 100 * time.Millisecond
	fidRequest   = 500 * time.Millisecond
	fidGrace     = time.Second
	fidGroup     = "fidelity"
	fidTopic     = "work"
	// fidTakeoverGrace is the fail-over case's --takeover-grace: longer
	// than the session, so that the case shows the grace (and its spread
	// by member) rather than the session.
	fidTakeoverGrace = 4 * time.Second
	// fidSlackMin and fidSlackFrac bound how far outside the
	// simulator's range over seeds the real figure may fall:
	// max(200 ms, 10 %) of the simulator's mean.
	fidSlackMin  = 200 * time.Millisecond
	fidSlackFrac = 0.10
)

// fidFault is how a member goes away, in the simulator's terms.
type fidFault int

const (
	fidCrash     fidFault = iota // crash member=m1: its connections close
	fidHostCrash                 // crash member=m1 host=true: they go silent
	fidLeave                     // scale-in n=1: m4 leaves
	fidPause                     // pause member=m1, past the run
	fidFailover                  // failover, and crash member=m1 at the same instant
)

// fidelityCase is one row of the table: a fault, and how the real side
// stages it.
type fidelityCase struct {
	name  string
	fault fidFault
	// real runs the case with real servers and members and returns the
	// time from the fault until the victim's partitions run elsewhere,
	// and the epoch bumps the fault caused; a negative time if the
	// machine cannot stage it (the case is left out of the table).
	real func(t *testing.T) (time.Duration, int64)
}

var fidelityCases = []fidelityCase{
	{"process crash: connections closed, in-process", fidCrash, func(t *testing.T) (time.Duration, int64) {
		return runInProcess(t, fidCrash)
	}},
	{"host crash: connections black-holed, in-process", fidHostCrash, func(t *testing.T) (time.Duration, int64) {
		return runInProcess(t, fidHostCrash)
	}},
	{"graceful leave: Session.Close, in-process", fidLeave, func(t *testing.T) (time.Duration, int64) {
		return runInProcess(t, fidLeave)
	}},
	{"pause past session: connections frozen, in-process", fidPause, func(t *testing.T) (time.Duration, int64) {
		return runInProcess(t, fidPause)
	}},
	{"host crash: link down + kill -9, network namespace", fidHostCrash, func(t *testing.T) (time.Duration, int64) {
		d, bumps, ok := runNetnsHostCrash(t)
		if !ok {
			return -1, 0
		}
		return d, bumps
	}},
	{"coordinator fail-over: leader kill -9 with a member", fidFailover, runFailover},
	{"pause past session: SIGSTOP, member process", fidPause, func(t *testing.T) (time.Duration, int64) {
		return runProcesses(t, fidMemberProcs, fidPause)
	}},
	{"process crash: kill -9, member process", fidCrash, func(t *testing.T) (time.Duration, int64) {
		return runProcesses(t, fidMemberProcs, fidCrash)
	}},
	{"process crash: kill -9, stock kgo", fidCrash, func(t *testing.T) (time.Duration, int64) {
		return runProcesses(t, fidKgoProcs, fidCrash)
	}},
	{"graceful leave: SIGTERM, stock kgo", fidLeave, func(t *testing.T) (time.Duration, int64) {
		return runProcesses(t, fidKgoProcs, fidLeave)
	}},
}

// fidVictim is the member a fault takes away: m4 for a leave (the
// member scale-in picks), m1 otherwise.
func fidVictim(f fidFault) string {
	if f == fidLeave {
		return fmt.Sprintf("m%d", fidMembers)
	}
	return "m1"
}

// fidSlack is the bound on the difference for a simulated mean.
func fidSlack(mean time.Duration) time.Duration {
	return max(fidSlackMin, time.Duration(fidSlackFrac*float64(mean)))
}

// outside returns how far d lies outside [lo, hi] (0 inside).
func outside(d, lo, hi time.Duration) time.Duration {
	switch {
	case d < lo:
		return lo - d
	case d > hi:
		return d - hi
	}
	return 0
}

func TestFidelityBounds(t *testing.T) {
	for _, c := range []struct{ d, lo, hi, want time.Duration }{
		{time.Second, 2 * time.Second, 3 * time.Second, time.Second},
		{2500 * time.Millisecond, 2 * time.Second, 3 * time.Second, 0},
		{4 * time.Second, 2 * time.Second, 3 * time.Second, time.Second},
	} {
		if got := outside(c.d, c.lo, c.hi); got != c.want {
			t.Errorf("outside(%v, %v, %v) = %v, want %v", c.d, c.lo, c.hi, got, c.want)
		}
	}
	if fidSlack(time.Second) != 200*time.Millisecond || fidSlack(10*time.Second) != time.Second {
		t.Errorf("slack: %v at 1 s, %v at 10 s; want 200ms and 1s", fidSlack(time.Second), fidSlack(10*time.Second))
	}
}

// fidelityScenario is the case's scenario with the fault at faultAt, or,
// with fault false, the same run cut at faultAt (the epoch before it).
func fidelityScenario(t *testing.T, fault bool, f fidFault, faultAt time.Duration) *sim.Scenario {
	src := fmt.Sprintf(`
members n=%d start=uniform(min=0s,max=%v)
topic name=%s partitions=%d
timing heartbeat=%v session=%v rebalance=%v margin=%v drift=0.01 request-timeout=%v conn-grace=%v takeover-grace=%v
network delay=lognormal(median=150us,p99=2ms)
work every=100ms
`, fidMembers, fidInterval, fidTopic, fidParts, fidInterval, fidSession, fidRebalance, fidMargin, fidRequest, fidGrace, fidTakeoverGrace)
	end := faultAt + 4*fidSession
	switch {
	case !fault:
		end = faultAt
	case f == fidPause:
		// The pause outlasts the run: the real member stays frozen to
		// the end, so neither rejoins (a rejoin would bump the epoch
		// once more).
		src += fmt.Sprintf("pause member=m1 at=%v for=%v\n", faultAt, 5*fidSession)
	case f == fidLeave:
		src += fmt.Sprintf("scale-in at=%v n=1\n", faultAt)
	case f == fidFailover:
		// The successor is elected when etcd expires the dead
		// leader's lease (ttl=: the HA set's election TTL), and
		// restores m1 under the takeover grace: it never had m1's
		// connection.
		src += fmt.Sprintf("failover at=%v ttl=%v\ncrash member=m1 at=%v\n", faultAt, electionTTL, faultAt)
		end += fidTakeoverGrace
	default:
		src += fmt.Sprintf("crash member=m1 at=%v host=%v\n", faultAt, f == fidHostCrash)
	}
	src += fmt.Sprintf("run for=%v\n", end)
	sc, err := sim.ParseScenario("fidelity", src)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

var fidelity = flag.Bool("fidelity", false, "run the fidelity suite: the simulator against real servers and members (make fidelity)")

// fidRow is one row of the table.
type fidRow struct {
	name         string
	lo, hi, mean time.Duration
	real, diff   time.Duration
	simBumps     []int64
	realBumps    int64
}

// simulate runs the case's scenario over seeds and fills the simulator's
// side of its row: the range of reassignment times (they depend on where
// in its heartbeat cycle the member went) and the epoch bumps the fault
// caused (the epoch at the end, less the epoch of the same run, prefix
// for prefix, without the fault).
func simulate(t *testing.T, fc fidelityCase) fidRow {
	const faultAt = 10 * time.Second
	const seeds = 20
	r := fidRow{name: fc.name, lo: time.Duration(1 << 62)}
	var sum time.Duration
	for seed := uint64(1); seed <= seeds; seed++ {
		before := simRun(t, fidelityScenario(t, false, fc.fault, faultAt), seed)
		after := simRun(t, fidelityScenario(t, true, fc.fault, faultAt), seed)
		a := after.Availability
		d := time.Duration(a.ReassignMax * float64(time.Second))
		switch fc.fault {
		case fidPause:
			if a.ScriptedPauses != 1 || a.PausesNotReassigned != 0 {
				t.Fatalf("%s, seed %d: %d pauses, %d not taken over", fc.name, seed, a.ScriptedPauses, a.PausesNotReassigned)
			}
			d = time.Duration(a.PauseReassignMax * float64(time.Second))
		case fidLeave:
			if a.Leaves != 1 || a.LeavesNotReassigned != 0 {
				t.Fatalf("%s, seed %d: %d leaves, %d not reassigned", fc.name, seed, a.Leaves, a.LeavesNotReassigned)
			}
			d = time.Duration(a.LeaveReassignMax * float64(time.Second))
		default:
			if a.Crashes != 1 || a.NotReassigned != 0 {
				t.Fatalf("%s, seed %d: %d crashes, %d not reassigned", fc.name, seed, a.Crashes, a.NotReassigned)
			}
		}
		r.lo, r.hi, sum = min(r.lo, d), max(r.hi, d), sum+d
		r.simBumps = append(r.simBumps, int64(after.Churn.Epoch-before.Churn.Epoch))
	}
	r.mean = sum / seeds
	return r
}

func simRun(t *testing.T, sc *sim.Scenario, seed uint64) *sim.Report {
	t.Helper()
	rep, err := sim.Run(sc, sim.Options{Seed: seed})
	if err != nil {
		t.Fatalf("scenario %s seed %d: %v", sc.Name, seed, err)
	}
	return rep
}

// TestFidelity compares the simulator with real servers and members for
// each way a member goes away, prints the table (simulator, real,
// difference) and fails if a real figure lies further outside the
// simulator's range over seeds than max(200 ms, 10 % of the simulator's
// mean), or if the epoch bumps differ. It takes minutes of real time and
// runs processes, so `make test` does not run it: `make fidelity` does
// (-fidelity; -fidelity.cases narrows it).
func TestFidelity(t *testing.T) {
	if !*fidelity {
		t.Skip("the fidelity suite runs with -fidelity (make fidelity)")
	}
	var rows []fidRow
	for _, fc := range fidelityCases {
		if *fidelityOnly != "" && !strings.Contains(fc.name, *fidelityOnly) {
			continue
		}
		r := simulate(t, fc)
		r.real, r.realBumps = fc.real(t)
		if r.real < 0 {
			continue
		}
		r.diff = outside(r.real, r.lo, r.hi)
		t.Logf("%s: simulator %v (%v to %v), real %v", r.name, r.mean.Round(time.Millisecond), r.lo.Round(time.Millisecond),
			r.hi.Round(time.Millisecond), r.real.Round(time.Millisecond))
		rows = append(rows, r)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "case\tsimulator (mean, range over seeds)\treal\tdifference\tbound\tepoch bumps sim / real\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%v (%v to %v)\t%v\t%v\t%v\t%v / %d\n", r.name, r.mean.Round(time.Millisecond), r.lo.Round(time.Millisecond),
			r.hi.Round(time.Millisecond), r.real.Round(time.Millisecond), r.diff.Round(time.Millisecond), fidSlack(r.mean).Round(time.Millisecond), r.simBumps, r.realBumps)
	}
	_ = tw.Flush()
	t.Logf("fault to re-owned partitions:\n%s", b.String())
	for _, r := range rows {
		if r.diff > fidSlack(r.mean) {
			t.Errorf("%s: real %v lies %v outside the simulator's %v to %v (bound %v)", r.name, r.real, r.diff, r.lo, r.hi, fidSlack(r.mean))
		}
		for _, sb := range r.simBumps {
			if sb != r.realBumps {
				t.Errorf("%s: the fault bumped the epoch %d times for real, %v in the simulator", r.name, r.realBumps, r.simBumps)
				break
			}
		}
	}
}

var fidelityOnly = flag.String("fidelity.cases", "", "with -fidelity: run only the cases whose name contains this")
