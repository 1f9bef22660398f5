package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/coordinator/web"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestGroupsExplainDrain runs `tenure groups explain` and `drain` against
// a coordinator with its admin API, and three stock kgo KIP-848 consumers
// and one classic one: the log in words and in JSON, a drain that waits
// for its hand-off, its undo, a drain with removal, and the errors.
func TestGroupsExplainDrain(t *testing.T) {
	srv, broker := testenv.StartTenureServer(t, testenv.TenureConfig(t, 6*time.Second, 200*time.Millisecond, 6))
	src := web.ServerSource{Server: srv}
	page := web.New(src)
	hs := httptest.NewServer(httpMux(prometheus.NewRegistry(), nil, src, page, httpServes{admin: true}, zap.NewNop()))
	t.Cleanup(func() { page.Close(); hs.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumer := func(name, group string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(broker), kgo.ClientID(name),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics("jobs"), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
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
		return cl
	}
	acl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acl.Close)
	adm := kadm.NewClient(acl)
	if _, err := adm.CreateTopics(ctx, 6, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		consumer(fmt.Sprintf("c%d", i), "g", kgo.ServerSideBalancer())
	}
	consumer("k0", "classic")
	owned := func(group string) map[string]int {
		d, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil || d[group].Err != nil {
			return nil
		}
		n := map[string]int{}
		for _, m := range d[group].Members {
			n[m.ClientID] = len(m.Assignment["jobs"])
		}
		return n
	}
	testenv.Eventually(t, 20*time.Second, "2 partitions each", func() bool {
		n := owned("g")
		return n["c0"] == 2 && n["c1"] == 2 && n["c2"] == 2
	})
	memberOf := func(client string) string {
		d, err := adm.DescribeConsumerGroups(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range d["g"].Members {
			if m.ClientID == client {
				return m.MemberID
			}
		}
		t.Fatalf("no member of %s", client)
		return ""
	}
	run := func(args ...string) (string, error) {
		return groupsOut(t, broker, append([]string{args[0], "--admin", hs.URL, "--timeout", "20s"}, args[1:]...)...)
	}

	out, err := run("explain", "g")
	if err != nil || !strings.Contains(out, "why: a member joined") || !strings.Contains(out, "fewest possible for a balanced assignment") {
		t.Fatalf("explain: %v\n%s", err, out)
	}

	c0 := memberOf("c0")
	// Member IDs are random, and may begin with '-'.
	out, err = run("drain", "g", "--", c0)
	if err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	for _, want := range []string{"drained " + c0, "why: an admin drained a member", "moves     2 (fewest possible for a balanced assignment: 2)", "hand-off  done"} {
		if !strings.Contains(out, want) {
			t.Errorf("drain output lacks %q:\n%s", want, out)
		}
	}
	if n := owned("g"); n["c0"] != 0 || n["c1"] != 3 || n["c2"] != 3 {
		t.Fatalf("after the drain: %v", n)
	}

	var x explained
	out, err = run("explain", "g", "--limit", "1", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &x) != nil || len(x.Entries) != 1 {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	e := x.Entries[0]
	if e.Reason != "drain" || len(e.Moves) != 2 || !e.Handoff.Done || e.Handoff.Granted != 2 || e.Moves[0].From != c0 {
		t.Fatalf("the drain's entry: %+v", e)
	}
	out, err = run("explain", "g", "--epoch", fmt.Sprint(e.Epoch-1))
	if err != nil || !strings.Contains(out, fmt.Sprintf("epoch %d ", e.Epoch-1)) || strings.Contains(out, "... and") {
		t.Fatalf("explain --epoch: %v\n%s", err, out)
	}

	if out, err = run("drain", "g", "--undo", "--", c0); err != nil || !strings.Contains(out, "may be assigned partitions again") {
		t.Fatalf("drain --undo: %v\n%s", err, out)
	}
	testenv.Eventually(t, 20*time.Second, "c0 assigned again", func() bool { return owned("g")["c0"] == 2 })

	c1 := memberOf("c1")
	var d drained
	out, err = run("drain", "g", "--remove", c1, "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.Action != "removed" || d.Entry == nil || d.Entry.Reason != "drain" {
		t.Fatalf("drain --remove: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"drain", "g", "nobody"}, "no member with ID or instance ID"},
		{[]string{"drain", "g"}, "drain takes GROUP MEMBER"},
		{[]string{"drain", "classic", memberOfClassic(t, adm)}, "classic group"},
		{[]string{"explain", "nogroup"}, "no generation log"},
		{[]string{"explain", "g", "--epoch", "9999"}, "no log entry for epoch 9999"},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, err := groupsOut(t, broker, "explain", "g", "--admin", "127.0.0.1:1", "--timeout", "2s"); err == nil || !strings.Contains(err.Error(), "is the node serving --http there?") {
		t.Errorf("explain against nothing: %v", err)
	}
}

func memberOfClassic(t *testing.T, adm *kadm.Client) string {
	t.Helper()
	var id string
	testenv.Eventually(t, 20*time.Second, "the classic consumer to join", func() bool {
		d, err := adm.DescribeGroups(context.Background(), "classic")
		if err != nil || len(d["classic"].Members) != 1 {
			return false
		}
		id = d["classic"].Members[0].MemberID
		return true
	})
	return id
}

// TestGroupsLeaveNoConnection: a groups command closes the connections it
// opened to the admin API. describe asks the API at --admin (by default
// 127.0.0.1:9644, where another node may well listen) whether the group's
// coordinator keeps its state in memory; the keep-alive connection it
// left in the process's shared HTTP transport outlived it.
func TestGroupsLeaveNoConnection(t *testing.T) {
	srv, broker := testenv.StartTenureServer(t, testenv.TenureConfig(t, 6*time.Second, 200*time.Millisecond, 6))
	src := web.ServerSource{Server: srv}
	page := web.New(src)
	hs := httptest.NewServer(httpMux(prometheus.NewRegistry(), nil, src, page, httpServes{admin: true}, zap.NewNop()))
	t.Cleanup(func() { page.Close(); hs.Close() })
	acl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acl.Close)
	adm := kadm.NewClient(acl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}

	leaks := goleak.IgnoreCurrent()
	out, err := groupsOut(t, broker, "describe", "g", "--admin", hs.URL)
	if err != nil || !strings.Contains(out, "GROUP        g") {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	goleak.VerifyNone(t, leaks)
}

// TestDrainTimeoutSaysWhy: when --timeout ends while the log is being read
// (under load, a read is in flight most of the time), the drain reports the
// hand-off's timeout with what the last read saw, not a failed read.
func TestDrainTimeoutSaysWhy(t *testing.T) {
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			<-r.Context().Done() // the next read outlives the deadline
			return
		}
		_ = json.NewEncoder(w).Encode([]adminapi.LogEntry{
			{Group: "g", Epoch: 6, Reason: "drain", Assigned: true, Moves: make([]adminapi.Move, 2),
				Handoff: adminapi.Handoff{Granted: 1}},
			{Group: "g", Epoch: 5, Reason: "join"},
		})
	}))
	defer hs.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections() // no connection outlives the test (goleak in others)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := waitDrained(ctx, nil, &adminapi.Client{Base: hs.URL, HTTP: &http.Client{Transport: tr}}, "g", "m", 5, false)
	if err == nil {
		t.Fatal("the drain returned without its hand-off")
	}
	for _, want := range []string{"hand-off was not over within --timeout", "epoch 6", "1 of 2 moves granted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "reading the log") {
		t.Errorf("error %q blames the read", err)
	}
}
