package sim_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/member"
	"github.com/tenure-dev/tenure/sim"
)

// The fidelity scenario: 4 members share 16 partitions; one crashes; the
// session timeout is 3 s, heartbeats go every 300 ms and the
// connection-loss grace is 1 s. Run in the simulator and with the real
// server and member shells on loopback, the time from the crash until its
// partitions are worked on again, and the number of rebalances it causes,
// must agree: for a process crash (its connections close: the grace
// decides), for a host crash (its connections go silent: the session
// decides) and for a graceful leave (the member releases its partitions
// and leaves; nothing waits for a timeout) and for a pause past the
// session (the coordinator expires it, alive). The graceful leave is
// m4's, the member the simulator's scale-in picks; the others are m1's.
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
	// fidSlackMin and fidSlackFrac bound how far outside the
	// simulator's range over seeds the real figure may fall:
	// max(200 ms, 10 %) of the simulator's mean.
	fidSlackMin  = 200 * time.Millisecond
	fidSlackFrac = 0.10
)

// fidelityCase is one way a member goes away: m1 crashes, or m4 (the
// member the simulator's scale-in picks) leaves gracefully.
type fidelityCase struct {
	name  string
	host  bool // a host crash: connections silenced, not closed
	leave bool // a graceful leave (member.Session.Close; scale-in n=1)
	pause bool // m1 paused for twice the session
}

var fidelityCases = []fidelityCase{
	{name: "process crash"}, {name: "host crash", host: true},
	{name: "graceful leave", leave: true}, {name: "pause past session", pause: true},
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

func fidelityScenario(t *testing.T, crash bool, fc fidelityCase, crashAt time.Duration) *sim.Scenario {
	src := fmt.Sprintf(`
members n=%d
topic name=%s partitions=%d
timing heartbeat=%v session=%v rebalance=%v margin=%v drift=0.01 request-timeout=%v conn-grace=%v
network delay=lognormal(median=150us,p99=2ms)
work every=100ms
`, fidMembers, fidTopic, fidParts, fidInterval, fidSession, fidRebalance, fidMargin, fidRequest, fidGrace)
	switch {
	case crash && fc.pause:
		// The pause outlasts the run: the real member's connections
		// stay frozen to the end, so neither rejoins (a rejoin would
		// bump the epoch once more).
		src += fmt.Sprintf("pause member=m1 at=%v for=%v\nrun for=%v\n", crashAt, 5*fidSession, crashAt+4*fidSession)
	case crash && fc.leave:
		src += fmt.Sprintf("scale-in at=%v n=1\nrun for=%v\n", crashAt, crashAt+4*fidSession)
	case crash:
		src += fmt.Sprintf("crash member=m1 at=%v host=%v\nrun for=%v\n", crashAt, fc.host, crashAt+4*fidSession)
	default:
		src += fmt.Sprintf("run for=%v\n", crashAt)
	}
	sc, err := sim.ParseScenario("fidelity", src)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

var fidelity = flag.Bool("fidelity", false, "run the fidelity suite: the simulator against real members on loopback (make fidelity)")

// TestFidelity compares the simulator with real processes' shells (the
// real server and member library on loopback) for each way a member goes
// away, prints the table (simulator, real, difference) and fails if a real
// figure lies further outside the simulator's range over seeds than
// max(200 ms, 10 % of the simulator's mean). It takes tens of seconds of
// real time, so `make test` does not run it: `make fidelity` does
// (-fidelity).
func TestFidelity(t *testing.T) {
	if !*fidelity {
		t.Skip("the fidelity suite runs with -fidelity (make fidelity)")
	}
	type row struct {
		name         string
		lo, hi, mean time.Duration
		real, diff   time.Duration
		simBumps     []int64
		realBumps    int64
	}
	var rows []row
	for _, fc := range fidelityCases {
		// The simulator, over seeds: the range of reassignment times
		// (they depend on where in its heartbeat cycle the member
		// crashed) and the epoch bumps the crash caused (the epoch at
		// the end, less the epoch of the same run, prefix for prefix,
		// without the crash).
		const crashAt = 10 * time.Second
		r := row{name: fc.name, lo: time.Duration(1 << 62)}
		var sum time.Duration
		const seeds = 20
		for seed := uint64(1); seed <= seeds; seed++ {
			before := run(t, fidelityScenario(t, false, fc, crashAt), sim.Options{Seed: seed})
			after := run(t, fidelityScenario(t, true, fc, crashAt), sim.Options{Seed: seed})
			a := after.Availability
			d := time.Duration(a.ReassignMax * float64(time.Second))
			switch {
			case fc.pause:
				if a.ScriptedPauses != 1 || a.PausesNotReassigned != 0 {
					t.Fatalf("%s, seed %d: %d pauses, %d not taken over", fc.name, seed, a.ScriptedPauses, a.PausesNotReassigned)
				}
				d = time.Duration(a.PauseReassignMax * float64(time.Second))
			case fc.leave:
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
		r.real, r.realBumps = runReal(t, fc)
		r.diff = outside(r.real, r.lo, r.hi)
		rows = append(rows, r)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "case\tsimulator (mean, range over seeds)\treal\tdifference\tbound\tepoch bumps sim / real\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%v (%v to %v)\t%v\t%v\t%v\t%v / %d\n", r.name, r.mean.Round(time.Millisecond), r.lo.Round(time.Millisecond),
			r.hi.Round(time.Millisecond), r.real.Round(time.Millisecond), r.diff.Round(time.Millisecond), fidSlack(r.mean), r.simBumps, r.realBumps)
	}
	_ = tw.Flush()
	t.Logf("crash to re-owned partitions:\n%s", b.String())
	for _, r := range rows {
		if r.diff > fidSlack(r.mean) {
			t.Errorf("%s: real %v lies %v outside the simulator's %v to %v (bound %v)", r.name, r.real, r.diff, r.lo, r.hi, fidSlack(r.mean))
		}
		for _, sb := range r.simBumps {
			if sb != r.realBumps {
				t.Errorf("%s: the crash bumped the epoch %d times for real, %v in the simulator", r.name, r.realBumps, r.simBumps)
				break
			}
		}
	}
}

// killSwitch is a kgo dialer whose connections can all be cut at once,
// for good: to the coordinator, the member looks crashed. kill closes
// them, as the kernel of a crashed process does; silence black-holes
// them, as a crashed host does: nothing more goes through in either
// direction and nothing closes (the member's side is closed only when
// the test ends), and new connections hang.
type killSwitch struct {
	mu     sync.Mutex
	dead   bool
	silent chan struct{}
	conns  []net.Conn
}

func newKillSwitch() *killSwitch { return &killSwitch{silent: make(chan struct{})} }

func (k *killSwitch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		select {
		case <-k.silent:
			<-ctx.Done() // a dead host never answers
			return nil, ctx.Err()
		default:
			return nil, errors.New("killed")
		}
	}
	defer k.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	hc := &holeConn{Conn: c, silent: k.silent}
	k.conns = append(k.conns, hc)
	return hc, nil
}

func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		_ = c.Close()
	}
}

func (k *killSwitch) silence() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	close(k.silent)
}

// holeConn is a connection that black-holes everything once silent is
// closed: writes vanish, reads see nothing more, and the peer sees no
// close.
type holeConn struct {
	net.Conn
	silent chan struct{}
}

func (c *holeConn) Write(b []byte) (int, error) {
	select {
	case <-c.silent:
		return len(b), nil
	default:
		return c.Conn.Write(b)
	}
}

func (c *holeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	select {
	case <-c.silent:
		// Whatever arrived after the host died is lost; wait until the
		// member closes its side (at the end of the test).
		for {
			if _, err := c.Conn.Read(b); err != nil {
				return 0, err
			}
		}
	default:
		return n, err
	}
}

// Close closes the member's side; while silent the peer must see
// nothing, so the socket stays open (leaked until the process ends, as a
// dead host's peer would see it) and reads on it fail.
func (c *holeConn) Close() error {
	select {
	case <-c.silent:
		return c.Conn.SetReadDeadline(time.Now())
	default:
		return c.Conn.Close()
	}
}

// runners tracks which members run a handler on which partition.
type runners struct {
	mu      sync.Mutex
	running map[int32]map[string]time.Time // partition -> member -> since
}

func (r *runners) handler(name string) member.Handler {
	return func(c *member.Claim) {
		r.mu.Lock()
		if r.running[c.Partition()] == nil {
			r.running[c.Partition()] = map[string]time.Time{}
		}
		r.running[c.Partition()][name] = time.Now()
		r.mu.Unlock()
		<-c.Context().Done()
		r.mu.Lock()
		delete(r.running[c.Partition()], name)
		r.mu.Unlock()
	}
}

// balanced reports whether every partition has exactly one runner and
// every member runs its share.
func (r *runners) balanced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := map[string]int{}
	for p := int32(0); p < fidParts; p++ {
		if len(r.running[p]) != 1 {
			return false
		}
		for m := range r.running[p] {
			count[m]++
		}
	}
	for _, n := range count {
		if n != fidParts/fidMembers {
			return false
		}
	}
	return len(count) == fidMembers
}

// of returns the partitions name runs.
func (r *runners) of(name string) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []int32
	for p, ms := range r.running {
		if _, ok := ms[name]; ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// takenOver reports whether every partition in ps runs on a member other
// than name.
func (r *runners) takenOver(ps []int32, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ps {
		other := false
		for m := range r.running[p] {
			if m != name {
				other = true
			}
		}
		if !other {
			return false
		}
	}
	return true
}

// runReal runs the fidelity scenario with the real server and members and
// returns the reassignment time and the epoch bumps of the crash or leave.
func runReal(t *testing.T, fc fidelityCase) (time.Duration, int64) {
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	cfg := testenv.TenureConfig(t, fidSession, fidInterval, fidParts)
	cfg.Core.ConnLossGrace = fidGrace
	cfg.Logger = log.Named("tenure")
	brokers := []string{testenv.StartTenure(t, cfg)}
	ctx := t.Context()

	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	groupEpoch := func() int64 {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{fidGroup}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe %s: %v %+v", fidGroup, err, resp)
		}
		return int64(resp.Groups[0].Epoch)
	}

	r := &runners{running: map[int32]map[string]time.Time{}}
	kills := make([]*killSwitch, fidMembers)
	sessions := make([]*member.Session, fidMembers)
	defer func() {
		for i, s := range sessions {
			if s == nil {
				continue
			}
			cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := s.Close(cctx)
			ccancel()
			if err != nil && i != 0 { // m1 cannot leave: it is cut off
				t.Errorf("close m%d: %v", i+1, err)
			}
		}
	}()
	for i := range fidMembers {
		kills[i] = newKillSwitch()
		jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
		s, err := member.Join(jctx, member.Config{
			Brokers:          brokers,
			ClientOpts:       []kgo.Opt{kgo.Dialer(kills[i].dial)},
			Group:            fidGroup,
			Topics:           []string{fidTopic},
			SessionTimeout:   fidSession,
			RebalanceTimeout: fidRebalance,
			SuspectMargin:    fidMargin,
			RequestTimeout:   fidRequest,
			MaxDrift:         0.01,
			Logger:           log.Named(fmt.Sprintf("m%d", i+1)),
		}, r.handler(fmt.Sprintf("m%d", i+1)))
		jcancel()
		if err != nil {
			t.Fatalf("join m%d: %v", i+1, err)
		}
		sessions[i] = s
	}
	waitUntil(t, 15*time.Second, r.balanced, "the group to settle")
	time.Sleep(time.Second)

	before := groupEpoch()
	victim := "m1"
	if fc.leave {
		victim = fmt.Sprintf("m%d", fidMembers)
	}
	victims := r.of(victim)
	var closed chan struct{} // a leave's Close is done
	crashed := time.Now()
	switch {
	case fc.leave:
		// Close returns once the member has left; the partitions are
		// measured from the moment it was asked, as in the simulator.
		s := sessions[fidMembers-1]
		sessions[fidMembers-1] = nil
		closed = make(chan struct{})
		go func() {
			defer close(closed)
			cctx, ccancel := context.WithTimeout(context.Background(), 2*fidSession)
			defer ccancel()
			if err := s.Close(cctx); err != nil {
				t.Errorf("close %s: %v", victim, err)
			}
		}()
	case fc.host, fc.pause:
		// In-process, a pause is the member's connections frozen: no
		// FIN, nothing answered. A real stop-the-world pause differs
		// in two ways that do not move this figure: its kernel would
		// answer TCP keepalive probes (this timing uses none), and its
		// own timers would stop too (here they run, so it stops its
		// handlers itself; the figure waits for the others' handlers).
		kills[0].silence()
	default:
		kills[0].kill()
	}
	waitUntil(t, 4*fidSession, func() bool { return r.takenOver(victims, victim) }, victim+"'s partitions to be taken over")
	reassign := time.Since(crashed)
	if closed != nil {
		<-closed
	}
	time.Sleep(2 * fidInterval) // let the group settle before reading its epoch
	return reassign, groupEpoch() - before
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
