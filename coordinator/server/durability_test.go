package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// cgHeartbeat is a KIP-848 heartbeat of member id in group at epoch,
// subscribed to jobs on a join; -1 leaves.
func cgHeartbeat(group, id string, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = group
	req.MemberID = id
	req.MemberEpoch = epoch
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 10000
		req.SubscribedTopicNames = []string{"jobs"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	return req
}

func deleteGroups(c *rawClient, groups ...string) int16 {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = groups
	return c.roundTrip(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
}

// TestDeleteGroupsKeepsEpochs: a group deleted and re-created under the
// same name continues above every epoch it had, so no token it handed out
// is ever handed out again (regression: the re-created group started at
// epoch 1, below tokens that downstream fences already held).
func TestDeleteGroupsKeepsEpochs(t *testing.T) {
	t.Run("consumer", func(t *testing.T) {
		ts := startServer(t, nil)
		c := dial(t, ts.addr)
		c.roundTrip(metadataRequest(12, "jobs"))
		var last int32
		for _, id := range []string{"member-a-000000000000000", "member-b-000000000000000", "member-c-000000000000000"} {
			r := c.roundTrip(cgHeartbeat("g", id, 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
			if r.ErrorCode != 0 {
				t.Fatalf("join %s: error %d", id, r.ErrorCode)
			}
			last = r.MemberEpoch
			c.roundTrip(cgHeartbeat("g", id, -1))
		}
		if last < 5 {
			t.Fatalf("the last member joined at epoch %d; the test needs a few epochs behind it", last)
		}
		if code := deleteGroups(c, "g"); code != 0 {
			t.Fatalf("DeleteGroups: error %d", code)
		}
		r := c.roundTrip(cgHeartbeat("g", "member-d-000000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 || r.MemberEpoch <= last+1 {
			t.Fatalf("join after the deletion: error %d epoch %d; the deleted group reached epoch %d", r.ErrorCode, r.MemberEpoch, last+1)
		}
	})
	t.Run("classic", func(t *testing.T) {
		ts := startServer(t, func(c *Config) { c.Core.InitialRebalanceDelay = 0 })
		c := dial(t, ts.addr)
		generation := func() int32 {
			join := probeJoin().(*kmsg.JoinGroupRequest)
			join.Group = "g"
			first := c.roundTrip(join).(*kmsg.JoinGroupResponse)
			join.MemberID = first.MemberID
			r := c.roundTrip(join).(*kmsg.JoinGroupResponse)
			if r.ErrorCode != 0 {
				t.Fatalf("join: error %d", r.ErrorCode)
			}
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Version = 5
			leave.Group = "g"
			leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
			c.roundTrip(leave)
			return r.Generation
		}
		g1 := generation()
		g2 := generation()
		if code := deleteGroups(c, "g"); code != 0 {
			t.Fatalf("DeleteGroups: error %d", code)
		}
		if g3 := generation(); g3 <= g2+1 {
			t.Fatalf("generations %d, %d, then %d after the deletion; the group had reached %d", g1, g2, g3, g2+1)
		}
	})
}

// TestCorePanicContainedToGroup: a panic in one group's core (here forced
// by a hook; in production a broken invariant) is logged with its stack and
// request, counted, answered COORDINATOR_NOT_AVAILABLE, and takes only that
// group offline, with the requests parked in it; every other group goes on,
// and the group comes back from the store once its core works again.
func TestCorePanicContainedToGroup(t *testing.T) {
	obs, logs := observer.New(zapcore.ErrorLevel)
	ts := startServerLogger(t, zap.New(obs), func(c *Config) { c.Core.InitialRebalanceDelay = 20 * time.Second })
	var mu sync.Mutex
	broken := false
	ts.coreHook = func(group string) {
		mu.Lock()
		defer mu.Unlock()
		if broken && group == "bad" {
			panic("injected core failure")
		}
	}
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	if r := c.roundTrip(cgHeartbeat("bad", "member-bad-0000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("join bad: error %d", r.ErrorCode)
	}
	// A classic JoinGroup parked in another group by its initial delay
	// must not be disturbed; one parked in "bad" gets its answer.
	parked := dial(t, ts.addr)
	join := probeJoin().(*kmsg.JoinGroupRequest)
	join.Group = "good-classic"
	join.MemberID = parked.roundTrip(join).(*kmsg.JoinGroupResponse).MemberID
	parked.send(join)

	mu.Lock()
	broken = true
	mu.Unlock()
	r := c.roundTrip(cgHeartbeat("bad", "member-bad-0000000000000", 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("heartbeat into the panicking group: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	if r := c.roundTrip(cgHeartbeat("good", "member-good-000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("another group after the panic: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	if _, _, err := parked.tryRecv(100 * time.Millisecond); err == nil {
		t.Fatal("a join parked in another group was answered by the panic")
	}
	if n := ts.metric(t, "tenure_group_panics_total"); n != 1 {
		t.Fatalf("panics counted %v, want 1", n)
	}
	found := logs.FilterMessageSnippet("core panicked").FilterField(zap.String("group", "bad")).All()
	if len(found) != 1 {
		t.Fatalf("%d panic logs for group bad, want 1: %v", len(found), logs.All())
	}
	ctx := found[0].ContextMap()
	if !strings.Contains(ctx["stack"].(string), "stepCore") || ctx["request"] != "ConsumerGroupHeartbeat" || ctx["member"] != "member-bad-0000000000000" {
		t.Fatalf("the panic log lacks the stack or the request: %v", ctx)
	}

	mu.Lock()
	broken = false
	mu.Unlock()
	eventually(t, 5*time.Second, "the group to come back from the store", func() bool {
		r := c.roundTrip(cgHeartbeat("bad", "member-bad-0000000000000", 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
		return r.ErrorCode == 0 && r.MemberEpoch == 1
	})
}

// gateStore holds every Persist until released, so a test can see what
// waits for a write in flight.
type gateStore struct {
	store.Store
	mu      sync.Mutex
	held    bool
	entered chan struct{}
	open    chan struct{}
}

func newGateStore() *gateStore {
	return &gateStore{Store: store.NewMemory(), entered: make(chan struct{}, 100), open: make(chan struct{})}
}

func (s *gateStore) hold() {
	s.mu.Lock()
	s.held = true
	s.open = make(chan struct{})
	s.mu.Unlock()
}

func (s *gateStore) release() {
	s.mu.Lock()
	s.held = false
	close(s.open)
	s.mu.Unlock()
}

func (s *gateStore) Persist(ctx context.Context, recs []coordinator.Record) error {
	s.mu.Lock()
	held, open := s.held, s.open
	s.mu.Unlock()
	if held {
		s.entered <- struct{}{}
		select {
		case <-open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Persist(ctx, recs)
}

// gatedMember starts a server on a gateStore and joins the KIP-848 member
// id to group g on jobs, over the connection it returns.
func gatedMember(t *testing.T, id string) (*gateStore, *testServer, *rawClient, *kmsg.ConsumerGroupHeartbeatResponse) {
	t.Helper()
	gs := newGateStore()
	ts := startServer(t, func(c *Config) { c.Store, c.TopicStore = gs, gs.Store.(store.TopicStore) })
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	r := c.roundTrip(cgHeartbeat("g", id, 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("join: error %d", r.ErrorCode)
	}
	return gs, ts, c, r
}

// TestRepliesWaitForTheirWrites: while a group's write is in flight, its
// replies (even a heartbeat that persisted nothing) and reads of it wait;
// another group is not held up; once the write lands everything is
// answered in order.
func TestRepliesWaitForTheirWrites(t *testing.T) {
	const id = "member-a-000000000000000"
	gs, ts, c, r := gatedMember(t, id)

	gs.hold()
	commit := commitRequest("g", id, r.MemberEpoch, "jobs", 0, 42)
	commit.Version = 9
	commitCorr := c.send(commit)
	<-gs.entered

	hb := c.send(cgHeartbeat("g", id, r.MemberEpoch))
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "g"
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{fg}
	reader := dial(t, ts.addr)
	fetchCorr := reader.send(fetch)
	if _, _, err := c.tryRecv(200 * time.Millisecond); err == nil {
		t.Fatal("the commit or the heartbeat was answered before the commit was durable")
	}
	if _, _, err := reader.tryRecv(10 * time.Millisecond); err == nil {
		t.Fatal("OffsetFetch answered before the offset it read was durable")
	}
	// A request of another group that writes nothing is answered at
	// once (the core's answer to a heartbeat into a group it does not
	// know as a consumer group).
	other := dial(t, ts.addr)
	if r := other.roundTrip(cgHeartbeat("other", "member-o-000000000000000", 1)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("another group while g's write is held: error %d", r.ErrorCode)
	}
	gs.release()
	for _, want := range []int32{commitCorr, hb} {
		got, resp := c.recv()
		if got != want || responseCode(resp) != 0 {
			t.Fatalf("got response %d (error %d), want %d", got, responseCode(resp), want)
		}
	}
	got, resp := reader.recv()
	fr := resp.(*kmsg.OffsetFetchResponse)
	if got != fetchCorr || len(fr.Groups) != 1 || len(fr.Groups[0].Topics) != 1 || fr.Groups[0].Topics[0].Partitions[0].Offset != 42 {
		t.Fatalf("OffsetFetch %d: %+v", got, fr.Groups)
	}
}

// TestStoreFailureReloadsGroup: when a write fails, the replies waiting on
// it are answered COORDINATOR_NOT_AVAILABLE and the group goes offline;
// once the store works again the next request rebuilds the group from
// what the store holds, while other groups went on all along.
func TestStoreFailureReloadsGroup(t *testing.T) {
	fs := &flakyStore{Store: store.NewMemory()}
	ts := startServer(t, func(c *Config) { c.Store, c.TopicStore = fs, fs.Store.(store.TopicStore) })
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	const a, b = "member-a-000000000000000", "member-b-000000000000000"
	if r := c.roundTrip(cgHeartbeat("g", a, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join a: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	fs.fail.Store(true)
	if r := c.roundTrip(cgHeartbeat("g", b, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join b with a failing store: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	if r := c.roundTrip(cgHeartbeat("g", a, 1)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("the failed group answered %d before it could be reloaded", r.ErrorCode)
	}
	fs.fail.Store(false)
	if r := c.roundTrip(cgHeartbeat("h", a, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("another group: error %d", r.ErrorCode)
	}
	// a is still a member at epoch 1: b's join never reached the store.
	eventually(t, 5*time.Second, "the group to be reloaded", func() bool {
		r := c.roundTrip(cgHeartbeat("g", a, 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
		return r.ErrorCode == 0 && r.MemberEpoch == 1
	})
	if n := ts.metric(t, "tenure_group_reloads_total", "result", "reloaded"); n != 1 {
		t.Fatalf("reloads %v, want 1", n)
	}
	if n := ts.metric(t, "tenure_groups_offline_total", "reason", "store"); n != 1 {
		t.Fatalf("groups offline %v, want 1", n)
	}
}
