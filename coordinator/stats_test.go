package coordinator

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestStatsConsumer(t *testing.T) {
	topics := NewStaticTopics()
	topics.Add("t", TopicID{1}, 8)
	cfg := DefaultConfig()
	cfg.Topics = topics
	g := NewGroup("g", &cfg, rand.New(rand.NewPCG(1, 1)))
	if s := g.Stats(); s.Members != 0 || s.Unowned != 0 || s.State != "Empty" {
		t.Fatalf("empty group stats = %+v", s)
	}
	now := time.Unix(0, 0)
	hb := func(id string, epoch int32, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "g"
		req.MemberID = id
		req.MemberEpoch = epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 5000
			req.SubscribedTopicNames = []string{"t"}
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(owned) > 0 {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: TopicID{1}, Partitions: owned})
		}
		g.Step(now, Request{Ref: id, Msg: req})
		resp := g.Ready().Replies[0].Msg.(*kmsg.ConsumerGroupHeartbeatResponse)
		g.Advance(g.Ready())
		return resp
	}
	hb("m1", 0, nil)
	if s := g.Stats(); s.Members != 1 || s.Owned != 8 || s.Unowned != 0 || s.Type != Consumer {
		t.Fatalf("one member: stats = %+v", s)
	}
	// A second member: half the partitions must be revoked from m1 before
	// m2 gets them, so they are owned by m1 until it releases them.
	hb("m2", 0, nil)
	hb("m1", 1, []int32{0, 1, 2, 3, 4, 5, 6, 7})
	// m1 releases four partitions; until m2 heartbeats they are unowned.
	hb("m1", 1, []int32{0, 1, 2, 3})
	if s := g.Stats(); s.Members != 2 || s.Owned != 4 || s.Unowned != 4 {
		t.Fatalf("during hand-off: stats = %+v", s)
	}
	if l := g.Listing(); l.Group != "g" || l.GroupType != "consumer" || l.ProtocolType != "consumer" {
		t.Fatalf("listing = %+v", l)
	}

	// Restored with a takeover grace, both members are awaited until
	// they heartbeat.
	var recs []Record
	recs = append(recs, g.Snapshot()...)
	cfg.TakeoverGrace = 30 * time.Second
	r, err := Restore("g", &cfg, rand.New(rand.NewPCG(1, 1)), now, recs)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Stats(); s.Awaited != 2 {
		t.Fatalf("restored with a grace: awaited %d, want 2", s.Awaited)
	}
	g = r
	hb("m1", 1, []int32{0, 1, 2, 3})
	if s := g.Stats(); s.Awaited != 1 {
		t.Fatalf("after m1's heartbeat: awaited %d, want 1", s.Awaited)
	}
}

// TestStatsExpelledEmpty: a group whose last member was expelled counts
// the partitions it committed as unowned (its consumer may still work on
// them), until a member joins; a group emptied by a leave counts none.
func TestStatsExpelledEmpty(t *testing.T) {
	topics := NewStaticTopics()
	topics.Add("t", TopicID{1}, 8)
	cfg := DefaultConfig()
	cfg.Topics = topics
	cfg.ConnLossGrace = 0
	g := NewGroup("g", &cfg, rand.New(rand.NewPCG(1, 1)))
	now := time.Unix(0, 0)
	step := func(id string, msg kmsg.Request) kmsg.Response {
		g.Step(now, Request{Ref: id, Msg: msg})
		rd := g.Ready()
		if len(rd.Replies) == 0 {
			t.Fatalf("no reply to %T", msg)
		}
		resp := rd.Replies[0].Msg
		g.Advance(rd)
		return resp
	}
	hb := func(id string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", id, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 5000
			req.SubscribedTopicNames = []string{"t"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		return step(id, req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	commit := func(id string, epoch int32, parts ...int32) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "g", id, epoch
		tt := kmsg.NewOffsetCommitRequestTopic()
		tt.Topic = "t"
		for _, p := range parts {
			pp := kmsg.NewOffsetCommitRequestTopicPartition()
			pp.Partition, pp.Offset = p, 10
			tt.Partitions = append(tt.Partitions, pp)
		}
		req.Topics = append(req.Topics, tt)
		r := step(id, req).(*kmsg.OffsetCommitResponse)
		for _, p := range r.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("commit of t[%d]: error %d", p.Partition, p.ErrorCode)
			}
		}
	}
	expire := func() {
		now = now.Add(cfg.ConsumerSessionTimeout + time.Second)
		g.Step(now, Tick{})
		g.Advance(g.Ready())
	}

	r := hb("m1", 0)
	commit("m1", r.MemberEpoch, 0, 1, 2)
	expire()
	if s := g.Stats(); s.Members != 0 || s.Unowned != 3 {
		t.Fatalf("the last member expelled: stats = %+v, want 0 members and 3 unowned (its committed partitions)", s)
	}
	hb("m2", 0)
	if s := g.Stats(); s.Members != 1 || s.Unowned != 0 {
		t.Fatalf("a member joined: stats = %+v, want 1 member and 0 unowned", s)
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version = 1
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "m2", -1
	step("m2", leave)
	if s := g.Stats(); s.Members != 0 || s.Unowned != 0 {
		t.Fatalf("the last member left: stats = %+v, want 0 members and 0 unowned", s)
	}
}
