package e2e

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
	tmember "github.com/tenure-dev/tenure/member"
)

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

func (r *runners) handler(name string) tmember.Handler {
	return func(c *tmember.Claim) {
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

// runInProcess runs a fidelity case with the real server and the member
// library in the test process, and returns the reassignment time and the
// epoch bumps of the fault.
func runInProcess(t *testing.T, f fidFault) (time.Duration, int64) {
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	cfg := testenv.TenureConfig(t, fidSession, fidInterval, fidParts)
	cfg.Core.ConnLossGrace = fidGrace
	cfg.Logger = log.Named("tenure")
	broker := testenv.StartTenure(t, cfg)
	g := startFidMembers(t, func() []string { return []string{broker} }, log)
	defer g.close(t)

	before := g.epoch(t)
	victim := fidVictim(f)
	victims := g.r.of(victim)
	var closed chan struct{} // a leave's Close is done
	crashed := time.Now()
	switch f {
	case fidLeave:
		// Close returns once the member has left; the partitions are
		// measured from the moment it was asked, as in the simulator.
		s := g.sessions[fidMembers-1]
		g.sessions[fidMembers-1] = nil
		closed = make(chan struct{})
		go func() {
			defer close(closed)
			cctx, ccancel := context.WithTimeout(context.Background(), 2*fidSession)
			defer ccancel()
			if err := s.Close(cctx); err != nil {
				t.Errorf("close %s: %v", victim, err)
			}
		}()
	case fidHostCrash, fidPause:
		// In-process, a pause is the member's connections frozen: no
		// FIN, nothing answered. A real stop-the-world pause differs
		// in two ways that do not move this figure: its kernel would
		// answer TCP keepalive probes (this timing uses none), and its
		// own timers would stop too (here they run, so it stops its
		// handlers itself; the figure waits for the others' handlers).
		// The "SIGSTOP" case stops a member process for real.
		g.kills[0].silence()
	default:
		g.kills[0].kill()
	}
	waitUntil(t, 4*fidSession, func() bool { return g.r.takenOver(victims, victim) }, victim+"'s partitions to be taken over")
	reassign := time.Since(crashed)
	if closed != nil {
		<-closed
	}
	time.Sleep(2 * fidInterval) // let the group settle before reading its epoch
	return reassign, g.epoch(t) - before
}

// fidGroupInProcess is the fidelity group's members in the test process, each
// on its own kgo client whose dialer can take its connections away, and
// an admin client to read the group's epoch.
type fidGroupInProcess struct {
	brokers  func() []string // the live ones
	r        *runners
	kills    []*killSwitch
	sessions []*tmember.Session
}

// startFidMembers starts the fidelity group's members on brokers and
// waits until every partition runs on exactly one of them, each running
// its share, and a second more.
func startFidMembers(t *testing.T, brokers func() []string, log *zap.Logger) *fidGroupInProcess {
	g := &fidGroupInProcess{brokers: brokers, r: &runners{running: map[int32]map[string]time.Time{}},
		kills: make([]*killSwitch, fidMembers), sessions: make([]*tmember.Session, fidMembers)}
	for i := range fidMembers {
		g.kills[i] = newKillSwitch()
		jctx, jcancel := context.WithTimeout(t.Context(), 10*time.Second)
		s, err := tmember.Join(jctx, tmember.Config{
			Brokers:          brokers(),
			ClientOpts:       []kgo.Opt{kgo.Dialer(g.kills[i].dial)},
			Group:            fidGroup,
			Topics:           []string{fidTopic},
			SessionTimeout:   fidSession,
			RebalanceTimeout: fidRebalance,
			SuspectMargin:    fidMargin,
			RequestTimeout:   fidRequest,
			MaxDrift:         0.01,
			Logger:           log.Named(fmt.Sprintf("m%d", i+1)),
		}, g.r.handler(fmt.Sprintf("m%d", i+1)))
		jcancel()
		if err != nil {
			g.close(t)
			t.Fatalf("join m%d: %v", i+1, err)
		}
		g.sessions[i] = s
	}
	waitUntil(t, 15*time.Second, g.r.balanced, "the group to settle")
	time.Sleep(time.Second)
	return g
}

// epoch reads the group's epoch.
func (g *fidGroupInProcess) epoch(t *testing.T) int64 { return fidEpoch(t, g.brokers()) }

// fidEpoch reads the fidelity group's epoch (ConsumerGroupDescribe), on a
// new client of brokers each time: a client that knew a dead coordinator
// would go on dialling it.
func fidEpoch(t *testing.T, brokers []string) int64 {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{fidGroup}
	var last error
	for range 20 {
		admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		resp, err := req.RequestWith(ctx, admin)
		cancel()
		admin.Close()
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
			return int64(resp.Groups[0].Epoch)
		}
		last = fmt.Errorf("%v %+v", err, resp)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("describe %s: %v", fidGroup, last)
	return 0
}

// close closes every member still there (m1, cut off, cannot leave).
func (g *fidGroupInProcess) close(t *testing.T) {
	for i, s := range g.sessions {
		if s == nil {
			continue
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.Close(cctx)
		ccancel()
		if err != nil && i != 0 {
			t.Errorf("close m%d: %v", i+1, err)
		}
	}
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
