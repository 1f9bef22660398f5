package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// haNode is a `tenure serve` of an HA set, run by serveUntil.
type haNode struct {
	addr string // Kafka
	http string // host:port of --http, "" without
	logs *syncBuffer
	stop func() int
}

func (n *haNode) leads() bool {
	return strings.Contains(n.logs.String(), "leading: coordinating every group")
}

// TestDrainThroughFollower points the admin API and `tenure groups drain`
// at a node of an HA set that does not lead. While the leader has no
// --http listener the follower answers 421 naming the leader; once a node
// with one leads, the follower forwards a drain of a KIP-848 group of
// three stock kgo consumers, and its undo, to it, and the drain takes
// effect.
func TestDrainThroughFollower(t *testing.T) {
	etcd := testenv.EtcdForTest(t)
	prefix := testenv.UniquePrefix(t)
	start := func(withHTTP bool) *haNode {
		args := []string{"--etcd-endpoints", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", prefix,
			"--data-dir", t.TempDir() + "/unused", "--election-ttl", "1s",
			"--consumer-heartbeat-interval", "200ms", "--consumer-session-timeout", "6s"}
		if withHTTP {
			args = append(args, "--http", "127.0.0.1:0")
		} else {
			args = append(args, "--http", "") // not even the default
		}
		addr, logs, stop := serveUntil(t, args...)
		n := &haNode{addr: addr, logs: logs, stop: sync.OnceValue(stop)}
		if withHTTP {
			pollUntil(t, 10*time.Second, "the node serves http", func() string {
				m := metricsRe.FindStringSubmatch(logs.String())
				if m == nil {
					return "not yet"
				}
				n.http = strings.TrimSuffix(strings.TrimPrefix(m[1], "http://"), "/metrics")
				return ""
			})
		}
		t.Cleanup(func() { n.stop() })
		return n
	}
	// The consumers poll until the test ends, and each request has a
	// deadline of its own (call): one deadline for every step would end
	// the test's waits (up to 70 s of them) before their own bounds.
	ctx := t.Context()
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 10*time.Second) }

	// The first node leads, and has no HTTP listener: a follower cannot
	// forward to it. (The group need not exist: only the leader knows.)
	bare := start(false)
	pollUntil(t, 10*time.Second, "the first node to lead", func() string {
		if !bare.leads() {
			return "it does not lead"
		}
		return ""
	})
	nodes := []*haNode{start(true), start(true)}
	want := fmt.Sprintf("node 0 at %s does, but serves no admin API (it runs without --http)", bare.addr)
	pollUntil(t, 5*time.Second, "the follower to refuse, naming the leader", func() string {
		cctx, cancel := call()
		defer cancel()
		err := (&adminapi.Client{Base: nodes[0].http}).Drain(cctx, "g", "m", false)
		var apiErr *adminapi.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusMisdirectedRequest || apiErr.Code != "not_coordinator" ||
			apiErr.Leader != bare.addr || !strings.Contains(err.Error(), want) {
			return fmt.Sprintf("%v, want a 421 not_coordinator with %q", err, want)
		}
		return ""
	})

	// A node with --http takes over; the other forwards. The consumers
	// join after the fail-over: stock kgo KIP-848 consumers keep
	// heartbeating a coordinator that stopped instead of finding the new
	// one.
	if code := bare.stop(); code != 0 {
		t.Fatalf("the leader exited with %d", code)
	}
	var follower *haNode
	pollUntil(t, 10*time.Second, "a node with --http to lead", func() string {
		for i, n := range nodes {
			if n.leads() {
				follower = nodes[1-i]
				return ""
			}
		}
		return "none leads"
	})

	seeds := kgo.SeedBrokers(nodes[0].addr, nodes[1].addr)
	acl, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acl.Close)
	adm := kadm.NewClient(acl)
	cctx, cancel := call()
	_, err = adm.CreateTopics(cctx, 6, 1, nil, "jobs")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cl, err := kgo.NewClient(seeds, kgo.ClientID(fmt.Sprint("c", i)), kgo.ConsumerGroup("g"),
			kgo.ConsumeTopics("jobs"), kgo.ServerSideBalancer(), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for ctx.Err() == nil {
				if f := cl.PollFetches(ctx); f.IsClientClosed() {
					return
				}
			}
		}()
	}
	// owned maps each consumer's client ID to its partition count, and
	// to its member ID.
	owned := func() (map[string]int, map[string]string, error) {
		cctx, cancel := call()
		defer cancel()
		d, err := adm.DescribeConsumerGroups(cctx, "g")
		if err == nil {
			err = d["g"].Err
		}
		if err != nil {
			return nil, nil, err
		}
		n, ids := map[string]int{}, map[string]string{}
		for _, m := range d["g"].Members {
			n[m.ClientID], ids[m.ClientID] = len(m.Assignment["jobs"]), m.MemberID
		}
		return n, ids, nil
	}
	owns := func(n map[string]int, want [3]int) string {
		if n["c0"] != want[0] || n["c1"] != want[1] || n["c2"] != want[2] {
			return fmt.Sprintf("owned %v", n)
		}
		return ""
	}
	settled := func(want [3]int) func() string {
		return func() string {
			n, _, err := owned()
			if err != nil {
				return fmt.Sprintf("describe: %v", err)
			}
			return owns(n, want)
		}
	}
	var c0 string
	pollUntil(t, 15*time.Second, "2 partitions each", func() string {
		n, ids, err := owned()
		if err != nil {
			return fmt.Sprintf("describe: %v", err)
		}
		c0 = ids["c0"]
		return owns(n, [3]int{2, 2, 2})
	})

	drain := func(args ...string) (string, error) {
		// A KIP-848 member ID is random and may begin with '-'.
		args = append([]string{"drain", "g", "--admin", follower.http, "--timeout", "10s"}, args...)
		return groupsOut(t, follower.addr, append(args, "--", c0)...)
	}
	out, err := drain()
	if err != nil {
		t.Fatalf("drain through the follower: %v\n%s", err, out)
	}
	for _, want := range []string{"drained " + c0, "why: an admin drained a member", "hand-off  done"} {
		if !strings.Contains(out, want) {
			t.Errorf("drain output lacks %q:\n%s", want, out)
		}
	}
	// The drain has taken effect once the command returns: the first
	// answer of DescribeConsumerGroups must show it. A describe that
	// fails is a read that failed, not a drain, and is asked again.
	var drained string
	pollUntil(t, 10*time.Second, "the group described after the drain", func() string {
		n, _, err := owned()
		if err != nil {
			t.Logf("describe after the drain: %v", err)
			return fmt.Sprintf("describe: %v", err)
		}
		drained = owns(n, [3]int{0, 3, 3})
		return ""
	})
	if drained != "" {
		t.Fatalf("after the drain: %s", drained)
	}
	if out, err := drain("--undo"); err != nil || !strings.Contains(out, "may be assigned partitions again") {
		t.Fatalf("drain --undo through the follower: %v\n%s", err, out)
	}
	if got := strings.Count(follower.logs.String(), "forwarded an admin request to the leader"); got != 2 {
		t.Errorf("the follower logged %d forwards, want 2 (drain, undrain):\n%s", got, follower.logs.String())
	}
	pollUntil(t, 10*time.Second, "c0 assigned again", settled([3]int{2, 2, 2}))
}
