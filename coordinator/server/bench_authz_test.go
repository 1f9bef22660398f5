package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// BenchmarkHeartbeatAuthz measures what authorization costs the heartbeat
// path: two servers in this process, one with authorization off and one
// with it on (the group allowed to User:ANONYMOUS by a prefixed binding,
// among a thousand other bindings, and the topic by a literal one), each with authzConns KIP-848 members
// on their own connections, every connection pipelining authzDepth
// steady-state ConsumerGroupHeartbeats as fast as they are answered. The
// servers take turns in windows of authzWindow, authzRounds each, so that
// the machine's other load falls on both alike. Reported: heartbeats/s of
// each and their ratio (on/off).
func BenchmarkHeartbeatAuthz(b *testing.B) {
	var bindings []acl.Binding
	for i := range 1000 {
		bindings = append(bindings, allowACL(resGroup, fmt.Sprintf("other-%d", i), fmt.Sprintf("User:u%d", i%50), opRead))
	}
	bindings = append(bindings, acl.Binding{ResourceType: resGroup, ResourceName: "bench-", PatternType: kmsg.ACLResourcePatternTypePrefixed,
		Principal: AnonymousPrincipal, Host: "*", Operation: opRead, Permission: kmsg.ACLPermissionTypeAllow},
		allowACL(resTopic, "jobs", AnonymousPrincipal, kmsg.ACLOperationAll))
	st := store.NewMemory()
	if err := st.CreateACLs(context.Background(), bindings); err != nil {
		b.Fatal(err)
	}
	off := startServerLogger(b, zap.NewNop(), func(c *Config) { c.Core.InitialRebalanceDelay = 0 })
	on := startServerLogger(b, zap.NewNop(), func(c *Config) {
		c.Core.InitialRebalanceDelay = 0
		c.Store, c.Authorization = st, true
	})
	names := [2]string{"off", "on"}
	var loads [2][]*authzLoad
	for i, ts := range []*testServer{off, on} {
		for j := range authzConns {
			loads[i] = append(loads[i], newAuthzLoad(b, ts, j))
		}
		settle(b, loads[i])
	}
	rate := takeTurns(b, func(i int, d time.Duration) (int, time.Duration) { return drive(b, loads[i], d) })
	for i := range rate {
		b.ReportMetric(rate[i], "hb/s-authz-"+names[i])
	}
	b.ReportMetric(rate[1]/rate[0], "on/off")
	b.Logf("heartbeats/s: authorization off %.0f, on %.0f (ratio %.3f)", rate[0], rate[1], rate[1]/rate[0])
}

// takeTurns runs two loads in turns (load(0, window), then load(1,
// window)), authzRounds each per iteration, and returns the rate of each:
// what each load counted over the time it took.
func takeTurns(b *testing.B, load func(i int, window time.Duration) (int, time.Duration)) [2]float64 {
	var sent [2]int
	var elapsed [2]time.Duration
	for range b.N {
		for range authzRounds {
			for i := range 2 {
				n, d := load(i, authzWindow)
				sent[i] += n
				elapsed[i] += d
			}
		}
	}
	return [2]float64{float64(sent[0]) / elapsed[0].Seconds(), float64(sent[1]) / elapsed[1].Seconds()}
}

const (
	authzConns  = 4
	authzDepth  = 16
	authzRounds = 12
	authzWindow = 250 * time.Millisecond
)

// authzLoad is one member's connection with its pipelined heartbeats.
type authzLoad struct {
	c      *rawClient
	req    *kmsg.ConsumerGroupHeartbeatRequest
	frames []byte
}

// newAuthzLoad joins member i of group bench-g on a connection of its
// own.
func newAuthzLoad(b *testing.B, ts *testServer, i int) *authzLoad {
	c := dial(b, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	req := joinHeartbeat()
	req.Group = "bench-g"
	req.MemberID = fmt.Sprintf("member-%021d", i)
	l := &authzLoad{c: c, req: req}
	l.heartbeat(b)
	l.req.SubscribedTopicNames = nil
	return l
}

// heartbeat sends the member's heartbeat and takes in the answer: the
// new epoch, and the assignment to acknowledge next time.
func (l *authzLoad) heartbeat(b *testing.B) {
	resp := l.c.roundTrip(l.req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		b.Fatalf("heartbeat: error %d", resp.ErrorCode)
	}
	l.req.MemberEpoch = resp.MemberEpoch
	l.req.Topics = nil
	if resp.Assignment != nil {
		l.req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range resp.Assignment.Topics {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = t.TopicID, t.Partitions
			l.req.Topics = append(l.req.Topics, rt)
		}
	}
}

// settle heartbeats every member until the group's assignment is done,
// then prepares each member's pipelined steady-state heartbeats.
func settle(b *testing.B, loads []*authzLoad) {
	for range 10 {
		for _, l := range loads {
			l.heartbeat(b)
		}
	}
	for _, l := range loads {
		l.req.Topics = nil
		l.frames = nil
		for range authzDepth {
			l.frames = appendRequest(l.frames, 0, nil, l.req)
		}
	}
}

// drive runs every load for d and returns the heartbeats answered and the
// time they took.
func drive(b *testing.B, loads []*authzLoad, d time.Duration) (int, time.Duration) {
	var wg sync.WaitGroup
	counts := make([]int, len(loads))
	errs := make([]error, len(loads))
	start := time.Now()
	deadline := start.Add(d)
	for i, l := range loads {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				l.c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := l.c.nc.Write(l.frames); err != nil {
					errs[i] = err
					return
				}
				for range authzDepth {
					l.c.sent[0] = l.req
					_, resp, err := l.c.tryRecv(5 * time.Second)
					if err == nil && resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
						err = fmt.Errorf("heartbeat: error %d", resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
					}
					if err != nil {
						errs[i] = err
						return
					}
					counts[i]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := 0
	for i := range loads {
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
		n += counts[i]
	}
	return n, elapsed
}
