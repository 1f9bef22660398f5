package member_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/member"
)

// A worker joins a group and works on the partitions it claims: it reads
// where the previous owner stopped, writes to a resource that checks the
// claim's fencing token, commits, and stops when the claim's context ends.
// Here the cluster is an in-process kfake (tenure's coordinator is used
// the same way: Brokers is its address).
func Example() {
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(4, "jobs"),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.heartbeat.interval.ms": "300",
			"group.consumer.session.timeout.ms":    "3000",
		}),
	)
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	var resource epoch.MemFence // a downstream store that rejects stale tokens
	started := make(chan string, 8)

	// start resumes where the previous owner stopped. Every write carries
	// the claim's token, so a former owner's is rejected.
	start := func(c *member.Claim) (int64, error) {
		ctx := c.Context()
		next, err := c.Committed(ctx) // -1: nothing committed yet
		if err != nil {
			return 0, err
		}
		next++
		if err := resource.AdmitSigned(ctx, epoch.Partition(c.Partition()), c.Token()); err != nil {
			return 0, err
		}
		return next, c.Commit(ctx, next, "")
	}
	handler := func(c *member.Claim) {
		ctx := c.Context()
		next, err := start(c)
		for err != nil {
			// A transient error (a timeout, the coordinator moving)
			// leaves the claim as it is: try again while it lives.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			next, err = start(c)
		}
		started <- fmt.Sprintf("%v: committed %d", c, next)

		<-ctx.Done()
		if errors.Is(context.Cause(ctx), member.ErrRevoked) {
			// A graceful hand-off: the token is still valid, commit the
			// final position before returning.
			_ = c.Commit(context.Background(), next+1, "")
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := member.Join(ctx, member.Config{
		Brokers:        cluster.ListenAddrs(),
		Group:          "workers",
		Topics:         []string{"jobs"},
		SessionTimeout: 3 * time.Second, // the coordinator's
	}, handler)
	if err != nil {
		panic(err)
	}

	var lines []string
	for range 4 {
		select {
		case l := <-started:
			lines = append(lines, l)
		case <-time.After(time.Minute):
			panic(fmt.Sprintf("a minute in, only %d of 4 claims started: %q", len(lines), lines))
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}

	// Close revokes every claim, waits for the handlers, and leaves.
	if err := s.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("claims after close:", len(s.Claims()))
	// Output:
	// jobs/0@1: committed 0
	// jobs/1@1: committed 0
	// jobs/2@1: committed 0
	// jobs/3@1: committed 0
	// claims after close: 0
}

// The core alone: a pure state machine that the kgo shell, the simulator
// and tests drive with their own clocks. Here the test plays the
// coordinator.
func ExampleMachine() {
	t0 := time.Unix(0, 0)
	work := [16]byte{1} // the topic's ID, as the coordinator knows it
	m := member.NewMachine(member.MachineConfig{
		Group: "workers", MemberID: "m1", Topics: []string{"jobs"},
		SessionTimeout: 10 * time.Second, MaxDrift: 0.01, SuspectMargin: 100 * time.Millisecond,
		RebalanceTimeout: 30 * time.Second, RequestTimeout: time.Second,
		TopicIDs: map[string][16]byte{"jobs": work},
	})
	show := func() {
		rd := m.Ready()
		if rd.Heartbeat != nil {
			fmt.Println("send heartbeat at epoch", rd.Heartbeat.MemberEpoch)
		}
		for _, c := range rd.Changes {
			fmt.Printf("%s/%d %v -> %v token %v (%s)\n", c.Topic, c.Partition, c.From, c.To, c.Token, c.Cause)
		}
		if rd.NextTick.IsZero() {
			fmt.Println("no timer: waiting for the response")
		} else {
			fmt.Println("next tick", rd.NextTick.Sub(t0))
		}
		m.Advance(rd)
	}

	m.Start(t0)
	show()

	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberEpoch, resp.HeartbeatIntervalMillis = 5, 2000
	resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{
		Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{{TopicID: work, Partitions: []int32{0}}},
	}
	m.Step(t0.Add(10*time.Millisecond), member.HeartbeatResponse{Resp: resp})
	show()

	m.Step(t0.Add(20*time.Millisecond), member.Started{Topic: "jobs", Partition: 0, Token: 5})
	show()

	// No answer to anything from now on: at 9.8 s after the send of the
	// last acknowledged heartbeat, the claim goes Suspect.
	m.Step(t0.Add(time.Second), member.HeartbeatFailed{Err: errors.New("timeout")})
	m.Tick(t0.Add(9800 * time.Millisecond))
	for _, c := range m.Ready().Changes {
		fmt.Printf("%s/%d %v -> %v (%s)\n", c.Topic, c.Partition, c.From, c.To, c.Cause)
	}
	// Output:
	// send heartbeat at epoch 0
	// no timer: waiting for the response
	// send heartbeat at epoch 5
	// jobs/0 Unowned -> Pending token 5 (assigned)
	// next tick 9.8s
	// jobs/0 Pending -> Owned token 5 (started)
	// next tick 9.8s
	// jobs/0 Owned -> Suspect (deadline)
}
