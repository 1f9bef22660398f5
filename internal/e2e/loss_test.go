package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

var (
	lossTenure = flag.String("e2e.tenure", "", "TestPermanentLoss, BenchmarkCapacity, BenchmarkTakeover, TestUpgradeBesideOldNode (its new node): a prebuilt tenure binary to run instead of this tree's (to measure another version)")
	lossReport = flag.Bool("e2e.report", false, "TestPermanentLoss: report what each fault cost, observing a fixed window, instead of failing on it")
)

// lossTTL is the election TTL of TestPermanentLoss: short to keep the
// test fast, long enough for a loaded machine.
const lossTTL = 2 * time.Second

const (
	lossTopic      = "loss"
	lossPartitions = 16
	lossMembers    = 3
)

// A lossFault takes a node away for good.
type lossFault string

const (
	faultKill    lossFault = "kill9"   // SIGKILL
	faultStop    lossFault = "sigstop" // SIGSTOP past the TTL, never resumed
	faultIsolate lossFault = "isolate" // every connection to and from it cut
	faultTerm    lossFault = "sigterm" // a graceful stop
)

// TestPermanentLoss takes the node that coordinates two groups away for
// good (kill -9, SIGSTOP, isolation by its proxies, SIGTERM), in a
// one-leader set and in a sharded one, under stock kgo consumers seeded
// with every node: three KIP-848 members in one group, three classic
// cooperative-sticky members in the other. The survivors must take the
// groups over within the TTL and two seconds, and every member must find
// them by itself: nobody is expelled, no consumer's partitions are lost
// or revoked, every partition stays owned exactly once (in the
// coordinator's view and in the consumers' callbacks), and the committed
// offsets stay.
func TestPermanentLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	t.Parallel()
	bins := build(t, "github.com/tenure-dev/tenure/cmd/tenure", "go.etcd.io/etcd/server/v3")
	if *lossTenure != "" {
		bins[0] = *lossTenure
	}
	peer, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	etcd := proctest.Start(t, "etcd", bins[1], "--name", "e0", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", "http://{addr}", "--advertise-client-urls", "http://{addr}",
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "e0=http://"+peer, "--log-level", "warn")
	proxies := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	var rows []string
	var mu sync.Mutex
	t.Cleanup(func() {
		slices.Sort(rows)
		t.Logf("partition-seconds unowned as the consumers' callbacks (clients) and the survivors (coord.) saw them\n"+
			"set      fault    served   expelled lost revoked clients  coord.   all-back\n%s", strings.Join(rows, "\n"))
	})
	for _, shards := range []int{1, 6} {
		for _, f := range []lossFault{faultKill, faultStop, faultIsolate, faultTerm} {
			name := fmt.Sprintf("shards%d-%s", shards, f)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				row := runLoss(t, bins[0], etcd.Addr, proxies, name, shards, f)
				mu.Lock()
				rows = append(rows, row)
				mu.Unlock()
			})
		}
	}
}

// lossNode is one tenure node behind its proxies: every client and peer
// reaches its Kafka listener through kafka, and it reaches etcd through
// etcd, so that stopping both cuts it off.
type lossNode struct {
	p           *proctest.Process
	kafka, etcd *toxiproxy.Proxy
	http        string
}

func (n *lossNode) addr() string { return n.kafka.Listen }

func startLossNode(t *testing.T, tenure, etcdAddr string, proxies *toxiproxy.ApiServer, name, prefix string, shards int) *lossNode {
	t.Helper()
	// The node binds port 0 and logs what it bound (StartServe): a port
	// picked ahead is free only until another listener or an outgoing
	// connection takes it. Its Kafka proxy, whose address it advertises,
	// binds port 0 before it starts and is never rebound: the proxy's
	// upstream is a relay, pointed at the node once it serves
	// (proctest.Relay says why not toxiproxy's Proxy.Update).
	relay, err := proctest.NewRelay()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	n := &lossNode{
		kafka: toxiproxy.NewProxy(proxies, name+"-kafka", "127.0.0.1:0", relay.Addr()),
		etcd:  toxiproxy.NewProxy(proxies, name+"-etcd", "127.0.0.1:0", etcdAddr),
	}
	if err := n.kafka.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.kafka.Stop()
		n.etcd.Stop()
	})
	n.p = proctest.StartServe(t, name, tenure, "serve", "--listen", "{addr}", "--advertise", n.kafka.Listen,
		"--etcd-endpoints", "http://"+n.etcd.Listen, "--etcd-prefix", prefix, "--election-ttl", lossTTL.String(),
		"--shards", strconv.Itoa(shards), "--http", "{http}", "--partitions", strconv.Itoa(lossPartitions),
		"--consumer-session-timeout", "10s", "--consumer-heartbeat-interval", "500ms", "--log-level", "info")
	n.http = n.p.HTTP
	relay.Point(n.p.Addr)
	return n
}

// lossConsumer is a stock kgo consumer whose callbacks are recorded.
type lossConsumer struct {
	name    string
	cl      *kgo.Client
	mu      sync.Mutex
	held    map[int32]bool
	settled bool
	lost    int // OnPartitionsLost calls with partitions
	revoked int // revocations after settling
	added   int // assignments after settling
}

func startLossConsumer(ctx context.Context, t *testing.T, seeds []string, group, name string, kip848 bool) *lossConsumer {
	c := &lossConsumer{name: name, held: map[int32]bool{}}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(lossTopic),
		kgo.WithLogger(kgo.BasicLogger(&testLogWriter{t: t, name: name}, kgo.LogLevelWarn, nil)),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range m[lossTopic] {
				c.held[p] = true
			}
			if c.settled && len(m[lossTopic]) > 0 {
				c.added++
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range m[lossTopic] {
				delete(c.held, p)
			}
			if c.settled && len(m[lossTopic]) > 0 {
				c.revoked++
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range m[lossTopic] {
				delete(c.held, p)
			}
			if len(m[lossTopic]) > 0 {
				c.lost++
			}
		}),
	}
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
		}
	}()
	t.Cleanup(func() {
		cl.Close()
		<-done
	})
	return c
}

// lossGroup is one group's consumers.
type lossGroup struct {
	name string
	cs   []*lossConsumer
}

// owners returns how many consumers hold each partition.
func (g *lossGroup) owners() map[int32]int {
	out := map[int32]int{}
	for _, c := range g.cs {
		c.mu.Lock()
		for p := range c.held {
			out[p]++
		}
		c.mu.Unlock()
	}
	return out
}

// exactlyOnce reports whether every partition is held by one consumer.
func (g *lossGroup) exactlyOnce() bool {
	o := g.owners()
	if len(o) != lossPartitions {
		return false
	}
	for _, n := range o {
		if n != 1 {
			return false
		}
	}
	return true
}

func runLoss(t *testing.T, tenure, etcdAddr string, proxies *toxiproxy.ApiServer, name string, shards int, fault lossFault) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prefix := "/" + name + "/"
	var nodes []*lossNode
	var seeds []string
	for i := range 3 {
		n := startLossNode(t, tenure, etcdAddr, proxies, fmt.Sprintf("%s-%d", name, i), prefix, shards)
		nodes, seeds = append(nodes, n), append(seeds, n.addr())
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	admin := kadm.NewClient(adm)
	testenv.Eventually(t, 30*time.Second, "the topic to be created", func() bool {
		r, err := admin.CreateTopic(ctx, lossPartitions, 1, nil, lossTopic)
		return err == nil && r.Err == nil
	})

	groups := []*lossGroup{{name: name + "-848"}, {name: name + "-classic"}}
	for gi, g := range groups {
		for i := range lossMembers {
			g.cs = append(g.cs, startLossConsumer(ctx, t, seeds, g.name, fmt.Sprintf("%s/%d", g.name, i), gi == 0))
		}
	}
	for _, g := range groups {
		testenv.Eventually(t, 60*time.Second, g.name+" to own every partition exactly once", g.exactlyOnce)
	}
	// Every consumer commits an offset for each partition it holds.
	committed := map[string]map[int32]int64{}
	for _, g := range groups {
		committed[g.name] = map[int32]int64{}
		for _, c := range g.cs {
			c.mu.Lock()
			offs := map[int32]kgo.EpochOffset{}
			for p := range c.held {
				offs[p] = kgo.EpochOffset{Epoch: -1, Offset: 1000 + int64(p)}
				committed[g.name][p] = 1000 + int64(p)
			}
			c.mu.Unlock()
			var cerr error
			c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{lossTopic: offs},
				func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
					cerr = err
					if err == nil {
						for _, rt := range resp.Topics {
							for _, rp := range rt.Partitions {
								if rp.ErrorCode != 0 && cerr == nil {
									cerr = fmt.Errorf("partition %d: code %d", rp.Partition, rp.ErrorCode)
								}
							}
						}
					}
				})
			if cerr != nil {
				t.Fatalf("%s: commit: %v", c.name, cerr)
			}
		}
	}
	before := describeLoss(ctx, t, admin, groups)
	for _, g := range groups {
		for _, c := range g.cs {
			c.mu.Lock()
			c.settled = true
			c.mu.Unlock()
		}
	}

	// The victim: the coordinator of the KIP-848 group.
	co := admin.FindGroupCoordinators(ctx, groups[0].name)
	c, ok := co[groups[0].name]
	if !ok || c.Err != nil {
		t.Fatalf("FindCoordinator: %v", co)
	}
	victim := slices.IndexFunc(nodes, func(n *lossNode) bool {
		return n.addr() == net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
	})
	if victim < 0 {
		t.Fatalf("the coordinator %s:%d is none of the nodes", c.Host, c.Port)
	}
	var survivors []string
	for i, n := range nodes {
		if i != victim {
			survivors = append(survivors, n.addr())
		}
	}

	// Unowned partition-seconds, sampled from the callbacks and from the
	// survivors' tenure_unowned_partitions.
	var unownedMu sync.Mutex
	var unowned, unownedCoord float64
	var survivorsHTTP []string
	for i, n := range nodes {
		if i != victim {
			survivorsHTTP = append(survivorsHTTP, n.http)
		}
	}
	sampleStop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		const every = 50 * time.Millisecond
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-sampleStop:
				return
			case <-tick.C:
			}
			n := 0
			for _, g := range groups {
				o := g.owners()
				n += lossPartitions - len(o)
			}
			var coord float64
			if i%5 == 0 {
				for _, a := range survivorsHTTP {
					if v, err := scrape(a, "tenure_unowned_partitions"); err == nil {
						coord += v
					}
				}
			}
			unownedMu.Lock()
			unowned += float64(n) * every.Seconds()
			unownedCoord += coord * 5 * every.Seconds()
			unownedMu.Unlock()
		}
	}()

	start := time.Now()
	switch fault {
	case faultKill:
		// Its port then refuses, as a dead process's does. (A proxy
		// left accepting and closing at once, like a load balancer in
		// front of a dead node, costs a kgo KIP-848 member whose
		// heartbeat reaches it before the metadata moves it on its
		// partitions: kgo does not retry an EOF on a connection's first
		// read, ErrFirstReadEOF, and abandons its assignment.)
		nodes[victim].p.Kill()
		nodes[victim].kafka.Stop()
	case faultStop:
		nodes[victim].p.Signal(syscall.SIGSTOP)
	case faultIsolate:
		nodes[victim].kafka.Stop()
		nodes[victim].etcd.Stop()
	case faultTerm:
		nodes[victim].p.Signal(syscall.SIGTERM)
	}

	// Served: a survivor describes both groups, every member there. A
	// fresh client each time: a client's cached coordinator is what the
	// consumers must get over, not the probe.
	describeFresh := func(timeout time.Duration, strict bool) (map[string]lossMember, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(survivors...))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		dctx, dcancel := context.WithTimeout(ctx, timeout)
		defer dcancel()
		return describeLossErr(dctx, kadm.NewClient(cl), groups, strict)
	}
	var served time.Duration
	var lastErr error
	defer func() {
		if t.Failed() {
			t.Logf("last describe: %v", lastErr)
		}
	}()
	testenv.Eventually(t, 30*time.Second, "a survivor to serve both groups", func() bool {
		d, err := describeFresh(500*time.Millisecond, true)
		if lastErr = err; err != nil || len(d) != len(before) {
			return false
		}
		served = time.Since(start)
		return true
	})

	// Every member reaches the survivors: none awaited under the grace.
	var awaited time.Duration
	if *lossReport {
		time.Sleep(40 * time.Second)
	} else {
		testenv.Eventually(t, 60*time.Second, "every restored member to reach its new coordinator", func() bool {
			for i, n := range nodes {
				if i == victim {
					continue
				}
				v, err := scrape(n.http, "tenure_takeover_awaited_members")
				if err != nil || v != 0 {
					return false
				}
			}
			awaited = time.Since(start)
			return true
		})
		// A heartbeat interval more, so that a coordinator that would
		// expel someone has a tick to do it.
		time.Sleep(time.Second)
	}
	close(sampleStop)
	<-sampled

	after, derr := describeFresh(10*time.Second, !*lossReport)
	expelled := 0
	for m := range before {
		if _, ok := after[m]; !ok {
			expelled++
		}
	}
	lost, revoked := 0, 0
	for _, g := range groups {
		for _, c := range g.cs {
			c.mu.Lock()
			lost += c.lost
			revoked += c.revoked + c.added
			c.mu.Unlock()
		}
	}
	unownedMu.Lock()
	row := fmt.Sprintf("%-8s %-8s %-8v %-8d %-4d %-7d %-8.1f %-8.1f %v", fmt.Sprintf("shards%d", shards), fault,
		served.Round(100*time.Millisecond), expelled, lost, revoked, unowned, unownedCoord, awaited.Round(100*time.Millisecond))
	unownedMu.Unlock()
	t.Logf("node %d taken away (%s): served by a survivor after %v, every member back after %v",
		victim, fault, served.Round(time.Millisecond), awaited.Round(time.Millisecond))
	if *lossReport {
		return row
	}

	if limit := lossTTL + 2*time.Second; served > limit {
		t.Errorf("the groups were served %v after the fault, over the TTL and 2 s (%v)", served, limit)
	}
	if derr != nil {
		t.Fatalf("describe after the fault: %v", derr)
	}
	for m, was := range before {
		if now, ok := after[m]; !ok {
			t.Errorf("member %s expelled", m)
		} else if now.epoch != was.epoch {
			t.Errorf("member %s: epoch %d after the fault, %d before", m, now.epoch, was.epoch)
		}
	}
	for _, g := range groups {
		if !g.exactlyOnce() {
			t.Errorf("%s: partitions held %v, want each by one consumer", g.name, g.owners())
		}
		for _, c := range g.cs {
			c.mu.Lock()
			if c.lost > 0 || c.revoked > 0 || c.added > 0 {
				t.Errorf("%s: %d lost, %d revoked, %d assigned after settling", c.name, c.lost, c.revoked, c.added)
			}
			c.mu.Unlock()
		}
		// The coordinator's view: each partition assigned once.
		seen := map[int32]int{}
		for _, m := range after {
			if m.group == g.name {
				for _, p := range m.partitions {
					seen[p]++
				}
			}
		}
		if len(seen) != lossPartitions || slices.ContainsFunc(slices.Collect(mapValues(seen)), func(n int) bool { return n != 1 }) {
			t.Errorf("%s: the coordinator assigns %v, want each partition once", g.name, seen)
		}
		var offs kadm.OffsetResponses
		testenv.Eventually(t, 20*time.Second, g.name+"'s offsets to be read from a survivor", func() bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(survivors...))
			if err != nil {
				return false
			}
			defer cl.Close()
			octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
			defer ocancel()
			offs, err = kadm.NewClient(cl).FetchOffsets(octx, g.name)
			return err == nil
		})
		for p, want := range committed[g.name] {
			if got, ok := offs.Lookup(lossTopic, p); !ok || got.At != want {
				t.Errorf("%s: partition %d committed %d, want %d", g.name, p, got.At, want)
			}
		}
	}
	return row
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// lossMember is a member as its coordinator describes it.
type lossMember struct {
	group      string
	epoch      int32 // KIP-848 member epoch; the generation for classic
	partitions []int32
}

func describeLoss(ctx context.Context, t *testing.T, adm *kadm.Client, groups []*lossGroup) map[string]lossMember {
	t.Helper()
	d, err := describeLossErr(ctx, adm, groups, true)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// describeLossErr describes both groups (the KIP-848 one first), by
// member ID; strict, an error unless every member of every group is
// described, the classic group stable.
func describeLossErr(ctx context.Context, adm *kadm.Client, groups []*lossGroup, strict bool) (map[string]lossMember, error) {
	out := map[string]lossMember{}
	cg, err := adm.DescribeConsumerGroups(ctx, groups[0].name)
	if err != nil {
		return nil, err
	}
	d := cg[groups[0].name]
	if d.Err != nil || strict && len(d.Members) != lossMembers {
		return nil, fmt.Errorf("%s: %v, %d members", groups[0].name, d.Err, len(d.Members))
	}
	for _, m := range d.Members {
		lm := lossMember{group: groups[0].name, epoch: m.MemberEpoch}
		for _, ps := range m.Assignment {
			for p := range ps {
				lm.partitions = append(lm.partitions, p)
			}
		}
		out[m.MemberID] = lm
	}
	cl, err := adm.DescribeGroups(ctx, groups[1].name)
	if err != nil {
		return nil, err
	}
	dc := cl[groups[1].name]
	if dc.Err != nil || strict && (len(dc.Members) != lossMembers || dc.State != "Stable") {
		return nil, fmt.Errorf("%s: %v, %d members, %s", groups[1].name, dc.Err, len(dc.Members), dc.State)
	}
	for _, m := range dc.Members {
		lm := lossMember{group: groups[1].name}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range a.Topics {
				lm.partitions = append(lm.partitions, tp.Partitions...)
			}
		}
		out[m.MemberID] = lm
	}
	return out, nil
}

// scrape reads one unlabelled metric from a node's /metrics.
func scrape(addr, name string) (float64, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", addr, name)
}
