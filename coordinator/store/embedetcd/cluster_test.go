package embedetcd_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// testCluster is a cluster of embedded members in this process, each with
// its own data dir, on loopback peer ports that were free.
type testCluster struct {
	t       *testing.T
	names   []string
	dirs    []string
	spec    string // the initial cluster
	members []*embedetcd.Etcd
}

// startCluster starts n members together (each waits for a quorum) and
// stops them when t ends. A peer port taken between the choice and the
// start makes it try again on others.
func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	// etcd's peer servers keep a connection up to their read timeout (5
	// s) after they close, when a response raced its connection's next
	// read (etcd's timeoutConn sets its own deadline on every read); wait
	// for them, so TestMain's leak check sees only real leaks.
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for httpConnsLeft() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	var lastErr error
	for range 3 {
		c := &testCluster{t: t, members: make([]*embedetcd.Etcd, n)}
		var entries []string
		for i := range n {
			addr, err := proctest.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			c.names = append(c.names, fmt.Sprint("n", i+1))
			c.dirs = append(c.dirs, filepath.Join(t.TempDir(), "data"))
			entries = append(entries, c.names[i]+"=http://"+addr)
		}
		c.spec = strings.Join(entries, ",")
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { c.members[i], errs[i] = c.start(i) })
		}
		wg.Wait()
		t.Cleanup(c.closeAll)
		if lastErr = errors.Join(errs...); lastErr == nil {
			return c
		}
		c.closeAll()
		if !errors.Is(lastErr, syscall.EADDRINUSE) {
			break
		}
	}
	t.Fatalf("starting a cluster of %d: %v", n, lastErr)
	return nil
}

// httpConnsLeft reports whether an HTTP connection, client or server
// side, is up in this process: only etcd's peers use HTTP here.
func httpConnsLeft() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Contains(string(buf), "net/http.(*persistConn)") || strings.Contains(string(buf), "net/http.(*conn).serve")
}

// start starts member i on its data dir with the cluster's options and
// more.
func (c *testCluster) start(i int, more ...embedetcd.Opt) (*embedetcd.Etcd, error) {
	opts := append([]embedetcd.Opt{embedetcd.MemberName(c.names[i]), embedetcd.InitialCluster(c.spec)}, more...)
	ctx, cancel := context.WithTimeout(testenv.Context(c.t), 30*time.Second)
	defer cancel()
	return embedetcd.Start(ctx, c.dirs[i], testLogger(c.t).With(zap.String("test_member", c.names[i])), opts...)
}

// restart starts member i again on its data dir.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	e, err := c.start(i)
	if err != nil {
		c.t.Fatalf("restarting %s: %v", c.names[i], err)
	}
	c.members[i] = e
}

// stop stops member i.
func (c *testCluster) stop(i int) {
	c.t.Helper()
	if err := c.members[i].Close(); err != nil {
		c.t.Errorf("closing %s: %v", c.names[i], err)
	}
	c.members[i] = nil
}

func (c *testCluster) closeAll() {
	for i, e := range c.members {
		if e != nil {
			e.Close()
			c.members[i] = nil
		}
	}
}

// only returns a client of member i's server alone, closed when the test
// ends: what it reads, that member holds.
func (c *testCluster) only(i int) *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.members[i].Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// put writes key through cli, trying again for a while: right after a
// member stops, the cluster may be electing a leader.
func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	pollUntil(t, 20*time.Second, "put "+key, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, key, value); err != nil {
			return err.Error()
		}
		return ""
	})
}

// holds waits until member i's own data has key at value.
func (c *testCluster) holds(i int, key, value string) {
	c.t.Helper()
	cli := c.only(i)
	pollUntil(c.t, 20*time.Second, c.names[i]+" holds "+key, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
		switch {
		case err != nil:
			return err.Error()
		case len(resp.Kvs) == 0:
			return "no " + key
		case string(resp.Kvs[0].Value) != value:
			return fmt.Sprintf("%s=%q", key, resp.Kvs[0].Value)
		}
		return ""
	})
}

// pollUntil calls check until it returns "" or d has passed, and fails t
// with check's last answer then.
func pollUntil(t *testing.T, d time.Duration, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, d, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEmbeddedCluster runs three embedded members in this process as one
// cluster: writes through one are read through another, two keep serving
// while the third is down, the third catches up when it returns on its
// data dir, one alone refuses writes, and a client whose own member fails
// goes on through the others.
func TestEmbeddedCluster(t *testing.T) {
	c := startCluster(t, 3)

	resp, err := c.members[0].Client().MemberList(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 3 {
		t.Fatalf("%d members, want 3: %v", len(resp.Members), resp.Members)
	}
	for i, e := range c.members {
		pollUntil(t, 10*time.Second, c.names[i]+"'s client knows every member", func() string {
			if eps := e.Client().Endpoints(); len(eps) != 3 {
				return fmt.Sprintf("endpoints %q", eps)
			}
			return ""
		})
	}

	put(t, c.members[0].Client(), "k1", "v1")
	c.holds(1, "k1", "v1")
	c.holds(2, "k1", "v1")

	// n3's server fails while its process goes on: its client writes
	// through n1 and n2.
	c.members[2].StopServer()
	put(t, c.members[2].Client(), "k2", "v2")
	c.stop(2)
	put(t, c.members[1].Client(), "k3", "v3")

	c.restart(2)
	c.holds(2, "k2", "v2")
	c.holds(2, "k3", "v3")

	c.stop(1)
	c.stop(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = c.members[0].Client().Put(ctx, "k4", "v4")
	cancel()
	if err == nil {
		t.Fatal("a write succeeded with one member of three")
	}

	c.restart(1)
	put(t, c.members[0].Client(), "k5", "v5")
	c.holds(1, "k5", "v5")
}

// TestEmbeddedClusterMistakes gives a cluster the mistakes an operator
// makes, and replaces a member whose data is lost.
func TestEmbeddedClusterMistakes(t *testing.T) {
	c := startCluster(t, 3)
	put(t, c.members[0].Client(), "k1", "v1")
	id3 := memberID(t, c.members[0].Client(), "n3")
	c.stop(2)

	// n3 on another token: its peers serve another cluster.
	c.dirs[2] = filepath.Join(t.TempDir(), "other-token")
	_, err := c.start(2, embedetcd.InitialClusterToken("another"))
	if !errors.Is(err, embedetcd.ErrClusterMismatch) {
		t.Fatalf("another token: got %v, want ErrClusterMismatch", err)
	}
	t.Log(err)

	// n3 on an empty data dir: it was bootstrapped already.
	c.dirs[2] = filepath.Join(t.TempDir(), "lost")
	_, err = c.start(2)
	if err == nil || !strings.Contains(err.Error(), "is already in the running etcd cluster") {
		t.Fatalf("a lost data dir: got %v", err)
	}
	t.Log(err)

	// Replace it: remove, add, join the running cluster on the same
	// directory.
	cli := c.members[0].Client()
	if _, err := cli.MemberRemove(testenv.Context(t), id3); err != nil {
		t.Fatal(err)
	}
	peerURL := strings.TrimPrefix(strings.Split(c.spec, ",")[2], "n3=")
	// etcd refuses a member change until the remaining members have been
	// healthy together for a moment ("unhealthy cluster"): retry.
	testenv.Eventually(t, 15*time.Second, "the replacement member to be added", func() bool {
		_, err := cli.MemberAdd(testenv.Context(t), []string{peerURL})
		return err == nil
	})
	e, err := c.start(2, embedetcd.InitialClusterState("existing")) // on what the failed start left

	if err != nil {
		t.Fatalf("joining as a replacement: %v", err)
	}
	c.members[2] = e
	c.holds(2, "k1", "v1")

	// Data dirs that belong elsewhere, refused before any wait.
	n1Dir := c.dirs[0]
	c.closeAll()
	for _, tc := range []struct {
		name string
		dir  string
		opts []embedetcd.Opt
		want string
	}{
		{"another member's", n1Dir, []embedetcd.Opt{embedetcd.MemberName("n2"), embedetcd.InitialCluster(c.spec)}, `holds etcd member "n1", not "n2"`},
		{"a cluster member's, alone", n1Dir, []embedetcd.Opt{embedetcd.MemberName("n1")}, "of an etcd cluster of 3"},
		{"a single member's, in a cluster", singleDataDir(t), []embedetcd.Opt{embedetcd.MemberName("tenure"), embedetcd.InitialCluster("tenure=http://127.0.0.1:1,n2=http://127.0.0.1:2,n3=http://127.0.0.1:3")}, "holds an etcd cluster of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(testenv.Context(t), 10*time.Second)
			defer cancel()
			e, err := embedetcd.Start(ctx, tc.dir, testLogger(t), tc.opts...)
			if err == nil {
				e.Close()
			}
			if !errors.Is(err, embedetcd.ErrForeignDataDir) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrForeignDataDir saying %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// singleDataDir returns the data dir of a member that ran on its own.
func singleDataDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "single")
	e := startEmbedded(t, dir, testLogger(t))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func memberID(t *testing.T, cli *clientv3.Client, name string) uint64 {
	t.Helper()
	resp, err := cli.MemberList(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if m.Name == name {
			return m.ID
		}
	}
	t.Fatalf("no member %s in %v", name, resp.Members)
	return 0
}
