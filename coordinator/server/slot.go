package server

import (
	"sync/atomic"
	"time"

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
