package ha_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// electionTimeout is the raft election timeout of the etcd members of
// startCluster.
const electionTimeout = 200 * time.Millisecond

// startCluster starts an etcd cluster of size real etcd server processes
// on loopback ports, stopped when t ends, and returns them and their
// client URLs.
func startCluster(t *testing.T, size int) ([]*proctest.Process, []string) {
	t.Helper()
	bin := proctest.Build(t, "go.etcd.io/etcd/server/v3")[0]
	var names, peers, initial []string
	for i := range size {
		peer, err := proctest.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, fmt.Sprintf("m%d", i))
		peers = append(peers, "http://"+peer)
		initial = append(initial, names[i]+"="+peers[i])
	}
	var members []*proctest.Process
	var endpoints []string
	for i := range size {
		p := proctest.Start(t, names[i], bin,
			"--name", names[i], "--data-dir", filepath.Join(t.TempDir(), names[i]),
			"--listen-client-urls", "http://{addr}", "--advertise-client-urls", "http://{addr}",
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "tenure-ha-test",
			// Raft timings short enough that etcd's smallest lease TTL is
			// 1 s (1.5 election timeouts, rounded up), long enough for three
			// members on a loaded test machine.
			"--heartbeat-interval", "20", "--election-timeout", strconv.Itoa(int(electionTimeout/time.Millisecond)),
			"--unsafe-no-fsync", "--log-level", "error")
		members = append(members, p)
		endpoints = append(endpoints, "http://"+p.Addr)
	}
	waitLeader(t, endpoints)
	return members, endpoints
}

// waitLeader waits until every member at endpoints follows one raft
// leader and the cluster grants a lease. Members that start together on a
// loaded machine can take seconds to elect their first leader, longer than
// the 1 s a node allows a Grant; that is etcd starting, not what the tests
// measure.
func waitLeader(t *testing.T, endpoints []string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	testenv.Eventually(t, 60*time.Second, "the etcd members to elect a leader", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		var leader uint64
		for _, ep := range endpoints {
			st, err := cli.Status(ctx, ep)
			if err != nil || st.Leader == 0 || (leader != 0 && st.Leader != leader) {
				return false
			}
			leader = st.Leader
		}
		l, err := cli.Grant(ctx, 1)
		if err != nil {
			return false
		}
		_, _ = cli.Revoke(ctx, l.ID)
		return true
	})
}

// TestQuorumLoss: with two of three etcd members stopped (SIGSTOP: their
// connections stay open and hang), the leader's term ends once the
// renewals stop being acknowledged: within the window (TTL×0.99 − TTL/10)
// after the last renewal the etcd leader acknowledged, which a leader cut
// off from its quorum does for up to two election timeouts (until
// CheckQuorum deposes it). No node wins a term while the quorum is lost,
// and once the members run again a term is won again, with a higher
// revision.
func TestQuorumLoss(t *testing.T) {
	t.Parallel()
	members, endpoints := startCluster(t, 3)
	prefix := uniquePrefix(t)
	rec := newRecorder(t)
	for i := range 3 {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		rec.follow(i, join(t, cli, prefix, addr(i)))
	}
	first := rec.next(15 * time.Second)

	for _, m := range members[1:] {
		if err := m.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	// A signal stops a process only once each of its threads handles it:
	// on a loaded machine, tens of milliseconds after kill returns.
	for _, m := range members[1:] {
		waitStopped(t, m.Pid())
	}
	lost := time.Now()
	limit := ttl - ttl/100 - ttl/10 + 2*electionTimeout
	waitDone(t, first.term, limit+500*time.Millisecond, "the leader's term after the quorum was lost")
	old := rec.snapshot(first)
	t.Logf("the leader's term was valid %v after the quorum was lost (at most %v), and done %v after",
		old.last.Sub(lost).Round(time.Millisecond), limit, time.Since(lost).Round(time.Millisecond))
	if old.last.Sub(lost) >= limit {
		t.Errorf("the term was valid %v after the quorum was lost, more than %v", old.last.Sub(lost), limit)
	}
	rec.none(3*ttl, "while the quorum is lost")

	back := time.Now()
	for _, m := range members[1:] {
		if err := m.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	again := rec.next(15 * time.Second)
	t.Logf("node %d won %v after the members ran again", again.node, time.Since(back).Round(time.Millisecond))
	if again.term.Revision() <= first.term.Revision() {
		t.Fatalf("revision %d after %d", again.term.Revision(), first.term.Revision())
	}
	rec.checkSafety()
}

// waitStopped waits until every thread of process pid is stopped, as
// /proc shows it.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "the etcd member to stop", func() bool {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(stats) == 0 {
			t.Fatalf("threads of %d: %v", pid, err)
		}
		for _, f := range stats {
			b, err := os.ReadFile(f)
			if err != nil {
				return false // a thread that just exited
			}
			// "pid (comm) state ...", and comm may hold anything.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				return false
			}
		}
		return true
	})
}
