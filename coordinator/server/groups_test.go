package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestUnknownGroups: requests for a group that does not exist are answered
// by the server with the codes Kafka uses, and create nothing.
func TestUnknownGroups(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 4, "nope", "m"
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID = 5, "nope", "m"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "nope"
	odel := kmsg.NewPtrOffsetDeleteRequest()
	odel.Group = "nope"
	for _, req := range []kmsg.Request{hb, sync, leave, odel} {
		if code := responseCode(c.roundTrip(req)); code != kerr.GroupIDNotFound.Code {
			t.Errorf("%s: error %d, want GROUP_ID_NOT_FOUND", kmsg.NameForKey(req.Key()), code)
		}
	}

	join := probeJoin().(*kmsg.JoinGroupRequest)
	join.Group = ""
	if code := responseCode(c.roundTrip(join)); code != kerr.InvalidGroupID.Code {
		t.Errorf("JoinGroup to the empty group ID: error %d", code)
	}
	hb.Group = ""
	if code := responseCode(c.roundTrip(hb)); code != kerr.InvalidGroupID.Code {
		t.Errorf("Heartbeat to the empty group ID: error %d", code)
	}

	ofetch := kmsg.NewPtrOffsetFetchRequest()
	ofetch.Version = 7
	ofetch.Group = "nope"
	if r := c.roundTrip(ofetch).(*kmsg.OffsetFetchResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetFetch v7: error %d", r.ErrorCode)
	}
	ofetch = kmsg.NewPtrOffsetFetchRequest()
	ofetch.Version = 9
	for _, g := range []string{"a", "b"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		ofetch.Groups = append(ofetch.Groups, rg)
	}
	if r := c.roundTrip(ofetch).(*kmsg.OffsetFetchResponse); len(r.Groups) != 2 || r.Groups[1].Group != "b" || r.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetFetch v9: %+v", r.Groups)
	}

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version = 5
	describe.Groups = []string{"nope"}
	if r := c.roundTrip(describe).(*kmsg.DescribeGroupsResponse); len(r.Groups) != 1 || r.Groups[0].State != "Dead" || r.Groups[0].Group != "nope" {
		t.Errorf("DescribeGroups: %+v", r.Groups)
	}
	cdescribe := kmsg.NewPtrConsumerGroupDescribeRequest()
	cdescribe.Groups = []string{"nope"}
	if r := c.roundTrip(cdescribe).(*kmsg.ConsumerGroupDescribeResponse); r.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ConsumerGroupDescribe: %+v", r.Groups)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{"nope"}
	if r := c.roundTrip(del).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("DeleteGroups: %+v", r.Groups)
	}
	list := kmsg.NewPtrListGroupsRequest()
	list.Version = 5
	if r := c.roundTrip(list).(*kmsg.ListGroupsResponse); len(r.Groups) != 0 {
		t.Errorf("ListGroups: %+v", r.Groups)
	}
	if n := len(ts.term(t).groups.snapshot()); n != 0 {
		t.Fatalf("%d groups created by requests for unknown groups", n)
	}
}

// TestListGroupsFilters: ListGroups lists what exists, sorted, and applies
// its state and type filters case-insensitively.
func TestListGroupsFilters(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)
	if !coreServes(t, ts, probeJoin()) {
		t.Skip("the group core does not serve JoinGroup yet")
	}
	for _, g := range []string{"zeta", "alpha"} {
		join := probeJoin().(*kmsg.JoinGroupRequest)
		join.Group = g
		c.roundTrip(join) // MEMBER_ID_REQUIRED: the group exists, empty
	}
	list := func(states, types []string) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		req.StatesFilter, req.TypesFilter = states, types
		var names []string
		for _, g := range c.roundTrip(req).(*kmsg.ListGroupsResponse).Groups {
			names = append(names, g.Group+"/"+g.GroupType+"/"+g.GroupState)
		}
		return names
	}
	for _, tc := range []struct {
		states, types []string
		want          []string
	}{
		{nil, nil, []string{"alpha/classic/Empty", "probe/classic/Empty", "zeta/classic/Empty"}},
		{[]string{"empty"}, []string{"CLASSIC"}, []string{"alpha/classic/Empty", "probe/classic/Empty", "zeta/classic/Empty"}},
		{[]string{"Stable"}, nil, nil},
		{nil, []string{"consumer"}, nil},
	} {
		if got := list(tc.states, tc.types); !equalStrings(got, tc.want) {
			t.Errorf("states %v types %v: %v, want %v", tc.states, tc.types, got, tc.want)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// flakyStore fails every Persist while fail is set.
type flakyStore struct {
	store.Store
	fail  atomic.Bool
	calls atomic.Int64
}

func (s *flakyStore) Persist(ctx context.Context, recs []coordinator.Record) error {
	s.calls.Add(1)
	if s.fail.Load() {
		return errors.New("flaky: injected failure")
	}
	return s.Store.Persist(ctx, recs)
}

// TestGroupTimerExpiresMember: the server drives the core's timers, so a
// member that stops heartbeating is removed without any request.
func TestGroupTimerExpiresMember(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Core.ConsumerSessionTimeout = 300 * time.Millisecond
		c.Core.ConsumerHeartbeatInterval = 100 * time.Millisecond
	})
	if !coreServes(t, ts, probeConsumerHeartbeat()) {
		t.Skip("the group core does not serve ConsumerGroupHeartbeat yet")
	}
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	req := joinHeartbeat()
	if r := c.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("join: error %d", r.ErrorCode)
	}
	if m := ts.metric(t, "tenure_group_members", "group", "g"); m != 1 {
		t.Fatalf("members gauge %v after the join", m)
	}
	eventually(t, 5*time.Second, "the silent member to expire", func() bool {
		return ts.metric(t, "tenure_group_members", "group", "g") == 0
	})
}

// joinHeartbeat is the ConsumerGroupHeartbeat with which a member joins
// group g, subscribed to topic jobs.
func joinHeartbeat() *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = "member-0000000000000000000"
	req.RebalanceTimeoutMillis = 10000
	req.SubscribedTopicNames = []string{"jobs"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

// TestGroupLimit: a request that would create a group beyond MaxGroups is
// answered COORDINATOR_NOT_AVAILABLE; existing groups are unaffected.
func TestGroupLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxGroups = 1 })
	c := dial(t, ts.addr)
	first := probeJoin().(*kmsg.JoinGroupRequest)
	first.Group = "first"
	if code := responseCode(c.roundTrip(first)); code == kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("the first group was refused")
	}
	second := probeJoin().(*kmsg.JoinGroupRequest)
	second.Group = "second"
	if code := responseCode(c.roundTrip(second)); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("a group beyond the limit: error %d, want COORDINATOR_NOT_AVAILABLE", code)
	}
	if code := responseCode(c.roundTrip(first)); code == kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("the existing group was refused")
	}
	if n := ts.metric(t, "tenure_limit_rejections_total", "limit", "groups"); n != 1 {
		t.Fatalf("group limit rejections %v, want 1", n)
	}
}

// TestShutdownAnswersParkedJoin: a JoinGroup parked in its group (here by
// the initial rebalance delay) is answered COORDINATOR_NOT_AVAILABLE at
// shutdown, so its client looks for the coordinator again.
func TestShutdownAnswersParkedJoin(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Core.InitialRebalanceDelay = 20 * time.Second })
	if !coreServes(t, ts, probeJoin()) {
		t.Skip("the group core does not serve JoinGroup yet")
	}
	c := dial(t, ts.addr)
	join := probeJoin().(*kmsg.JoinGroupRequest)
	join.Group = "g"
	first := c.roundTrip(join).(*kmsg.JoinGroupResponse)
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", first.ErrorCode)
	}
	join.MemberID = first.MemberID
	corr := c.send(join)
	eventually(t, 10*time.Second, "the join to park in its group", func() bool {
		e := ts.term(t).groups.lookup("g")
		return e != nil && e.parked.Load() == 1
	})
	if _, _, err := c.tryRecv(200 * time.Millisecond); err == nil {
		t.Fatal("the join was answered during the initial rebalance delay")
	}
	start := time.Now()
	go ts.stop()
	got, resp := c.recv()
	if got != corr || resp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("parked join answered %d with %+v", got, resp)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered %v after shutdown began", d)
	}
	c.expectClosed(5 * time.Second)
}

// TestNonUTF8GroupName: Kafka group IDs are arbitrary bytes; one that is
// not UTF-8 works and gets a quoted metric label (found by FuzzConn: the
// raw name made the metrics library panic).
func TestNonUTF8GroupName(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)
	join := probeJoin().(*kmsg.JoinGroupRequest)
	join.Group = "g\xff"
	c.roundTrip(join)
	if ts.term(t).groups.lookup("g\xff") == nil {
		t.Fatal("group not created")
	}
	if got := groupLabel("g\xff"); got != `"g\xff"` {
		t.Fatalf("label %s", got)
	}
	if got := groupLabel("plain-ü"); got != "plain-ü" {
		t.Fatalf("label of a UTF-8 name changed to %s", got)
	}
	if _, err := ts.reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}
