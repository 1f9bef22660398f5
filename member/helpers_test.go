package member

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/epoch"
)

// Test timing: the coordinators run with a 3 s session and a 300 ms
// heartbeat interval; members go Suspect 2.87 s after the send of their
// last acknowledged heartbeat.
const (
	testSession   = 3 * time.Second
	testInterval  = 300 * time.Millisecond
	testRebalance = 2 * time.Second
	testMargin    = 100 * time.Millisecond
	testRequest   = 500 * time.Millisecond
	testTopic     = "work"
	testParts     = 64
)

// testSuspectAfter is SessionTimeout × (1 − 1 %) − margin.
var testSuspectAfter = epoch.Window{SessionTimeout: testSession, MaxDrift: 0.01, Margin: testMargin}.SuspectAfter()

// startKfake starts an in-process KIP-848 cluster with one 64-partition
// topic, closed when the test ends.
func startKfake(t *testing.T) []string {
	t.Helper()
	return startKfakeCluster(t, testInterval).ListenAddrs()
}

// startKfakeCluster is startKfake with a heartbeat interval of choice,
// returning the cluster for control functions.
func startKfakeCluster(t *testing.T, interval time.Duration) *kfake.Cluster {
	t.Helper()
	return startKfakeBrokers(t, 1, interval)
}

// startKfakeBrokers is startKfakeCluster with a number of brokers, and
// more of kfake's options.
func startKfakeBrokers(t *testing.T, brokers int, interval time.Duration, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{
		kfake.NumBrokers(brokers),
		kfake.SeedTopics(testParts, testTopic),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.heartbeat.interval.ms": fmt.Sprint(interval.Milliseconds()),
			"group.consumer.session.timeout.ms":    fmt.Sprint(testSession.Milliseconds()),
		}),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// netCut is a member's network: a dialer for kgo whose connections can be
// cut (everything sent or received is silently dropped, and new dials
// hang, like a partition without resets) and healed (the old
// connections are closed, so the client reconnects).
type netCut struct {
	mu     sync.Mutex
	cut    bool
	healed chan struct{}
	conns  map[*cutConn]struct{}
}

func newNetCut() *netCut {
	return &netCut{conns: make(map[*cutConn]struct{})}
}

func (n *netCut) dial(ctx context.Context, network, host string) (net.Conn, error) {
	n.mu.Lock()
	cut, healed := n.cut, n.healed
	n.mu.Unlock()
	if cut {
		select {
		case <-healed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	cc := &cutConn{Conn: c, n: n}
	n.mu.Lock()
	n.conns[cc] = struct{}{}
	n.mu.Unlock()
	return cc, nil
}

func (n *netCut) isCut() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut
}

// Cut severs the network.
func (n *netCut) Cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cut {
		n.cut, n.healed = true, make(chan struct{})
	}
}

// Heal restores it.
func (n *netCut) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cut {
		return
	}
	n.cut = false
	close(n.healed)
	for c := range n.conns {
		c.Conn.Close()
	}
	clear(n.conns)
}

type cutConn struct {
	net.Conn
	n *netCut
}

func (c *cutConn) Read(b []byte) (int, error) {
	for {
		k, err := c.Conn.Read(b)
		if err != nil || !c.n.isCut() {
			return k, err
		}
		// Received during the cut: lost.
	}
}

func (c *cutConn) Write(b []byte) (int, error) {
	if c.n.isCut() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *cutConn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns, c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}

// run is one handler run, as the recorder saw it.
type run struct {
	member     string
	partition  int32
	token      epoch.Token
	start, end time.Time // end is zero while running
	cause      error
}

// recorder is a handler that works until its claim's context ends,
// commits on revocation, and records every run.
type recorder struct {
	t      *testing.T
	mu     sync.Mutex
	runs   []*run
	commit bool
}

func (r *recorder) handler(name string) Handler {
	return func(c *Claim) {
		if c.Topic() != testTopic {
			r.t.Errorf("claim of topic %q", c.Topic())
		}
		rn := &run{member: name, partition: c.Partition(), token: c.Token().Token, start: time.Now()}
		r.mu.Lock()
		r.runs = append(r.runs, rn)
		r.mu.Unlock()
		<-c.Context().Done()
		cause := context.Cause(c.Context())
		if r.commit && errors.Is(cause, ErrRevoked) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := c.Commit(ctx, int64(c.Token().Token), name); err != nil {
				r.t.Errorf("final commit of %v by %s: %v", c, name, err)
			}
			cancel()
		}
		r.mu.Lock()
		rn.end, rn.cause = time.Now(), cause
		r.mu.Unlock()
	}
}

// check verifies that runs of the same partition never overlapped across
// members, and that a partition's tokens never decrease over time.
func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	byPart := make(map[int32][]*run)
	for _, rn := range r.runs {
		byPart[rn.partition] = append(byPart[rn.partition], rn)
	}
	for p, runs := range byPart {
		sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
		for i := 1; i < len(runs); i++ {
			prev, cur := runs[i-1], runs[i]
			if prev.end.IsZero() || cur.start.Before(prev.end) {
				t.Errorf("partition %d: %s (token %v) started at %v while %s (token %v) ran until %v",
					p, cur.member, cur.token, cur.start.Format(time.StampMicro), prev.member, prev.token, prev.end.Format(time.StampMicro))
			}
			if cur.token < prev.token || (cur.member != prev.member && cur.token == prev.token) {
				t.Errorf("partition %d: token %v (%s) after %v (%s)", p, cur.token, cur.member, prev.token, prev.member)
			}
		}
	}
}

// testConfig is a member config for the test coordinators.
func testConfig(t *testing.T, brokers []string, opts ...kgo.Opt) Config {
	return Config{
		Brokers:          brokers,
		ClientOpts:       opts,
		Group:            "g",
		Topics:           []string{testTopic},
		SessionTimeout:   testSession,
		RebalanceTimeout: testRebalance,
		SuspectMargin:    testMargin,
		RequestTimeout:   testRequest,
		Logger:           zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
	}
}

// join joins a member, closed (with a deadline) when the test ends.
func join(t *testing.T, cfg Config, h Handler) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Join(ctx, cfg, h)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close %s: %v", s.MemberID(), err)
		}
	})
	return s
}

// owners maps each partition to the members holding it Owned.
func owners(sessions map[string]*Session) map[int32][]string {
	out := make(map[int32][]string)
	for name, s := range sessions {
		for _, c := range s.Claims() {
			if c.State() == epoch.Owned {
				out[c.Partition()] = append(out[c.Partition()], name)
			}
		}
	}
	for _, ms := range out {
		slices.Sort(ms)
	}
	return out
}

// waitFor polls cond until it holds (returning "") or the timeout passes
// (failing with cond's last reason).
func waitFor(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stable reports "" when every partition is Owned by exactly one of the
// sessions, and each owns its share (64/n, rounded either way).
func stable(sessions map[string]*Session) func() string {
	return func() string {
		o := owners(sessions)
		count := make(map[string]int)
		for p := int32(0); p < testParts; p++ {
			if len(o[p]) != 1 {
				return fmt.Sprintf("partition %d owned by %v", p, o[p])
			}
			count[o[p][0]]++
		}
		n := len(sessions)
		for name := range sessions {
			if c := count[name]; c < testParts/n || c > (testParts+n-1)/n {
				return fmt.Sprintf("%s owns %d partitions: %v", name, c, count)
			}
		}
		return ""
	}
}

func kgoDialer(n *netCut) kgo.Opt { return kgo.Dialer(n.dial) }
