package coordinator_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// TestMemberConnTags: a member's connection tag (SetMemberConn) is kept
// with the member, whether the shell sets it right after the member's
// heartbeat or after another member's, and goes with it: a group rebuilt
// from its records has none, an unknown member takes none, and a member
// that left has none, also under the ID with which it joins again.
func TestMemberConnTags(t *testing.T) {
	recs, members := testgroups.Stable(t, "g")
	cfg := stableConfig()
	g, err := coordinator.Rebuild("g", &cfg, rand.New(rand.NewPCG(1, 2)), recs)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	g.Step(now, coordinator.Resume{})
	step := func(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		g.Step(now, coordinator.Request{Msg: req, Resp: resp, ClientID: "orders-worker", ClientHost: "/10.1.2.3"})
		for g.HasReady() {
			g.Advance(g.Ready())
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s at epoch %d: error %d", req.MemberID, req.MemberEpoch, resp.ErrorCode)
		}
		return resp
	}
	beat := func(m testgroups.Member, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "g", m.ID, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{testgroups.Topic.Name}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		return step(req)
	}
	a, b := members[0], members[1]
	for _, m := range members {
		if tag := g.MemberConn(m.ID); tag != nil {
			t.Fatalf("rebuilt member %s has tag %v", m.ID, tag)
		}
	}
	if prev, ok := g.SetMemberConn("nobody", "c1"); ok || prev != nil || g.MemberConn("nobody") != nil {
		t.Fatalf("an unknown member: SetMemberConn = %v, %v; MemberConn = %v", prev, ok, g.MemberConn("nobody"))
	}

	beat(a, a.Epoch)
	if prev, ok := g.SetMemberConn(a.ID, "c1"); !ok || prev != nil {
		t.Fatalf("a's first tag: SetMemberConn = %v, %v", prev, ok)
	}
	beat(b, b.Epoch)
	if prev, ok := g.SetMemberConn(b.ID, "c2"); !ok || prev != nil {
		t.Fatalf("b's first tag: SetMemberConn = %v, %v", prev, ok)
	}
	// Not right after a's heartbeat: found in the group's members.
	if prev, ok := g.SetMemberConn(a.ID, "c3"); !ok || prev != "c1" {
		t.Fatalf("a's second tag: SetMemberConn = %v, %v, want c1", prev, ok)
	}
	if tag := g.MemberConn(b.ID); tag != "c2" {
		t.Fatalf("b's tag %v, want c2", tag)
	}

	// a leaves: its heartbeat found it last, and its tag goes with it.
	if resp := beat(a, -1); resp.MemberEpoch != -1 {
		t.Fatalf("a's leave answered epoch %d", resp.MemberEpoch)
	}
	if prev, ok := g.SetMemberConn(a.ID, "c4"); ok || g.MemberConn(a.ID) != nil {
		t.Fatalf("a left: SetMemberConn = %v, %v; MemberConn = %v", prev, ok, g.MemberConn(a.ID))
	}
	beat(a, 0)
	if tag := g.MemberConn(a.ID); tag != nil {
		t.Fatalf("a joined again with tag %v", tag)
	}
	if prev, ok := g.SetMemberConn(a.ID, "c5"); !ok || prev != nil {
		t.Fatalf("a joined again: SetMemberConn = %v, %v", prev, ok)
	}
	if tag := g.MemberConn(b.ID); tag != "c2" {
		t.Fatalf("b's tag %v after a left and joined, want c2", tag)
	}
}
