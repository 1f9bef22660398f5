//go:build unix

package interop

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/internal/proctest"
)

var (
	enabled     = flag.Bool("interop", os.Getenv("TENURE_INTEROP") == "1", "run the fail-over matrix (also TENURE_INTEROP=1)")
	tenureBin   = flag.String("interop.tenure", "", "tenure binary under test (default: built from this tree)")
	onlyClients = flag.String("interop.clients", "", "comma-separated clients to run (default: all)")
	onlyTopos   = flag.String("interop.topologies", "", "comma-separated topologies to run: one-leader, sharded (default: both)")
	onlyFaults  = flag.String("interop.faults", "", "comma-separated faults to run: kill9, sigstop, isolate, sigterm (default: all)")
	members     = flag.Int("interop.members", 3, "consumers of each run")
	observe     = flag.Duration("interop.observe", 20*time.Second, "how long each run watches the group after the fault")
	tableOut    = flag.String("interop.out", "", "also write the table to this file")
	logDir      = flag.String("interop.logs", "", "keep every run's node and driver logs under this directory (default: a temporary one)")
	debug       = flag.Bool("interop.debug", false, "log the nodes and the kgo drivers at debug level (to trace a run)")
	expect      = flag.Bool("interop.expect", true, "hold each run to the expected results (expected.go); off: only measure and print the table")
)

const (
	ttl        = 2 * time.Second
	session    = 10 * time.Second
	heartbeat  = time.Second
	partitions = 64
	topic      = "interop"
	group      = "interop-group"
)

var topologies = []struct {
	name   string
	shards int
}{{"one-leader", 1}, {"sharded", 6}}

func pick(list, name string) bool {
	return list == "" || slices.Contains(strings.Split(list, ","), name)
}

// TestFailoverMatrix runs every client × topology × fault: a group of
// stock consumers settles on 64 partitions, then the group's coordinator
// is lost for good. See docs/FAILOVER.md.
func TestFailoverMatrix(t *testing.T) {
	if !*enabled {
		t.Skip("the fail-over matrix runs with -interop or TENURE_INTEROP=1 (make interop)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the matrix signals processes and reads Linux's process table")
	}
	bins := proctest.Build(t, "github.com/tenure-dev/tenure/internal/interop/drivers/kgo", "go.etcd.io/etcd/server/v3")
	tenure := *tenureBin
	if tenure == "" {
		tenure = proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure")[0]
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tl := tools{kgo: bins[0], dir: filepath.Join(wd, "drivers")}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		// Debian's python3: the clients are Debian packages in its
		// dist-packages, which another python3 on PATH may not see.
		tl.python = "/usr/bin/python3"
	} else if p, err := exec.LookPath("python3"); err == nil {
		tl.python = p
	}
	if p, err := exec.LookPath("node"); err == nil {
		tl.node = p
	}
	logs := *logDir
	if logs == "" {
		logs = t.TempDir()
	}
	etcd := startEtcd(t, bins[1])
	var rows []row
	t.Cleanup(func() {
		table := renderTable(rows)
		t.Logf("fail-over matrix (tenure %s):\n%s", tenure, table)
		fmt.Println(table)
		if *tableOut != "" {
			if err := os.WriteFile(*tableOut, []byte(table), 0o644); err != nil {
				t.Error(err)
			}
		}
	})
	for _, cl := range clients(tl) {
		if !pick(*onlyClients, cl.name) {
			continue
		}
		for _, topo := range topologies {
			if !pick(*onlyTopos, topo.name) {
				continue
			}
			for _, f := range allFaults {
				if !pick(*onlyFaults, string(f)) {
					continue
				}
				name := cl.name + "/" + topo.name + "/" + string(f)
				t.Run(name, func(t *testing.T) {
					if why := cl.missing(); why != "" {
						if os.Getenv("TENURE_REQUIRE_TOOLS") == "1" {
							t.Fatalf("%s cannot run, and TENURE_REQUIRE_TOOLS=1: %s", cl.name, why)
						}
						t.Skipf("%s cannot run: %s", cl.name, why)
					}
					dir := runDir(logs, strings.ReplaceAll(name, "/", "-"))
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					r := runOne(t, cl, setConfig{tenure: tenure, debug: *debug, etcd: etcd, prefix: "/interop/" + strings.ReplaceAll(name, "/", "-") + "/",
						shards: topo.shards, ttl: ttl, session: session, heartbeat: heartbeat, topic: topic, parts: partitions, logDir: dir}, f)
					r.client, r.topology, r.fault = cl.name, topo.name, f
					rows = append(rows, r)
					t.Logf("%s: %s (logs in %s)", name, r.summary(), dir)
					if *expect {
						if err := judge(name, r); err != nil {
							t.Error(err)
						}
					}
				})
			}
		}
	}
}

// row is one run's figures.
type row struct {
	client, topology string
	fault            fault
	setupErr         string
	served           time.Duration // from the fault until a survivor serves every member; -1 never
	expelled         int
	lost, revoked    int
	unowned          time.Duration // partition-time without an owner, in the callbacks
	double           time.Duration // ... with two owners
	coordUnowned     time.Duration // in the coordinator's view, once served
	coordDouble      time.Duration
	offsetsKept      bool
}

// failed names the checks the run failed.
func (r row) failed() []string {
	if r.setupErr != "" {
		return []string{"setup"}
	}
	var out []string
	if r.served < 0 || r.served > ttl+2*time.Second {
		out = append(out, "served")
	}
	if r.expelled != 0 {
		out = append(out, "expelled")
	}
	if r.lost > 0 {
		out = append(out, "lost")
	}
	if r.revoked > 0 {
		out = append(out, "revoked")
	}
	if r.unowned > 0 || r.coordUnowned > 0 {
		out = append(out, "unowned")
	}
	if r.double > 0 || r.coordDouble > 0 {
		out = append(out, "double")
	}
	if !r.offsetsKept {
		out = append(out, "offsets")
	}
	return out
}

func (r row) summary() string {
	if f := r.failed(); len(f) > 0 {
		return fmt.Sprintf("FAIL %v: %+v", f, r)
	}
	return "pass"
}

func renderTable(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| client | topology | fault | served after | expelled | lost | revoked | unowned p·s (clients/coord) | double p·s | offsets | result |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		served := "never"
		if r.served >= 0 {
			served = fmt.Sprintf("%.1f s", r.served.Seconds())
		}
		res := "pass"
		if f := r.failed(); len(f) > 0 {
			res = "FAIL: " + strings.Join(f, ",")
		}
		if r.setupErr != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | | | | | | | | setup: %s |\n", r.client, r.topology, r.fault, r.setupErr)
			continue
		}
		kept := "kept"
		if !r.offsetsKept {
			kept = "LOST"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %d | %.1f/%.1f | %.1f | %s | %s |\n", r.client, r.topology, r.fault, served,
			r.expelled, r.lost, r.revoked, r.unowned.Seconds(), r.coordUnowned.Seconds(), (r.double + r.coordDouble).Seconds(), kept, res)
	}
	return b.String()
}

// runOne runs one cell of the matrix.
func runOne(t *testing.T, cl client, cfg setConfig, f fault) (r row) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r.served = -1
	s := startSet(t, cfg)
	coord, err := s.coordinator(ctx, group, 30*time.Second)
	if err != nil {
		r.setupErr = err.Error()
		return r
	}
	offsets, err := commitOffsets(ctx, coord)
	if err != nil {
		r.setupErr = "commit offsets: " + err.Error()
		return r
	}
	var cs []*consumer
	for i := range *members {
		cs = append(cs, startConsumer(t, fmt.Sprintf("%s-%d", cl.name, i), cfg.logDir, cl.argv(s.seeds(), group, topic)))
	}
	events := func() map[string][]Event {
		m := map[string][]Event{}
		for _, c := range cs {
			m[c.name] = c.read()
		}
		return m
	}
	settleBy := time.Now().Add(90 * time.Second)
	for !Settled(events(), partitions, time.Now(), 3*time.Second) {
		if time.Now().After(settleBy) {
			r.setupErr = "the group does not settle in 90 s"
			return r
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The group may have moved while it settled (a sharded set spreads
	// its shards as nodes join).
	if coord, err = s.coordinator(ctx, group, 10*time.Second); err != nil {
		r.setupErr = err.Error()
		return r
	}
	stable := time.Now()
	if err := s.inflict(coord, f); err != nil {
		r.setupErr = "fault: " + err.Error()
		return r
	}
	faultAt := time.Now()
	t.Logf("%s %s at %s", f, coord.name, faultAt.Format(time.RFC3339Nano))
	var survivors []*node
	for _, n := range s.nodes {
		if n != coord {
			survivors = append(survivors, n)
		}
	}
	var (
		serving  *node
		lastPoll time.Time
		minMem   = *members
	)
	for time.Now().Before(faultAt.Add(max(*observe, cl.observe))) {
		now := time.Now()
		view, n, ok := describe(ctx, survivors, cl.protocol)
		if ok && view.members == *members && r.served < 0 {
			r.served = now.Sub(faultAt)
		}
		if ok {
			serving = n
			if r.served >= 0 {
				minMem = min(minMem, view.members)
				if !lastPoll.IsZero() {
					d := now.Sub(lastPoll)
					r.coordUnowned += time.Duration(view.unowned) * d
					r.coordDouble += time.Duration(view.double) * d
				}
				lastPoll = now
			}
		} else {
			lastPoll = time.Time{}
		}
		time.Sleep(250 * time.Millisecond)
	}
	end := time.Now()
	own := Analyze(events(), partitions, stable, end)
	r.lost, r.revoked, r.unowned, r.double = own.Lost, own.Revoked, own.Unowned, own.Double
	if serving == nil {
		serving = survivors[0]
	}
	n, err := expelled(ctx, survivors, faultAt, end)
	if err != nil {
		t.Logf("generation log: %v", err)
		n = -1 // unknown: fails the check
	}
	r.expelled = n
	if n >= 0 {
		r.expelled = max(n, *members-minMem)
	}
	r.offsetsKept = offsetsKept(ctx, serving, offsets)
	for _, c := range cs {
		c.stop(10 * time.Second)
	}
	return r
}

// commitOffsets commits an offset for every partition before any member
// joins (an empty group takes commits without a generation), through the
// group's coordinator.
func commitOffsets(ctx context.Context, n *node) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.adv))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	want := map[int32]int64{}
	var os kadm.Offsets
	for p := range int32(partitions) {
		want[p] = 1000 + int64(p)
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: want[p], LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, os)
	if err != nil {
		return nil, err
	}
	return want, resp.Error()
}

// offsetsKept reports whether the group's committed offsets are still
// those committed before the run.
func offsetsKept(ctx context.Context, n *node, want map[int32]int64) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.adv))
	if err != nil {
		return false
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(cctx, group)
	if err != nil || resp.Error() != nil {
		return false
	}
	got := 0
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At == want[o.Partition] {
			got++
		}
	})
	return got == partitions
}

// groupView is the coordinator's view of the group.
type groupView struct {
	members         int
	unowned, double int // partitions
}

// describe asks the survivors for the group's coordinator and asks it
// for the group; ok if a survivor coordinates and answers.
func describe(ctx context.Context, survivors []*node, protocol string) (groupView, *node, bool) {
	for _, n := range survivors {
		resp, err := findCoordinator(ctx, n, group)
		if err != nil {
			continue
		}
		host, port, code := resp.Host, resp.Port, resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			host, port, code = resp.Coordinators[0].Host, resp.Coordinators[0].Port, resp.Coordinators[0].ErrorCode
		}
		if code != 0 {
			continue
		}
		var c *node
		for _, s := range survivors {
			if s.adv == fmt.Sprintf("%s:%d", host, port) {
				c = s
			}
		}
		if c == nil {
			return groupView{}, nil, false
		}
		v, err := describeAt(ctx, c, protocol)
		return v, c, err == nil
	}
	return groupView{}, nil, false
}

func describeAt(ctx context.Context, n *node, protocol string) (groupView, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.adv), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return groupView{}, err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	owners := map[int32]int{}
	var v groupView
	if protocol == "consumer" {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(cctx, cl.SeedBrokers()[0])
		if err != nil {
			return v, err
		}
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return v, errors.New("describe refused")
		}
		for _, m := range resp.Groups[0].Members {
			v.members++
			for _, tp := range m.Assignment.TopicPartitions {
				for _, p := range tp.Partitions {
					owners[p]++
				}
			}
		}
	} else {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(cctx, cl.SeedBrokers()[0])
		if err != nil {
			return v, err
		}
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return v, errors.New("describe refused")
		}
		if resp.Groups[0].State != "Stable" {
			// Between generations the assignment is the next one's.
			return v, errors.New("not stable")
		}
		for _, m := range resp.Groups[0].Members {
			v.members++
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(m.MemberAssignment) != nil {
				continue
			}
			for _, tp := range a.Topics {
				for _, p := range tp.Partitions {
					owners[p]++
				}
			}
		}
	}
	for p := range int32(partitions) {
		switch owners[p] {
		case 0:
			v.unowned++
		case 1:
		default:
			v.double++
		}
	}
	return v, nil
}

// expelled counts the members the generation log says left the group
// between from and to: none of the consumers leaves on its own then.
func expelled(ctx context.Context, survivors []*node, from, to time.Time) (int, error) {
	var errs []error
	for _, n := range survivors {
		c := adminapi.Client{Base: n.http}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		entries, err := c.Log(cctx, group, 0, 200)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		left := map[string]bool{}
		for _, e := range entries {
			if e.Time.Before(from) || !e.Time.Before(to) {
				continue
			}
			for _, m := range e.Left {
				left[m] = true
			}
		}
		return len(left), nil
	}
	return 0, errors.Join(errs...)
}

// runDir is the log directory of a run named name under logs: a run
// repeated (-count) gets a directory of its own, so that the logs of the
// run that failed are still there when the series ends.
func runDir(logs, name string) string {
	dir := filepath.Join(logs, name)
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return dir
		}
		dir = filepath.Join(logs, fmt.Sprintf("%s-%d", name, i))
	}
}

func nodeLogLevel(debug bool) string {
	if debug {
		return "debug"
	}
	return "info"
}

func kgoLogLevel() string {
	if *debug {
		return "debug"
	}
	return "warn"
}
