package server

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// slotState is where a slot is in its life.
type slotState uint8

const (
	_           slotState = iota
	slotFree              // on the connection's free list
	slotWaiting           // queued, response not yet known
	slotDone              // queued, response known, not yet written
)

// slot is one request of a connection waiting for its response, in the
// connection's response queue. Responses leave in queue order, so a slot
// whose response is known waits for every earlier slot.
//
// A slot is the Ref the server hands to the group core: the core's Reply
// names the slot, and the server fills it. Slots are recycled per
// connection once their response is written, and never across
// connections, so a late reply to a closed connection is dropped rather
// than delivered to a stranger.
type slot struct {
	c       *conn
	corr    int32
	key     int16
	version int16
	// start is when the request's frame was read; the heartbeat
	// histogram observes from it to the response queued (conn.deliver),
	// on whichever goroutine answers.
	start time.Time

	// The fields below are guarded by c.mu.
	state slotState
	req   kmsg.Request
	resp  kmsg.Response
	// timer holds a parked Fetch until it is answered with held.
	timer *time.Timer
	held  kmsg.Response
	// seq tells a timer's delivery from a later use of the slot.
	seq uint64

	// throttle is the throttle time in milliseconds the response
	// carries (quota.go), and merge, if set, adds to the response the
	// answers for the parts of the request a handler took out before
	// handing it on (the topics of a commit the client may not read).
	// Both are applied, and cleared, as the response is written
	// (slot.outgoing).
	throttle int32
	merge    func(kmsg.Response)

	// group is the group the request is parked in, for the store-failure
	// path that must answer every request a dropped group holds.
	group atomic.Pointer[groupEntry]

	// The request and response objects that the heartbeat path reuses
	// (the request and response hooks of 12_heartbeat.go and
	// 68_consumer_group_heartbeat.go).
	hb       kmsg.HeartbeatRequest
	hbResp   kmsg.HeartbeatResponse
	cghb     kmsg.ConsumerGroupHeartbeatRequest
	cghbResp kmsg.ConsumerGroupHeartbeatResponse
}

// request returns the request object to decode a key's body into: the
// slot's own on the heartbeat path (api.request), a fresh one otherwise.
func (sl *slot) request(key int16) kmsg.Request {
	if f := apis[key].request; f != nil {
		return f(sl)
	}
	return kmsg.RequestForKey(key)
}

// response returns the slot's own response object for the core to fill on
// the heartbeat path (api.response), or nil to let the core allocate one.
func (sl *slot) response() kmsg.Response {
	if f := apis[sl.key].response; f != nil {
		return f(sl)
	}
	return nil
}

// outgoing returns the response to write for sl: its response, with the
// slot's throttle time and any answers merged in for parts of the
// request the handler took out (sl.merge). It is called once, by the
// writer, as the response is encoded.
func (sl *slot) outgoing() kmsg.Response {
	resp := sl.resp
	if sl.merge != nil {
		sl.merge(resp)
		sl.merge = nil
	}
	if sl.throttle > 0 {
		if tr, ok := resp.(kmsg.SetThrottleResponse); ok {
			if cur, _ := resp.(kmsg.ThrottleResponse).Throttle(); cur < sl.throttle {
				tr.SetThrottle(sl.throttle)
			}
		}
		sl.throttle = 0
	}
	return resp
}

// Bounds on parked requests (Config.MaxParkedPerConnection and
// MaxParkedPerGroup). A request parks when its answer waits for someone
// else: a JoinGroup for the rest of the group, a SyncGroup for the
// leader's plan, a Fetch for its MaxWait. A parked request holds its slot
// and its decoded frame, so a client that parks many, on one connection
// or through many into one group, holds memory the server cannot reclaim
// until they are answered. Over the bound, a Fetch is answered at once
// (empty, as it would be after its wait) and a JoinGroup or SyncGroup is
// answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry after a
// back-off; each refusal is counted in tenure_limit_rejections_total
// (parked_connection, parked_group).

// parkedCode answers a group request refused by a parked bound.
var parkedCode = kerr.CoordinatorLoadInProgress.Code

// parked counts c's requests parked now: in a group's core, or held.
func (c *conn) parked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, sl := range c.q[c.head:] {
		if sl.state == slotWaiting && (sl.timer != nil || sl.group.Load() != nil) {
			n++
		}
	}
	return n
}

// parkAllowed reports whether c may park one more request.
func (s *Server) parkAllowed(c *conn) bool {
	if c.parked() < s.cfg.MaxParkedPerConnection {
		return true
	}
	s.m.limits.WithLabelValues("parked_connection").Inc()
	return false
}

// parkGroupAllowed reports whether e may hold one more parked request.
// e.mu must be held.
func (s *Server) parkGroupAllowed(e *groupEntry) bool {
	if int(e.parked.Load()) < s.cfg.MaxParkedPerGroup {
		return true
	}
	s.m.limits.WithLabelValues("parked_group").Inc()
	return false
}

// enterGroup records that sl is handed to e's core, where it may park;
// unpark undoes it when the core answers it or the group drops it.
func (sl *slot) enterGroup(e *groupEntry) {
	sl.group.Store(e)
	e.parked.Add(1)
}

// unpark records that sl has left the core that held it, if any.
func (sl *slot) unpark() {
	if e := sl.group.Swap(nil); e != nil {
		e.parked.Add(-1)
	}
}
