package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/benchcpu"
)

// BenchmarkConsumerHeartbeat measures a steady-state KIP-848 heartbeat
// round trip over loopback: one member, sequential requests. cpu-ns/op is
// the whole process's CPU (client and server) per heartbeat.
func BenchmarkConsumerHeartbeat(b *testing.B) { benchHeartbeats(b, 1) }

// BenchmarkConsumerHeartbeatPipelined sends heartbeats 16 at a time on one
// connection, so the server answers each batch with one write.
func BenchmarkConsumerHeartbeatPipelined(b *testing.B) { benchHeartbeats(b, 16) }

func benchHeartbeats(b *testing.B, depth int) {
	ts := startServerLogger(b, zap.NewNop(), func(c *Config) { c.Core.InitialRebalanceDelay = 0 })
	c := dial(b, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	req := joinHeartbeat()
	resp := c.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		b.Skipf("join failed with %d (core not ready?)", resp.ErrorCode)
	}
	// Acknowledge the assignment, then heartbeat with nothing changed,
	// as kgo does.
	req.MemberEpoch = resp.MemberEpoch
	req.SubscribedTopicNames = nil
	for _, t := range resp.Assignment.Topics {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t.TopicID, t.Partitions
		req.Topics = append(req.Topics, rt)
	}
	resp = c.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	req.Topics = nil
	req.MemberEpoch = resp.MemberEpoch
	var frames []byte
	for range depth {
		frames = appendRequest(frames, 0, nil, req)
	}
	c.sent[0] = req
	b.ReportAllocs()
	b.ResetTimer()
	start := benchcpu.Process()
	for i := 0; i < b.N; i += depth {
		c.write(frames)
		for range depth {
			c.sent[0] = req
			if _, resp, err := c.tryRecv(5 * time.Second); err != nil || resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
				b.Fatalf("heartbeat: %v %+v", err, resp)
			}
		}
	}
	b.ReportMetric(float64(benchcpu.Process()-start)/float64(b.N), "cpu-ns/op")
}
