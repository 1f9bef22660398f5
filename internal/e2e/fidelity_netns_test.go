package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// Addresses of the veth pair between the test's network namespace and
// the host: the host side, where `tenure serve` listens, and m1's side.
const (
	netnsHost   = "10.222.22.1"
	netnsMember = "10.222.22.2"
	netnsPort   = 43922 // in the range this suite's processes may use
)

// ipCmd runs `ip args...`.
func ipCmd(args ...string) error {
	if b, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, b)
	}
	return nil
}

// startNetns makes a network namespace joined to the host by a veth pair
// (host side netnsHost, namespace side netnsMember), removed when t ends.
// It needs root and `ip netns`; the error says why it cannot.
func startNetns(t *testing.T) (ns, inner string, err error) {
	if os.Geteuid() != 0 {
		return "", "", fmt.Errorf("not root")
	}
	ns = fmt.Sprintf("tenure-fid-%d", os.Getpid())
	outer, inner := fmt.Sprintf("tfo%d", os.Getpid()%100000), fmt.Sprintf("tfi%d", os.Getpid()%100000)
	if err := ipCmd("netns", "add", ns); err != nil {
		return "", "", err
	}
	t.Cleanup(func() { _ = ipCmd("netns", "del", ns) })
	for _, args := range [][]string{
		{"link", "add", outer, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", ns},
		{"addr", "add", netnsHost + "/30", "dev", outer},
		{"link", "set", outer, "up"},
		{"netns", "exec", ns, "ip", "addr", "add", netnsMember + "/30", "dev", inner},
		{"netns", "exec", ns, "ip", "link", "set", inner, "up"},
		{"netns", "exec", ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return "", "", err
		}
	}
	t.Cleanup(func() { _ = ipCmd("link", "del", outer) })
	return ns, inner, nil
}

// runNetnsHostCrash is a host crash for real: `tenure serve` on the host
// and four member processes (internal/memberconsumer), m1 alone in a
// network namespace behind a veth pair. The crash takes m1's link down
// inside the namespace, so that nothing more crosses it in either
// direction, then kills m1 with SIGKILL: the FIN its kernel sends goes
// nowhere, as a host that lost power sends none. It returns the time
// from the link going down until the others work on m1's partitions, and
// the epoch bumps; ok is false, with the reason logged, where the machine
// cannot make namespaces.
func runNetnsHostCrash(t *testing.T) (time.Duration, int64, bool) {
	ns, inner, err := startNetns(t)
	if err != nil {
		t.Logf("host crash in a network namespace: cannot make one here: %v", err)
		return 0, 0, false
	}
	bins := build(t, mod+"cmd/tenure", mod+"internal/memberconsumer")
	addr := fmt.Sprintf("%s:%d", netnsHost, netnsPort)
	srv, err := proctest.StartOn("tenure", addr, bins[0], "serve", "--listen", "{addr}", "--store", "memory", "--http", "",
		"--log-level", "warn", "--consumer-session-timeout", fidSession.String(),
		"--consumer-heartbeat-interval", fidInterval.String(), "--conn-loss-grace", fidGrace.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	createTopicN(t, addr, fidTopic, fidParts)
	args := []string{"-brokers", addr, "-group", fidGroup, "-topic", fidTopic,
		"-session-timeout", fidSession.String(), "-rebalance-timeout", fidRebalance.String(),
		"-suspect-margin", fidMargin.String(), "-request-timeout", fidRequest.String(), "-max-drift", "0.01"}
	o := newOwners()
	// `ip netns exec` execs the program: the process started is m1's.
	ps := []*kgoProc{startKgo(t, "ip", o, "m1", append([]string{"netns", "exec", ns, bins[1]}, args...)...)}
	names := []string{"m1"}
	for i := 1; i < fidMembers; i++ {
		name := fmt.Sprintf("m%d", i+1)
		ps, names = append(ps, startKgo(t, bins[1], o, name, args...)), append(names, name)
	}
	wait(t, o.when(split(fidParts/fidMembers, names...)), time.Minute, "the group to settle", o, ps...)
	time.Sleep(time.Second)

	brokers := []string{addr}
	before := fidEpoch(t, brokers)
	victims := o.holds("m1")
	back := o.when(func(held map[string]map[int32]bool) bool {
		for _, p := range victims {
			other := false
			for name, h := range held {
				if name != "m1" && h[p] {
					other = true
				}
			}
			if !other {
				return false
			}
		}
		return true
	})
	start := time.Now()
	if err := ipCmd("netns", "exec", ns, "ip", "link", "set", inner, "down"); err != nil {
		t.Fatal(err)
	}
	ps[0].signal(syscall.SIGKILL)
	took := wait(t, back, 4*fidSession, "m1's partitions to be taken over", o, ps...).Sub(start)
	time.Sleep(2 * fidInterval)
	return took, fidEpoch(t, brokers) - before, true
}
