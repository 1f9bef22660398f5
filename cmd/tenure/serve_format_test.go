package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestFormatGate runs a node of an HA set beside the registration of a
// node of the build before (no "format" in its value): the node must keep
// the store at format 5 and write the KIP-848 group's epoch bumps without
// targets in the group value, which that build refuses (decoded here from
// etcd). Once the old node's registration is gone the node raises the
// store to format 6 and the next bump carries its targets. An old node
// that registers after that is reported as unable to open the store.
func TestFormatGate(t *testing.T) {
	etcd := testenv.EtcdForTest(t)
	prefix := testenv.UniquePrefix(t)
	ctx := testenv.Context(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	oldLease := registerOldNode(t, cli, prefix, 7)

	addr, logs, stopFirst := serveUntil(t, "--etcd-endpoints", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", prefix,
		"--data-dir", t.TempDir()+"/unused", "--election-ttl", "1s", "--http", "")
	stop := sync.OnceValue(stopFirst)
	defer stop()
	pollUntil(t, 20*time.Second, "the node leads", func() string {
		if strings.Contains(logs.String(), "leading: coordinating every group") {
			return ""
		}
		return "not yet"
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 8, -1, nil, "work"); err != nil {
		t.Fatal(err)
	}
	groupValue := func() *coordinator.GroupRecord {
		t.Helper()
		key := prefix + "groups/g/group"
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading %s: %v %v", key, resp, err)
		}
		rec, ok, err := etcdstore.Decode(prefix, resp.Kvs[0].Key, resp.Kvs[0].Value)
		if err != nil || !ok {
			t.Fatalf("decoding %s = %s: %v", key, resp.Kvs[0].Value, err)
		}
		t.Logf("%s = %s", key, resp.Kvs[0].Value)
		return rec.(*coordinator.GroupRecord)
	}

	// Every join bumps the epoch and moves targets: with an old node
	// registered, the group value must not carry them.
	join(t, ctx, cl, "m1")
	join(t, ctx, cl, "m2")
	if gr := groupValue(); gr.Targets != nil || gr.Epoch != 2 {
		t.Fatalf("with an old node registered the group value carries targets or is not at epoch 2: %+v", gr)
	}
	if v, _ := etcdstore.ReadFormat(ctx, cli, etcdstore.Prefix(prefix)); v != 5 {
		t.Fatalf("format %d with an old node registered", v)
	}
	if !strings.Contains(logs.String(), "a node of the HA set reads no newer format") {
		t.Errorf("the old node was not reported:\n%s", logs.String())
	}

	// The old node leaves: the set moves to format 6.
	if _, err := cli.Revoke(ctx, oldLease); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 15*time.Second, "the store is raised", func() string {
		if strings.Contains(logs.String(), "group values carry their epoch bumps' targets") {
			return ""
		}
		return "not yet"
	})
	if v, _ := etcdstore.ReadFormat(ctx, cli, etcdstore.Prefix(prefix)); v != 6 {
		t.Fatalf("format %d once the old node left", v)
	}
	join(t, ctx, cl, "m3")
	if gr := groupValue(); gr.Targets == nil || gr.Epoch != 3 {
		t.Fatalf("once every node reads format 6 the group value carries no targets or is not at epoch 3: %+v", gr)
	}

	// An old node registering now is told to be unable to open the store.
	registerOldNode(t, cli, prefix, 8)
	pollUntil(t, 15*time.Second, "the late old node is reported", func() string {
		if strings.Contains(logs.String(), "a node of the HA set is older than the store") {
			return ""
		}
		return "not yet"
	})

	// The raise is one-way: the node restarted beside the late old node
	// finds the store at 6 and writes targets from its first term on.
	cl.Close()
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	addr, logs, stopSecond := serveUntil(t, "--etcd-endpoints", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", prefix,
		"--data-dir", t.TempDir()+"/unused", "--election-ttl", "1s", "--http", "")
	defer stopSecond()
	pollUntil(t, 20*time.Second, "the restarted node leads", func() string {
		if strings.Contains(logs.String(), "leading: coordinating every group") {
			return ""
		}
		return "not yet"
	})
	if l := logs.String(); strings.Index(l, "group values carry their epoch bumps' targets") > strings.Index(l, "leading: coordinating every group") {
		t.Errorf("the restarted node led before it knew the store's format:\n%s", l)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	join(t, ctx, cl, "m4")
	if gr := groupValue(); gr.Targets == nil || gr.Epoch != 4 {
		t.Fatalf("the restarted node wrote no targets or not epoch 4: %+v", gr)
	}
}

// registerOldNode registers node id as a tenure from before
// NodeInfo.Format does, under a lease of its own, which it returns.
func registerOldNode(t *testing.T, cli *clientv3.Client, prefix string, id int) clientv3.LeaseID {
	t.Helper()
	ctx := testenv.Context(t)
	l, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(map[string]any{"id": id, "addr": fmt.Sprintf("127.0.0.1:%d", 41900+id)})
	if _, err := cli.Put(ctx, fmt.Sprintf("%smeta/ha/nodes/%d", prefix, id), string(v), clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	return l.ID
}

// join sends member's first KIP-848 heartbeat to group g (topic work),
// which bumps the group's epoch.
func join(t *testing.T, ctx context.Context, cl *kgo.Client, member string) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = "g"
	req.MemberID = fmt.Sprintf("%-22s", member)
	req.MemberEpoch = 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{"work"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for attempt := 0; ; attempt++ {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return
		}
		if attempt == 20 {
			t.Fatalf("%s's heartbeat: %v", member, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFormatGateReports: settle logs each node behind once per state of
// it and of the store (a warning while the store waits for it, an error
// once the store is past it), opens the gate at format 6 only, and sets
// the gauges.
func TestFormatGateReports(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	g, err := newFormatGate(nil, nil, "/p/", zap.New(core), nil)
	if err != nil {
		t.Fatal(err)
	}
	old := ha.NodeInfo{ID: 7, Addr: "127.0.0.1:1"}
	count := func(level zapcore.Level) int {
		return logs.FilterLevelExact(level).FilterMessageSnippet("store format").Len()
	}
	g.settle(0, []ha.NodeInfo{old}) // the store not opened yet
	g.settle(5, []ha.NodeInfo{old})
	g.settle(5, []ha.NodeInfo{old})
	if w, e := count(zapcore.WarnLevel), count(zapcore.ErrorLevel); w != 2 || e != 0 || g.groupTargets() {
		t.Fatalf("at format 5 with an old node: %d warnings, %d errors, open %v", w, e, g.groupTargets())
	}
	if b, o := gaugeValue(g.m.Behind), gaugeValue(g.m.Older); b != 1 || o != 0 {
		t.Fatalf("at format 5 with a node that reads 5: behind %v, older than the store %v; want 1 and 0", b, o)
	}
	g.settle(5, nil)
	if g.groupTargets() || gaugeValue(g.m.Behind) != 0 || gaugeValue(g.m.Format) != 5 {
		t.Fatalf("at format 5 alone: open %v, gauges %v %v", g.groupTargets(), gaugeValue(g.m.Behind), gaugeValue(g.m.Format))
	}
	g.settle(6, nil)
	if !g.groupTargets() || logs.FilterMessageSnippet("carry their epoch bumps' targets").Len() != 1 {
		t.Fatal("format 6 did not open the gate, or not once")
	}
	g.settle(6, []ha.NodeInfo{old})
	g.settle(6, []ha.NodeInfo{old})
	if e := count(zapcore.ErrorLevel); e != 1 || !g.groupTargets() || gaugeValue(g.m.Behind) != 1 || gaugeValue(g.m.Older) != 1 {
		t.Fatalf("an old node after the raise: %d errors, open %v, behind %v, older than the store %v", e, g.groupTargets(),
			gaugeValue(g.m.Behind), gaugeValue(g.m.Older))
	}
	// A node that advertises 6 is not behind 6 (FormatReaders would not
	// list it); one that advertises 5 explicitly is told as the old one.
	g.settle(6, []ha.NodeInfo{{ID: 8, Format: 5}})
	if e := count(zapcore.ErrorLevel); e != 2 || gaugeValue(g.m.Older) != 1 {
		t.Fatalf("a node at 5 after the raise: %d errors, older than the store %v", e, gaugeValue(g.m.Older))
	}
	// Gone: the gauges say so at the next check.
	g.settle(6, nil)
	if b, o := gaugeValue(g.m.Behind), gaugeValue(g.m.Older); b != 0 || o != 0 {
		t.Fatalf("every node reads 6: behind %v, older than the store %v", b, o)
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}
