package e2e

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// oldTenure is a tenure of the build before store format 6 (one that
// refuses group values with targets: built from 03fb289^).
var oldTenure = flag.String("e2e.old", "", "TestUpgradeBesideOldNode: a `tenure` binary of an older build (before store format 6) to run beside this tree's")

// TestUpgradeBesideOldNode is one step of a rolling upgrade: an HA set of
// two nodes of the build before (-e2e.old) and one of this tree's, on one
// etcd. The new node leads while the old ones are registered, and KIP-848
// members join through it (every join moves targets); then it is killed
// with SIGKILL, and an old node must take the group over and serve it,
// members keeping their epochs: the new node wrote nothing the old one
// refuses. With -e2e.tenure naming a build without the gate (03fb289 up
// to the gate's commit) as the new node, the old node finds a group value
// with targets, refuses it ("value encoding is newer") and the group
// stays offline: the test fails.
func TestUpgradeBesideOldNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	if *oldTenure == "" {
		t.Skip("needs -e2e.old=<tenure binary of a build before store format 6>")
	}
	t.Parallel()
	// Node 0 (old) starts alone and leads; node 1 (new) and node 2 (old)
	// join in that order, each once the one before has joined, so that
	// they queue behind it in that order.
	h := startHASetWith(t, haOpts{etcdMembers: 1, nodes: 1, tenure: *lossTenure, nodeTenure: func(i int) string {
		if i != 1 {
			return *oldTenure
		}
		return ""
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if l := h.leader(ctx); l != 0 {
		t.Fatalf("node %d leads, not the first old node", l)
	}
	for i := 1; i <= 2; i++ {
		h.nodes = append(h.nodes, nil)
		h.start(i)
		testenv.Eventually(t, 15*time.Second, fmt.Sprintf("node %d to join the set", i), func() bool {
			return strings.Contains(h.nodes[i].Output(), "joined the HA set")
		})
	}
	h.nodes[0].Kill()
	h.nodes[0] = nil
	testenv.Eventually(t, 15*time.Second, "the new node to lead", func() bool {
		return strings.Contains(h.nodes[1].Output(), "leading: coordinating every group")
	})
	if l := h.leader(ctx); l != 1 {
		t.Fatalf("node %d leads, not the new node", l)
	}
	cl := newRouter(t, h.addrs()...)
	ms := setupMembers(ctx, t, cl, "up", 4)
	before := make([]int32, len(ms))
	for i, m := range ms {
		before[i] = m.epoch
	}

	// What the new node wrote: format 5, and a group value the old
	// build reads.
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(h.endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if v, err := etcdstore.ReadFormat(ctx, cli); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("store format %d with old nodes registered", v)
	}
	key := etcdstore.DefaultPrefix + "groups/" + group + "/group"
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading %s: %v %v", key, resp, err)
	}
	t.Logf("%s = %s", key, resp.Kvs[0].Value)
	if rec, _, err := etcdstore.Decode(etcdstore.DefaultPrefix, resp.Kvs[0].Key, resp.Kvs[0].Value); err != nil {
		t.Fatal(err)
	} else if gr := rec.(*coordinator.GroupRecord); gr.Targets != nil {
		t.Errorf("the new node wrote targets beside old nodes; the old build refuses them")
	}

	// The new node dies; the old node 2 must serve the group. A fresh
	// router, as TestFailoverKill9's probe: the old one's seeds still
	// name the dead node first.
	h.nodes[1].Kill()
	h.nodes[1] = nil
	probe := newRouter(t, h.addrs()...)
	var last error
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range ms {
		for {
			_, last = m.beat(ctx, probe)
			if last == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the old node does not answer %s's heartbeat: %v", m.id, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for i, m := range ms {
		if m.epoch != before[i] {
			t.Errorf("member %s at epoch %d after the take-over, %d before", m.id, m.epoch, before[i])
		}
	}
	if out := h.nodes[2].Output(); strings.Contains(out, "value encoding is newer") {
		t.Errorf("the old node refused a value:\n%s", out)
	}
}
