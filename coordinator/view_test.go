package coordinator

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// viewEnv drives a group on a 4-partition topic "t" for TestView.
type viewEnv struct {
	t   *testing.T
	cfg Config
	g   *Group
	now time.Time
	// ids are classic member IDs by label (KIP-848 members are named
	// by their label).
	ids map[string]string
}

var viewTopicID = TopicID{15: 1}

func newViewEnv(t *testing.T) *viewEnv {
	topics := NewStaticTopics()
	topics.Add("t", viewTopicID, 4)
	e := &viewEnv{t: t, cfg: DefaultConfig(), now: testEpoch, ids: make(map[string]string)}
	e.cfg.Topics = topics
	e.cfg.InitialRebalanceDelay = 0
	e.cfg.ConsumerSessionTimeout = 10 * time.Second
	e.cfg.ConsumerHeartbeatInterval = 2 * time.Second
	e.g = NewGroup("g", &e.cfg, rand.New(rand.NewPCG(1, 2)))
	return e
}

// step steps req and returns the single reply.
func (e *viewEnv) step(req kmsg.Request, clientID string) kmsg.Response {
	e.t.Helper()
	e.g.Step(e.now, Request{Ref: clientID, Msg: req, ClientID: clientID, ClientHost: "/10.0.0.1"})
	rd := e.g.Ready()
	if len(rd.Replies) != 1 {
		e.t.Fatalf("%d replies to %T, want 1", len(rd.Replies), req)
	}
	resp := rd.Replies[0].Msg // valid until Advance
	e.g.Advance(rd)
	return resp
}

// beat sends member's KIP-848 heartbeat at epoch reporting owned
// partitions of t, and returns the partitions of its assignment (nil if
// the answer carried none) and its new epoch.
func (e *viewEnv) beat(member string, epoch int32, owned ...int32) ([]int32, int32) {
	e.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = member
	req.MemberEpoch = epoch
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"t"}
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if len(owned) > 0 {
		req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: viewTopicID, Partitions: owned})
	}
	resp := e.step(req, "client-"+member).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		e.t.Fatalf("heartbeat of %s: error %d", member, resp.ErrorCode)
	}
	if resp.Assignment == nil {
		return nil, resp.MemberEpoch
	}
	var ps []int32
	for _, at := range resp.Assignment.Topics {
		ps = append(ps, at.Partitions...)
	}
	return ps, resp.MemberEpoch
}

// classicLeader joins a classic consumer group as its only member and
// syncs a plan giving it partitions.
func (e *viewEnv) classicLeader(label string, partitions ...int32) {
	e.t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3 // no MEMBER_ID_REQUIRED round trip
	join.Group = "g"
	join.SessionTimeoutMillis = 6000
	join.RebalanceTimeoutMillis = 30000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	jr := e.step(join, "client-"+label).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		e.t.Fatalf("join: error %d", jr.ErrorCode)
	}
	e.ids[label] = jr.MemberID
	var plan kmsg.ConsumerMemberAssignment
	plan.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: partitions}}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 5
	sync.Group = "g"
	sync.Generation = jr.Generation
	sync.MemberID = jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: plan.AppendTo(nil)}}
	if sr := e.step(sync, "client-"+label).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		e.t.Fatalf("sync: error %d", sr.ErrorCode)
	}
}

func owned(tok int64, ps ...int32) []OwnedPartition {
	var out []OwnedPartition
	for _, p := range ps {
		out = append(out, OwnedPartition{Topic: "t", Partition: p, Token: epoch.Token(tok)})
	}
	return out
}

// TestView checks Group.View against groups driven through real
// requests: who owns what under which token, what is unowned or moving,
// and each member's epoch, state and heartbeat age.
func TestView(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(e *viewEnv)
		// want is the view at the end of run; it may use e.ids.
		want func(e *viewEnv) GroupView
	}{
		{
			name: "new group",
			run:  func(e *viewEnv) {},
			want: func(e *viewEnv) GroupView {
				return GroupView{Name: "g", Type: Classic, State: "Empty", Partitions: []PartitionView{}}
			},
		},
		{
			name: "one KIP-848 member owns every partition",
			run: func(e *viewEnv) {
				e.beat("a", 0)
				e.now = e.now.Add(1500 * time.Millisecond)
				e.beat("a", 1, 0, 1, 2, 3)
				e.now = e.now.Add(700 * time.Millisecond)
			},
			want: func(e *viewEnv) GroupView {
				return GroupView{Name: "g", Type: Consumer, State: "Stable", Epoch: 1, Protocol: "uniform", TargetEpoch: 1,
					Members: []MemberView{{ID: "a", ClientID: "client-a", ClientHost: "/10.0.0.1", Epoch: 1, State: "stable",
						SinceHeartbeat: 700 * time.Millisecond, SessionTimeout: 10 * time.Second, Assigned: owned(1, 0, 1, 2, 3)}},
					Partitions: []PartitionView{
						{Topic: "t", Partition: 0, Owner: "a", Token: 1, Target: "a"},
						{Topic: "t", Partition: 1, Owner: "a", Token: 1, Target: "a"},
						{Topic: "t", Partition: 2, Owner: "a", Token: 1, Target: "a"},
						{Topic: "t", Partition: 3, Owner: "a", Token: 1, Target: "a"},
					}}
			},
		},
		{
			name: "KIP-848 partitions being revoked for a new member",
			run: func(e *viewEnv) {
				e.beat("a", 0)
				e.beat("a", 1, 0, 1, 2, 3)
				e.now = e.now.Add(time.Second)
				e.beat("b", 0)
				e.now = e.now.Add(time.Second)
				e.beat("a", 1, 0, 1, 2, 3) // told to revoke two
				e.now = e.now.Add(3 * time.Second)
			},
			want: func(e *viewEnv) GroupView {
				return GroupView{Name: "g", Type: Consumer, State: "Reconciling", Epoch: 2, Protocol: "uniform", TargetEpoch: 2,
					Members: []MemberView{
						{ID: "a", ClientID: "client-a", ClientHost: "/10.0.0.1", Epoch: 1, State: "unrevoked-partitions",
							SinceHeartbeat: 3 * time.Second, SessionTimeout: 10 * time.Second,
							Assigned: owned(1, 0, 1), Revoking: owned(1, 2, 3)},
						{ID: "b", ClientID: "client-b", ClientHost: "/10.0.0.1", Epoch: 2, State: "unreleased-partitions",
							SinceHeartbeat: 4 * time.Second, SessionTimeout: 10 * time.Second,
							Pending: []TopicPartition{{"t", 2}, {"t", 3}}},
					},
					Partitions: []PartitionView{
						{Topic: "t", Partition: 0, Owner: "a", Token: 1, Target: "a"},
						{Topic: "t", Partition: 1, Owner: "a", Token: 1, Target: "a"},
						{Topic: "t", Partition: 2, Owner: "a", Token: 1, Revoking: true, Target: "b"},
						{Topic: "t", Partition: 3, Owner: "a", Token: 1, Revoking: true, Target: "b"},
					}}
			},
		},
		{
			name: "KIP-848 partitions released and not yet taken are unowned",
			run: func(e *viewEnv) {
				e.beat("a", 0)
				e.beat("a", 1, 0, 1, 2, 3)
				e.beat("b", 0)
				e.beat("a", 1, 0, 1, 2, 3)
				e.beat("a", 1, 0, 1) // released; b has not heartbeat since
			},
			want: func(e *viewEnv) GroupView {
				return GroupView{Name: "g", Type: Consumer, State: "Reconciling", Epoch: 2, Protocol: "uniform", TargetEpoch: 2,
					Members: []MemberView{
						{ID: "a", ClientID: "client-a", ClientHost: "/10.0.0.1", Epoch: 2, State: "stable",
							SessionTimeout: 10 * time.Second, Assigned: owned(1, 0, 1)},
						{ID: "b", ClientID: "client-b", ClientHost: "/10.0.0.1", Epoch: 2, State: "unreleased-partitions",
							SessionTimeout: 10 * time.Second, Pending: []TopicPartition{{"t", 2}, {"t", 3}}},
					},
					Partitions: []PartitionView{
						{Topic: "t", Partition: 0, Owner: "a", Token: 1, Target: "a"},
						{Topic: "t", Partition: 1, Owner: "a", Token: 1, Target: "a"},
						{Topic: "t", Partition: 2, Target: "b"},
						{Topic: "t", Partition: 3, Target: "b"},
					},
					Unowned: 2}
			},
		},
		{
			name: "classic consumer group with a partition its leader left out",
			run: func(e *viewEnv) {
				e.classicLeader("a", 0, 1, 2)
				e.now = e.now.Add(2 * time.Second)
			},
			want: func(e *viewEnv) GroupView {
				a := e.ids["a"]
				return GroupView{Name: "g", Type: Classic, State: "Stable", Epoch: 1, Protocol: "range",
					ProtocolType: "consumer", Leader: a,
					Members: []MemberView{{ID: a, ClientID: "client-a", ClientHost: "/10.0.0.1", Epoch: 1, State: "stable",
						SinceHeartbeat: 2 * time.Second, SessionTimeout: 6 * time.Second, Assigned: owned(1, 0, 1, 2)}},
					Partitions: []PartitionView{
						{Topic: "t", Partition: 0, Owner: a, Token: 1},
						{Topic: "t", Partition: 1, Owner: a, Token: 1},
						{Topic: "t", Partition: 2, Owner: a, Token: 1},
						{Topic: "t", Partition: 3},
					},
					Unowned: 1}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newViewEnv(t)
			tc.run(e)
			got, want := e.g.View(e.now), tc.want(e)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("view:\n got %+v\nwant %+v", got, want)
			}
			if s := e.g.Stats(); s.Unowned != got.Unowned || s.Members != len(got.Members) || s.Epoch != got.Epoch || s.State != got.State {
				t.Errorf("view disagrees with Stats %+v", s)
			}
			if sum := e.g.Summary(); sum.Name != "g" || sum.Stats != e.g.Stats() {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}
