package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConnectionLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 2 })
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	a.roundTrip(kmsg.NewPtrApiVersionsRequest())
	b.roundTrip(kmsg.NewPtrApiVersionsRequest())

	refused := dial(t, ts.addr)
	refused.send(kmsg.NewPtrApiVersionsRequest())
	refused.expectClosed(5 * time.Second)
	if n := ts.metric(t, "tenure_limit_rejections_total", "limit", "connections"); n != 1 {
		t.Fatalf("connection limit rejections %v, want 1", n)
	}
	// The admitted connections keep working, and a closed one frees room.
	a.roundTrip(kmsg.NewPtrApiVersionsRequest())
	b.nc.Close()
	eventually(t, 5*time.Second, "the closed connection to be forgotten", func() bool {
		return ts.metric(t, "tenure_connections") == 1
	})
	checkAlive(t, ts.addr)
}

func TestIdleTimeout(t *testing.T) {
	// Short to keep the test quick, yet long against a stall of this
	// goroutine on a loaded machine: a stall between the dial and a send
	// longer than the timeout would close the connection for real.
	const idle = 500 * time.Millisecond
	ts := startServer(t, func(c *Config) { c.IdleTimeout = idle })
	idleConn := dial(t, ts.addr)
	// A connection is idle from the server's read of its last request,
	// which comes after the send, however late the response arrives.
	start := time.Now()
	idleConn.roundTrip(metadataRequest(12, "jobs"))
	idleConn.expectClosed(5 * time.Second)
	if d := time.Since(start); d < idle {
		t.Fatalf("closed %v after the last request, before the idle timeout (%v)", d, idle)
	}

	// A connection waiting for a held Fetch is not idle: a Fetch held
	// three idle timeouts is answered, and only then does the
	// connection go idle.
	busy := dial(t, ts.addr)
	sent := time.Now()
	busy.send(fetchRequest(12, 3*idle, "jobs", 0))
	if _, resp := busy.recv(); resp.(*kmsg.FetchResponse).ErrorCode != 0 {
		t.Fatal("held fetch failed")
	}
	if d := time.Since(sent); d < 3*idle {
		t.Fatalf("the fetch came back after %v, not held its %v", d, 3*idle)
	}
	busy.expectClosed(5 * time.Second)
	// The count follows the close by a moment.
	eventually(t, 5*time.Second, "two idle closes counted", func() bool {
		return ts.metric(t, "tenure_connections_closed_total", "reason", closeIdle) == 2
	})
}

func TestFrameSizeLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxFrameSize = 2048 })
	c := dial(t, ts.addr)
	small := metadataRequest(12, "a")
	c.roundTrip(small)
	var names []string
	for range 200 {
		names = append(names, "a-rather-long-topic-name")
	}
	big := metadataRequest(12, names...)
	if n := len(appendRequest(nil, 1, nil, big)) - 4; n <= 2048 {
		t.Fatalf("request of %d bytes is within the limit", n)
	}
	c.send(big)
	c.expectClosed(5 * time.Second)
	checkAlive(t, ts.addr)
}

// TestGroupSizeLimit: Core.MaxGroupSize is enforced by the core and
// reaches the client as GROUP_MAX_SIZE_REACHED.
func TestGroupSizeLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Core.MaxGroupSize = 1 })
	if !coreServes(t, ts, probeConsumerHeartbeat()) {
		t.Skip("the group core does not serve ConsumerGroupHeartbeat yet")
	}
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	join := func(member string) int16 {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "g"
		req.MemberID = member
		req.RebalanceTimeoutMillis = 10000
		req.SubscribedTopicNames = []string{"jobs"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return c.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	}
	if code := join("member-a-00000000000000000"); code != 0 {
		t.Fatalf("first member: error %d", code)
	}
	if code := join("member-b-00000000000000000"); code != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("second member: error %d, want GROUP_MAX_SIZE_REACHED", code)
	}
}
