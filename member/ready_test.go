package member

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadyAdvance checks the Ready contract: Ready returns the same Seq,
// and what it held, until Advance; Advance retires exactly what its Ready
// held, so what a Step added in between comes in the next Ready; and
// Advance of any but the current Ready panics.
func TestReadyAdvance(t *testing.T) {
	id := testTopicID("work")
	m := NewMachine(MachineConfig{
		Group: "g", MemberID: "m1", Topics: []string{"work"},
		SessionTimeout: 10 * time.Second, MaxDrift: 0.01, SuspectMargin: 100 * time.Millisecond,
		RebalanceTimeout: 30 * time.Second, RequestTimeout: time.Second,
		TopicIDs: map[string][16]byte{"work": id},
	})
	now := t0
	m.Start(now)
	rd1 := m.Ready()
	if rd1.Seq != 1 || rd1.Heartbeat == nil {
		t.Fatalf("first Ready: Seq %d, heartbeat %v; want Seq 1 with the join heartbeat", rd1.Seq, rd1.Heartbeat)
	}
	if again := m.Ready(); again.Seq != 1 || again.Heartbeat != rd1.Heartbeat {
		t.Fatalf("Ready before Advance: Seq %d, same heartbeat %v; want Ready 1 again", again.Seq, again.Heartbeat == rd1.Heartbeat)
	}
	mustPanic(t, "Advance of a Ready not yet returned", func() { m.Advance(Ready{Seq: 2}) })
	m.Advance(rd1)
	if m.HasReady() {
		t.Fatalf("HasReady after Advance of everything: %+v", m.Ready())
	}
	mustPanic(t, "a second Advance of the same Ready", func() { m.Advance(rd1) })

	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberEpoch, resp.HeartbeatIntervalMillis = 3, 1000
	at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
	at.TopicID, at.Partitions = id, []int32{0, 1}
	resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{at}}
	m.Step(now, HeartbeatResponse{Resp: resp, Req: rd1.Heartbeat})
	rd2 := m.Ready()
	if got := describeChanges(rd2.Changes); rd2.Seq != 2 || got != "[work/0 Unowned->Pending work/1 Unowned->Pending]" {
		t.Fatalf("Ready 2: Seq %d, changes %s", rd2.Seq, got)
	}
	// The shell reports partition 0 started while it performs Ready 2:
	// that change belongs to Ready 3.
	m.Step(now, Started{Topic: "work", Partition: 0, Token: rd2.Changes[0].Token})
	if got := describeChanges(rd2.Changes); got != "[work/0 Unowned->Pending work/1 Unowned->Pending]" {
		t.Fatalf("a Step changed the Ready the shell holds: %s", got)
	}
	m.Advance(rd2)
	rd3 := m.Ready()
	if got := describeChanges(rd3.Changes); rd3.Seq != 3 || got != "[work/0 Pending->Owned]" {
		t.Fatalf("Ready 3: Seq %d, changes %s; want only what the Step after Ready 2 added", rd3.Seq, got)
	}
	m.Advance(rd3)
	if rd := m.Ready(); len(rd.Changes) != 0 || rd.Heartbeat != nil {
		t.Fatalf("Ready 4 holds %s, heartbeat %v: Advance of Ready 3 retired less than it held", describeChanges(rd.Changes), rd.Heartbeat)
	}
}

func describeChanges(cs []ClaimChange) string {
	out := "["
	for i, c := range cs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s/%d %v->%v", c.Topic, c.Partition, c.From, c.To)
	}
	return out + "]"
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}
