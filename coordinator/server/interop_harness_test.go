package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// The interop tests run stock kgo consumers and kadm against tenure and,
// with the same code, against kfake (franz-go's in-process fake Kafka), so
// that every expectation they hold of tenure is one Kafka's own behaviour
// shares. Timeouts are short so the whole suite stays within seconds:
// members heartbeat every 100 ms and expire after 1.5 s.
const (
	interopTopic      = "jobs"
	interopGroupID    = "g"
	interopPartitions = 64
	interopMembers    = 8
	interopHeartbeat  = 100 * time.Millisecond
	interopSession    = 1500 * time.Millisecond
	interopRebalance  = 5 * time.Second
	// interopSettle bounds every wait for the group to settle.
	interopSettle = 20 * time.Second
)

// interopMode is the group protocol the consumers speak.
type interopMode uint8

const (
	_              interopMode = iota
	interopClassic             // JoinGroup/SyncGroup, kgo's cooperative-sticky balancer
	interop848                 // KIP-848, kgo.ServerSideBalancer()
)

func (m interopMode) String() string {
	switch m {
	case interopClassic:
		return "classic"
	case interop848:
		return "kip848"
	}
	return fmt.Sprintf("interopMode(%d)", uint8(m))
}

// interopBackend is a Kafka-protocol server the tests talk to: tenure or
// kfake, both in-process on a loopback port.
type interopBackend struct {
	name string
	addr string
	// tenure is set for the tenure backend only.
	tenure *testServer
	// unnamedDescribe: ConsumerGroupDescribe names assigned topics by ID
	// only, so kadm files them under "". Kafka and tenure fill in the
	// name; kfake leaves it empty.
	unnamedDescribe bool
	// untyped848: ListGroups gives a KIP-848 group an empty protocol
	// type. Kafka (ConsumerGroup.asListedGroup) and tenure say
	// "consumer"; kfake leaves it empty.
	untyped848 bool
	// session is the members' session timeout; zero means
	// interopSession.
	session time.Duration
}

// sessionTimeout is the session timeout the members ask for, and the
// backend gives KIP-848 members.
func (b *interopBackend) sessionTimeout() time.Duration { return cmp.Or(b.session, interopSession) }

// startInteropTenure starts tenure with the interop timeouts.
func startInteropTenure(t testing.TB) *interopBackend {
	t.Helper()
	return startTenureWith(t, interopHeartbeat, interopSession)
}

// startTenureWith starts tenure in-process with the given KIP-848
// heartbeat interval and session timeout, no initial rebalance delay and
// classic session timeouts down to 500 ms.
func startTenureWith(t testing.TB, heartbeat, session time.Duration) *interopBackend {
	t.Helper()
	ts := startServerLogger(t, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), func(c *Config) {
		c.Core.MinSessionTimeout = 500 * time.Millisecond
		c.Core.InitialRebalanceDelay = 0
		c.Core.ConsumerSessionTimeout = session
		c.Core.ConsumerHeartbeatInterval = heartbeat
	})
	return &interopBackend{name: "tenure", addr: ts.addr, tenure: ts}
}

// startInteropKfake starts a one-broker kfake cluster with the interop
// timeouts and closes it when the test ends.
//
// kfake, the reference, gets four times tenure's session: its group loop
// and the eight clients share the test's CPU, and on a loaded machine
// under -race a member whose heartbeats were held up 1.5 s was expelled
// (UNKNOWN_MEMBER_ID on its commit) and its partitions given to others
// while it still held them. tenure's rows keep interopSession.
func startInteropKfake(t testing.TB) *interopBackend {
	t.Helper()
	b := startKfakeWith(t, interopHeartbeat, 4*interopSession)
	b.session = 4 * interopSession
	return b
}

// startKfakeWith starts a one-broker kfake cluster in-process with the
// given KIP-848 heartbeat interval and session timeout and classic
// session timeouts down to 500 ms, and closes it when the test ends.
func startKfakeWith(t testing.TB, heartbeat, session time.Duration) *interopBackend {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(500*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.session.timeout.ms":    fmt.Sprint(session.Milliseconds()),
			"group.consumer.heartbeat.interval.ms": fmt.Sprint(heartbeat.Milliseconds()),
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &interopBackend{name: "kfake", addr: c.ListenAddrs()[0], unnamedDescribe: true, untyped848: true}
}

// interopBackends lists the backends every interop scenario runs against,
// tenure first. They run one after the other, never in parallel, so that
// timing on a loaded machine stays predictable.
var interopBackends = []struct {
	name  string
	start func(testing.TB) *interopBackend
}{
	{"tenure", startInteropTenure},
	{"kfake", startInteropKfake},
}

// testLogger is a kgo.Logger writing through a zap logger at a fixed
// level, so that kgo does not format the messages a test would drop.
type testLogger struct {
	log   *zap.SugaredLogger
	level kgo.LogLevel
}

func (l testLogger) Level() kgo.LogLevel { return l.level }
func (l testLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		l.log.Errorw("kgo: "+msg, keyvals...)
	case kgo.LogLevelWarn:
		l.log.Warnw("kgo: "+msg, keyvals...)
	default:
		l.log.Infow("kgo: "+msg, keyvals...)
	}
}

// interopClient returns a kgo client of b that is not a group member,
// closed when the test ends.
func interopClient(t testing.TB, b *interopBackend, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(b.addr),
		kgo.WithLogger(testLogger{zaptest.NewLogger(t).Sugar(), kgo.LogLevelWarn}),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// severableProxy forwards one client's TCP connections to a server, and
// can cut them all at once: to the server, the client has died without
// leaving its group. Once severed, new connections are refused until
// heal.
type severableProxy struct {
	t      testing.TB
	target string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	severed bool
	wg      sync.WaitGroup
}

func newSeverableProxy(t testing.TB, target string) *severableProxy {
	t.Helper()
	p := &severableProxy{t: t, target: target, conns: make(map[net.Conn]struct{})}
	p.listen()
	t.Cleanup(func() {
		p.sever()
		p.wg.Wait()
	})
	return p
}

func (p *severableProxy) listen() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.t.Fatal(err)
	}
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
}

func (p *severableProxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.severed {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		io.Copy(dst, src)
		// One side ended: end both, as a dying process would.
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}
	go pipe(server, client)
	go pipe(client, server)
}

// dial is the client's kgo.Dialer: every broker address leads to the
// proxy, which leads to the one server.
func (p *severableProxy) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	p.mu.Lock()
	addr, severed := p.ln.Addr().String(), p.severed
	p.mu.Unlock()
	if severed {
		return nil, errors.New("proxy severed")
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// sever closes the listener and every forwarded connection.
func (p *severableProxy) sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.severed {
		return
	}
	p.severed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
}

// heal lets new connections through again.
func (p *severableProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.severed {
		return
	}
	p.severed = false
	p.listen()
}

// ownership tracks, from the kgo callbacks of every member, which
// partitions each member believes it owns.
type ownership struct {
	mu    sync.Mutex
	owned []map[int32]bool // by member index
	// overlaps records every assignment of a partition another member
	// still believed it owned, ignoring members declared dead.
	overlaps []string
	dead     []bool
	// last is when a callback last changed anything.
	last time.Time
}

func newOwnership(n int) *ownership {
	o := &ownership{owned: make([]map[int32]bool, n), dead: make([]bool, n)}
	for i := range o.owned {
		o.owned[i] = make(map[int32]bool)
	}
	return o
}

func (o *ownership) assigned(i int, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range m[interopTopic] {
		for j, owned := range o.owned {
			if j != i && owned[p] && !o.dead[j] {
				o.overlaps = append(o.overlaps, fmt.Sprintf("partition %d assigned to member %d while member %d owns it", p, i, j))
			}
		}
		o.owned[i][p] = true
	}
	o.last = time.Now()
}

func (o *ownership) released(i int, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range m[interopTopic] {
		delete(o.owned[i], p)
	}
	o.last = time.Now()
}

// lastChange returns when a callback last changed any member's
// partitions.
func (o *ownership) lastChange() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// kill marks member i as gone: what it still believes it owns no longer
// counts.
func (o *ownership) kill(i int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dead[i] = true
}

// of returns member i's partitions, sorted.
func (o *ownership) of(i int) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.owned[i]))
}

// checkExclusive reports why the live members' partitions are not each
// owned exactly once, evenly spread (cooperative-sticky and the
// server-side uniform assignor both balance within one partition), or ""
// if they are.
func (o *ownership) checkExclusive(live []int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner := make(map[int32]int)
	lo, hi := interopPartitions/len(live), (interopPartitions+len(live)-1)/len(live)
	for _, i := range live {
		if n := len(o.owned[i]); n < lo || n > hi {
			return fmt.Sprintf("member %d owns %d partitions, want %d..%d", i, n, lo, hi)
		}
		for p := range o.owned[i] {
			if j, ok := owner[p]; ok {
				return fmt.Sprintf("partition %d owned by members %d and %d", p, j, i)
			}
			owner[p] = i
		}
	}
	for p := range int32(interopPartitions) {
		if _, ok := owner[p]; !ok {
			return fmt.Sprintf("partition %d has no owner", p)
		}
	}
	return ""
}

func (o *ownership) overlapReport() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.overlaps)
}

// interopMember is one stock kgo group member, connected through its own
// severable proxy.
type interopMember struct {
	i     int
	cl    *kgo.Client
	proxy *severableProxy
}

// interopGroup is a set of kgo members of one group on one backend.
type interopGroup struct {
	t       testing.TB
	b       *interopBackend
	mode    interopMode
	adm     *kadm.Client
	topicID [16]byte
	own     *ownership
	members []*interopMember
}

// newInteropGroup creates the 64-partition topic and returns an empty
// group; join adds members.
func newInteropGroup(t testing.TB, b *interopBackend, mode interopMode, n int) *interopGroup {
	t.Helper()
	adm := kadm.NewClient(interopClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	created, err := adm.CreateTopics(ctx, interopPartitions, 1, nil, interopTopic)
	if err == nil {
		err = created[interopTopic].Err
	}
	if err != nil {
		t.Fatalf("%s: CreateTopics: %v", b.name, err)
	}
	return &interopGroup{t: t, b: b, mode: mode, adm: adm, topicID: created[interopTopic].ID,
		own: newOwnership(n), members: make([]*interopMember, n)}
}

// join starts member i: a stock kgo consumer of the topic in the group.
func (g *interopGroup) join(i int) *interopMember {
	t := g.t
	t.Helper()
	proxy := newSeverableProxy(t, g.b.addr)
	opts := []kgo.Opt{
		kgo.SeedBrokers(g.b.addr),
		kgo.Dialer(proxy.dial),
		kgo.ClientID(fmt.Sprintf("member-%d", i)),
		kgo.WithLogger(testLogger{zaptest.NewLogger(t).Sugar(), kgo.LogLevelWarn}),
		kgo.ConsumerGroup(interopGroupID),
		kgo.ConsumeTopics(interopTopic),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.SessionTimeout(g.b.sessionTimeout()),
		kgo.HeartbeatInterval(interopHeartbeat),
		kgo.RebalanceTimeout(interopRebalance),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.own.assigned(i, m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.own.released(i, m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.own.released(i, m) }),
	}
	if g.mode == interop848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m := &interopMember{i: i, cl: cl, proxy: proxy}
	g.members[i] = m
	t.Cleanup(func() {
		// A severed member says goodbye once the network is back (the
		// server answers its leave UNKNOWN_MEMBER_ID); without the
		// heal its Close would retry the leave for half a minute.
		proxy.heal()
		cl.Close()
	})
	return m
}

// leave closes member i gracefully: kgo leaves the group.
func (g *interopGroup) leave(i int) {
	g.members[i].cl.Close()
	g.own.kill(i)
}

// kill cuts member i's connections without a leave and returns its last
// member ID and generation (classic) or member epoch (KIP-848).
func (g *interopGroup) kill(i int) (memberID string, gen int32) {
	memberID, gen = g.members[i].cl.GroupMetadata()
	g.members[i].proxy.sever()
	g.own.kill(i)
	return memberID, gen
}

// memberIDs returns the current member ID of each live member.
func (g *interopGroup) memberIDs(live []int) map[string]int {
	ids := make(map[string]int, len(live))
	for _, i := range live {
		id, _ := g.members[i].cl.GroupMetadata()
		ids[id] = i
	}
	return ids
}

// serverView describes the group through kadm and reports how it differs
// from what the live members believe, or "" if it agrees: state Stable,
// exactly the live members, each assigned what it owns.
func (g *interopGroup) serverView(ctx context.Context, live []int) string {
	ids := g.memberIDs(live)
	assigned := make(map[string][]int32)
	var state string
	switch g.mode {
	case interopClassic:
		described, err := g.adm.DescribeGroups(ctx, interopGroupID)
		if err != nil {
			return fmt.Sprintf("DescribeGroups: %v", err)
		}
		d := described[interopGroupID]
		if d.Err != nil {
			return fmt.Sprintf("DescribeGroups: %v", d.Err)
		}
		if d.ProtocolType != "consumer" {
			return fmt.Sprintf("DescribeGroups: protocol type %q", d.ProtocolType)
		}
		state = d.State
		for _, m := range d.Members {
			var ps []int32
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					if t.Topic == interopTopic {
						ps = append(ps, t.Partitions...)
					}
				}
			}
			assigned[m.MemberID] = ps
		}
	case interop848:
		described, err := g.adm.DescribeConsumerGroups(ctx, interopGroupID)
		if err != nil {
			return fmt.Sprintf("DescribeConsumerGroups: %v", err)
		}
		d := described[interopGroupID]
		if d.Err != nil {
			return fmt.Sprintf("DescribeConsumerGroups: %v", d.Err)
		}
		state = d.State
		for _, m := range d.Members {
			topic := interopTopic
			if g.b.unnamedDescribe {
				topic = ""
			}
			ps := slices.Collect(maps.Keys(m.Assignment[topic]))
			if target := slices.Collect(maps.Keys(m.TargetAssignment[topic])); !sameSet(ps, target) {
				return fmt.Sprintf("member %s has %v, target %v", m.MemberID, ps, target)
			}
			assigned[m.MemberID] = ps
		}
	}
	if state != "Stable" {
		return fmt.Sprintf("state %s", state)
	}
	if got, want := slices.Sorted(maps.Keys(assigned)), slices.Sorted(maps.Keys(ids)); !slices.Equal(got, want) {
		return fmt.Sprintf("server lists members %v, live members are %v", got, want)
	}
	for id, i := range ids {
		if own := g.own.of(i); !sameSet(assigned[id], own) {
			return fmt.Sprintf("server assigns member %d %v, it owns %v", i, assigned[id], own)
		}
	}
	return ""
}

// waitStable waits until the live members own every partition exactly
// once, evenly, and the server's description agrees, and returns how long
// that took.
func (g *interopGroup) waitStable(live []int) time.Duration {
	t := g.t
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), interopSettle)
	defer cancel()
	var why string
	for ctx.Err() == nil {
		if why = g.own.checkExclusive(live); why == "" {
			if why = g.serverView(ctx, live); why == "" {
				return time.Since(start)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s %s: group not stable with members %v after %v: %s", g.b.name, g.mode, live, interopSettle, why)
	return 0
}

// commit commits offsets for the member's own partitions through its kgo
// client, as a worker does after finishing work, and fails the test on
// any error.
func (g *interopGroup) commit(i int, offsets map[int32]int64) {
	t := g.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eo := make(map[int32]kgo.EpochOffset, len(offsets))
	for p, o := range offsets {
		eo[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var err error
	g.members[i].cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{interopTopic: eo},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, rerr error) {
			err = rerr
			if rerr == nil {
				for p, code := range commitCodes(resp) {
					if code != 0 {
						err = errors.Join(err, fmt.Errorf("partition %d: %w", p, kerr.ErrorForCode(code)))
					}
				}
			}
		})
	if err != nil {
		t.Fatalf("%s %s: member %d commit %v: %v", g.b.name, g.mode, i, offsets, err)
	}
}

// rawCommit sends an OffsetCommit with the given member ID and generation
// (or member epoch) through cl, bypassing kgo's commit logic, and returns
// the error code of each partition.
func (g *interopGroup) rawCommit(cl *kgo.Client, memberID string, gen int32, offsets map[int32]int64) map[int32]int16 {
	t := g.t
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = interopGroupID
	req.MemberID = memberID
	req.Generation = gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = interopTopic
	rt.TopicID = g.topicID // v10 names topics by ID
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offsets[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetCommit: %v", err)
	}
	codes := commitCodes(resp)
	if len(codes) != len(offsets) {
		t.Fatalf("OffsetCommit answered %d partitions, sent %d", len(codes), len(offsets))
	}
	return codes
}

func commitCodes(resp *kmsg.OffsetCommitResponse) map[int32]int16 {
	codes := make(map[int32]int16)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[rp.Partition] = rp.ErrorCode
		}
	}
	return codes
}

// committed reads the group's committed offsets through kadm: partition
// -> offset, for partitions with a commit.
func (g *interopGroup) committed() map[int32]int64 {
	t := g.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offsets, err := g.adm.FetchOffsets(ctx, interopGroupID)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("%s %s: FetchOffsets: %v", g.b.name, g.mode, err)
	}
	out := make(map[int32]int64)
	for p, o := range offsets[interopTopic] {
		if o.At >= 0 {
			out[p] = o.At
		}
	}
	return out
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke.Message
		}
		return strings.ToUpper(err.Error())
	}
	return fmt.Sprint(code)
}
