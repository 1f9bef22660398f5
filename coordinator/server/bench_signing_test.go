package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/epoch/grantwire"
)

// BenchmarkHeartbeatSigning measures what signing grants costs the
// heartbeat path: two servers in this process, one with SignGrants off
// and one with it on, each with authzConns KIP-848 members (of one group,
// on one 64-partition topic) on their own connections, every connection
// pipelining authzDepth steady-state ConsumerGroupHeartbeats as fast as
// they are answered. Only grants are signed, so the steady state signs
// nothing: what the "on" server pays is the core's one comparison per
// heartbeat (the member's assignment against what it was granted). The
// servers take turns in windows of authzWindow, authzRounds each (the
// machine's other load falls on both alike). Reported: heartbeats/s of
// each and their ratio (on/off).
//
//	go test -run '^$' -bench BenchmarkHeartbeatSigning -benchtime 3x ./coordinator/server/
func BenchmarkHeartbeatSigning(b *testing.B) {
	off := startServerLogger(b, zap.NewNop(), func(c *Config) { c.Core.InitialRebalanceDelay = 0 })
	on := startServerLogger(b, zap.NewNop(), func(c *Config) {
		c.Core.InitialRebalanceDelay = 0
		c.Store, c.SignGrants = store.NewMemory(), true
	})
	var loads [2][]*authzLoad
	for i, ts := range []*testServer{off, on} {
		for j := range authzConns {
			loads[i] = append(loads[i], newAuthzLoad(b, ts, j))
		}
		settle(b, loads[i])
	}
	if n := on.metric(b, "tenure_grants_signed_total"); n < 64 {
		b.Fatalf("the signing server signed %v grants while its group formed, want at least 64", n)
	}
	rate := takeTurns(b, func(i int, d time.Duration) (int, time.Duration) { return drive(b, loads[i], d) })
	b.ReportMetric(rate[0], "hb/s-signing-off")
	b.ReportMetric(rate[1], "hb/s-signing-on")
	b.ReportMetric(rate[1]/rate[0], "on/off")
	b.Logf("steady heartbeats/s: signing off %.0f, on %.0f (ratio %.3f)", rate[0], rate[1], rate[1]/rate[0])
}

// BenchmarkJoinSigning is the other end: every request is a join of a new
// member into a new group, whose answer grants all 64 partitions of the
// topic, so the "on" server signs 64 grants per request. Two servers (off,
// on) take turns in windows of authzWindow, authzRounds each, one
// connection each pipelining authzDepth joins. Reported: joins/s of each,
// their ratio, and the signing server's time per signed grant (the
// difference in time per join over 64).
//
//	go test -run '^$' -bench BenchmarkJoinSigning -benchtime 1x ./coordinator/server/
func BenchmarkJoinSigning(b *testing.B) {
	off := startServerLogger(b, zap.NewNop(), func(c *Config) { c.Core.InitialRebalanceDelay = 0 })
	on := startServerLogger(b, zap.NewNop(), func(c *Config) {
		c.Core.InitialRebalanceDelay = 0
		c.Store, c.SignGrants = store.NewMemory(), true
	})
	conns := [2]*rawClient{dial(b, off.addr), dial(b, on.addr)}
	for _, c := range conns {
		c.roundTrip(metadataRequest(12, "jobs"))
	}
	seq := 0
	join := func(c *rawClient, signed bool, d time.Duration) (int, time.Duration) {
		start := time.Now()
		n := 0
		for time.Since(start) < d {
			var frames []byte
			reqs := make([]*kmsg.ConsumerGroupHeartbeatRequest, authzDepth)
			for k := range reqs {
				seq++
				req := joinHeartbeat()
				req.Group = fmt.Sprintf("join-%d", seq)
				reqs[k] = req
				c.corr++
				c.sent[c.corr] = req
				frames = appendRequest(frames, c.corr, nil, req)
			}
			c.write(frames)
			for range reqs {
				_, resp := c.recv()
				r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
				if r.ErrorCode != 0 {
					b.Fatalf("join: error %d", r.ErrorCode)
				}
				gs, ok, err := grantwire.From(&r.UnknownTags)
				if err != nil || ok != signed || signed && len(gs.Grants) != 64 {
					b.Fatalf("join answered with grants %d, %v, %v; signing %v", len(gs.Grants), ok, err, signed)
				}
				n++
			}
		}
		return n, time.Since(start)
	}
	rate := takeTurns(b, func(i int, d time.Duration) (int, time.Duration) { return join(conns[i], i == 1, d) })
	perGrant := (1/rate[1] - 1/rate[0]) / 64
	b.ReportMetric(rate[0], "joins/s-signing-off")
	b.ReportMetric(rate[1], "joins/s-signing-on")
	b.ReportMetric(rate[1]/rate[0], "on/off")
	b.ReportMetric(perGrant*1e6, "µs/grant")
	b.Logf("joins of 64 partitions/s: signing off %.0f, on %.0f (ratio %.3f); %.1f µs per signed grant", rate[0], rate[1], rate[1]/rate[0], perGrant*1e6)
}
