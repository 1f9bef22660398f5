package coordinator_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// A classic group of one consumer: it joins (JoinGroup v3, so without the
// MEMBER_ID_REQUIRED round trip; with no initial delay the join phase ends
// at once), leads, and syncs its own plan. The group persists the
// assignment with the generation as the token of every partition before
// it replies.
func ExampleGroup_classic() {
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add("t", coordinator.TopicID{15: 1}, 4)
	cfg.Topics = topics
	cfg.InitialRebalanceDelay = 0
	g := coordinator.NewGroup("g", &cfg, rand.New(rand.NewPCG(1, 2)))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3 // no MEMBER_ID_REQUIRED round trip
	join.Group = "g"
	join.SessionTimeoutMillis = 10000
	join.RebalanceTimeoutMillis = 30000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	g.Step(now, coordinator.Request{Ref: "join", Msg: join, ClientID: "worker"})
	jr := g.Ready().Replies[0].Msg.(*kmsg.JoinGroupResponse)
	fmt.Println("generation", jr.Generation, "leader", jr.LeaderID == jr.MemberID)
	g.Advance(g.Ready())

	var plan kmsg.ConsumerMemberAssignment
	plan.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 3}}}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 5
	sync.Group = "g"
	sync.Generation = jr.Generation
	sync.MemberID = jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: plan.AppendTo(nil)}}
	g.Step(now, coordinator.Request{Ref: "sync", Msg: sync})
	for _, r := range g.Ready().Persist {
		if a, ok := r.(*coordinator.AssignmentRecord); ok {
			fmt.Println("owned", len(a.Owned), "partitions under token", a.Owned[0].Token)
		}
	}
	g.Advance(g.Ready())
	fmt.Println(g.State())
	// Output:
	// generation 1 leader true
	// owned 4 partitions under token 1
	// Stable
}
