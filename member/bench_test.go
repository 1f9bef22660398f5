package member

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchMachine returns a member that owns partitions 0..n-1 of "work",
// with its first heartbeats answered.
func benchMachine(b *testing.B, n int) (*Machine, time.Time) {
	id := testTopicID("work")
	m := NewMachine(MachineConfig{
		Group: "g", MemberID: "m1", Topics: []string{"work"},
		SessionTimeout: 10 * time.Second, MaxDrift: 0.01, SuspectMargin: 100 * time.Millisecond,
		RebalanceTimeout: 30 * time.Second, RequestTimeout: time.Second,
		TopicIDs: map[string][16]byte{"work": id},
	})
	now := t0
	m.Start(now)
	m.Advance(m.Ready())
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberEpoch, resp.HeartbeatIntervalMillis = 3, 1000
	at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
	at.TopicID = id
	for p := range n {
		at.Partitions = append(at.Partitions, int32(p))
	}
	resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{at}}
	m.Step(now, HeartbeatResponse{Resp: resp})
	rd := m.Ready()
	for _, c := range rd.Changes {
		m.Step(now, Started{Topic: c.Topic, Partition: c.Partition, Token: c.Token})
	}
	m.Advance(rd)
	resp.Assignment = nil
	m.Step(now, HeartbeatResponse{Resp: resp})
	m.Advance(m.Ready())
	return m, now
}

// BenchmarkMachineHeartbeat is the steady state of a member that owns 16
// partitions: the heartbeat falls due, is emitted, and its answer (no
// change) is stepped in.
func BenchmarkMachineHeartbeat(b *testing.B) {
	m, now := benchMachine(b, 16)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberEpoch, resp.HeartbeatIntervalMillis = 3, 1000
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		m.Tick(now)
		rd := m.Ready()
		if rd.Heartbeat == nil {
			b.Fatal("no heartbeat")
		}
		m.Advance(rd)
		m.Step(now.Add(time.Millisecond), HeartbeatResponse{Resp: resp, Req: rd.Heartbeat})
		rd = m.Ready()
		if len(rd.Changes) != 0 {
			b.Fatal("changes in the steady state")
		}
		m.Advance(rd)
	}
}

// BenchmarkMachineFullHeartbeat answers with the whole assignment (64
// partitions, unchanged), as after a failure.
func BenchmarkMachineFullHeartbeat(b *testing.B) {
	m, now := benchMachine(b, 64)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberEpoch, resp.HeartbeatIntervalMillis = 3, 1000
	at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
	at.TopicID = testTopicID("work")
	for p := range 64 {
		at.Partitions = append(at.Partitions, int32(p))
	}
	resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{at}}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		m.Tick(now)
		rd := m.Ready()
		m.Advance(rd)
		m.Step(now.Add(time.Millisecond), HeartbeatResponse{Resp: resp, Req: rd.Heartbeat})
		m.Advance(m.Ready())
	}
}
