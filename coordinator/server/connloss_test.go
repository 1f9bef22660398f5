package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// connLossServer starts a server with a connection-loss grace and a session
// timeout far above it, with topic jobs created.
func connLossServer(t *testing.T, grace time.Duration) *testServer {
	ts := startServer(t, func(c *Config) {
		c.Core.ConnLossGrace = grace
		c.Core.ConsumerSessionTimeout = time.Minute
	})
	dial(t, ts.addr).roundTrip(metadataRequest(12, "jobs"))
	return ts
}

func cgJoin(t *testing.T, c *rawClient, id string) {
	t.Helper()
	if r := c.roundTrip(cgHeartbeat("g", id, 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("join %s: error %d", id, r.ErrorCode)
	}
}

// TestConnLossExpelsDeadMember: a member whose only connection closes is
// expelled a grace later, with the reason connection-closed, though its
// session has most of a minute to run; the other member stays.
func TestConnLossExpelsDeadMember(t *testing.T) {
	ts := connLossServer(t, 200*time.Millisecond)
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	cgJoin(t, a, "member-a-000000000000000")
	cgJoin(t, b, "member-b-000000000000000")
	a.nc.Close()
	eventually(t, 10*time.Second, "the member of the closed connection to be expelled", func() bool {
		return ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed") == 1
	})
	if n := ts.metric(t, "tenure_group_members", "group", "g"); n != 1 {
		t.Fatalf("%v members after one was expelled, want 1", n)
	}
	r := b.roundTrip(cgHeartbeat("g", "member-b-000000000000000", 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 && r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("the other member's heartbeat: error %d", r.ErrorCode)
	}
}

// TestConnLossKeepsReconnectedMember: a member whose connection closes and
// that goes on heartbeating on a new one keeps its place past the grace.
func TestConnLossKeepsReconnectedMember(t *testing.T) {
	grace := 300 * time.Millisecond
	ts := connLossServer(t, grace)
	a := dial(t, ts.addr)
	const id = "member-a-000000000000000"
	cgJoin(t, a, id)
	a.nc.Close()
	a2 := dial(t, ts.addr)
	epoch := int32(1)
	for end := time.Now().Add(5 * grace); time.Now().Before(end); time.Sleep(grace / 6) {
		r := a2.roundTrip(cgHeartbeat("g", id, epoch)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat on the new connection: error %d", r.ErrorCode)
		}
		epoch = r.MemberEpoch
	}
	if n := ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed"); n != 0 {
		t.Fatalf("%v members expelled for a closed connection, want 0", n)
	}
}

// TestConnLossIgnoresOtherConnections: only the connection of a member's
// latest request counts. A member that joined on one connection and sent
// its latest request on another is not expelled when the first closes
// (kgo closes its idle join connection under healthy members), while the
// member of a connection closed after it is.
func TestConnLossIgnoresOtherConnections(t *testing.T) {
	grace := 100 * time.Millisecond
	ts := connLossServer(t, grace)
	join, beat, other := dial(t, ts.addr), dial(t, ts.addr), dial(t, ts.addr)
	const id = "member-a-000000000000000"
	cgJoin(t, join, id)
	if r := beat.roundTrip(cgHeartbeat("g", id, 1)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: error %d", r.ErrorCode)
	}
	cgJoin(t, other, "member-b-000000000000000")
	join.nc.Close()
	other.nc.Close()
	eventually(t, 10*time.Second, "the member of the later close to be expelled", func() bool {
		return ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed") == 1
	})
	time.Sleep(3 * grace)
	if n := ts.metric(t, "tenure_members_expired_total", "reason", "connection-closed"); n != 1 {
		t.Fatalf("%v members expelled for a closed connection, want 1", n)
	}
	r := beat.roundTrip(cgHeartbeat("g", id, 1)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode == kerr.UnknownMemberID.Code {
		t.Fatalf("the member was expelled when a connection it no longer used closed")
	}
}

// TestConnLossOff: with the grace 0 a closed connection expels nobody (0
// means off, not "at once").
func TestConnLossOff(t *testing.T) {
	ts := connLossServer(t, 0)
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	cgJoin(t, a, "member-a-000000000000000")
	a.nc.Close()
	time.Sleep(200 * time.Millisecond) // ample for the close to reach the group

	cgJoin(t, b, "member-b-000000000000000")
	if n := ts.metric(t, "tenure_group_members", "group", "g"); n != 2 {
		t.Fatalf("%v members, want 2", n)
	}
}
