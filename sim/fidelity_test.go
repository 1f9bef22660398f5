package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
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
// session timeout is 3 s and heartbeats go every 300 ms. Run in the
// simulator and with the real server and member shells on loopback, the
// time from the crash until its partitions are worked on again, and the
// number of rebalances it causes, must agree.
const (
	fidMembers   = 4
	fidParts     = 16
	fidSession   = 3 * time.Second
	fidInterval  = 300 * time.Millisecond
	fidRebalance = 2 * time.Second
	fidMargin    = 100 * time.Millisecond
	fidRequest   = 500 * time.Millisecond
	fidGroup     = "fidelity"
	fidTopic     = "work"
	// fidSlack is how far outside the simulator's range over seeds the
	// real figure may fall: goroutine scheduling, TCP and the shells'
	// own timers on a loaded machine.
	fidSlack = 400 * time.Millisecond
)

func fidelityScenario(t *testing.T, crash bool, crashAt time.Duration) *sim.Scenario {
	src := fmt.Sprintf(`
members n=%d
topic name=%s partitions=%d
timing heartbeat=%v session=%v rebalance=%v margin=%v drift=0.01 request-timeout=%v
network delay=lognormal(median=150us,p99=2ms)
work every=100ms
`, fidMembers, fidTopic, fidParts, fidInterval, fidSession, fidRebalance, fidMargin, fidRequest)
	if crash {
		src += fmt.Sprintf("crash member=m1 at=%v\nrun for=%v\n", crashAt, crashAt+4*fidSession)
	} else {
		src += fmt.Sprintf("run for=%v\n", crashAt)
	}
	sc, err := sim.ParseScenario("fidelity", src)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestFidelity compares the simulator with real processes. It takes a few
// seconds of real time; -short skips it.
func TestFidelity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real members on loopback for several seconds")
	}
	// The simulator, over seeds: the range of reassignment times (they
	// depend on where in its heartbeat cycle the member crashed) and the
	// epoch bumps the crash caused (the epoch at the end, less the epoch
	// of the same run, prefix for prefix, without the crash).
	const crashAt = 10 * time.Second
	lo, hi := time.Duration(1<<62), time.Duration(0)
	var simBumps []int64
	var sum time.Duration
	const seeds = 20
	for seed := uint64(1); seed <= seeds; seed++ {
		before := run(t, fidelityScenario(t, false, crashAt), sim.Options{Seed: seed})
		after := run(t, fidelityScenario(t, true, crashAt), sim.Options{Seed: seed})
		if after.Availability.Crashes != 1 || after.Availability.NotReassigned != 0 {
			t.Fatalf("seed %d: %d crashes, %d not reassigned", seed, after.Availability.Crashes, after.Availability.NotReassigned)
		}
		d := time.Duration(after.Availability.ReassignMax * float64(time.Second))
		lo, hi, sum = min(lo, d), max(hi, d), sum+d
		simBumps = append(simBumps, int64(after.Churn.Epoch-before.Churn.Epoch))
	}
	simMean := sum / seeds

	realReassign, realBumps := runReal(t)
	t.Logf("crash to full reassignment: simulator %v (range %v to %v over %d seeds), real %v",
		simMean.Round(time.Millisecond), lo.Round(time.Millisecond), hi.Round(time.Millisecond), seeds, realReassign.Round(time.Millisecond))
	t.Logf("epoch bumps caused by the crash: simulator %v, real %d", simBumps, realBumps)
	if realReassign < lo-fidSlack || realReassign > hi+fidSlack {
		t.Errorf("real reassignment took %v, outside the simulator's %v to %v (± %v)", realReassign, lo, hi, fidSlack)
	}
	for _, b := range simBumps {
		if b != realBumps {
			t.Errorf("the crash bumped the epoch %d times for real, %v in the simulator", realBumps, simBumps)
			break
		}
	}
}

// killSwitch is a kgo dialer whose connections can all be cut at once,
// for good: to the coordinator, the member looks crashed.
type killSwitch struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (k *killSwitch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		_ = c.Close()
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
// returns the reassignment time and the epoch bumps of the crash.
func runReal(t *testing.T) (time.Duration, int64) {
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	cfg := testenv.TenureConfig(t, fidSession, fidInterval, fidParts)
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
		kills[i] = &killSwitch{}
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
	victims := r.of("m1")
	crashed := time.Now()
	kills[0].kill()
	waitUntil(t, 4*fidSession, func() bool { return r.takenOver(victims, "m1") }, "m1's partitions to be taken over")
	reassign := time.Since(crashed)
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
