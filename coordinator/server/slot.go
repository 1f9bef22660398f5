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
	// timer holds a parked Fetch.
	timer *time.Timer
	// seq tells a timer's delivery from a later use of the slot.
	seq uint64

	// group is the group the request is parked in, for the store-failure
	// path that must answer every request a dropped group holds.
	group atomic.Pointer[groupEntry]

	// Reused request and response objects of the heartbeat path, so a
	// steady-state heartbeat allocates only the strings it decodes.
	hb       kmsg.HeartbeatRequest
	hbResp   kmsg.HeartbeatResponse
	cghb     kmsg.ConsumerGroupHeartbeatRequest
	cghbResp kmsg.ConsumerGroupHeartbeatResponse
}

// request returns the request object to decode a key's body into: a
// reused one on the heartbeat path, a fresh one otherwise. It resets the
// reused ones to their zero value, so no slice of an earlier request
// (which the core may keep) is written into.
func (sl *slot) request(key int16) kmsg.Request {
	switch key {
	case 12:
		sl.hb = kmsg.HeartbeatRequest{}
		return &sl.hb
	case 68:
		sl.cghb = kmsg.ConsumerGroupHeartbeatRequest{}
		return &sl.cghb
	}
	return kmsg.RequestForKey(key)
}

// response returns a reused response object for the heartbeat path, or nil
// to let the core allocate one.
func (sl *slot) response() kmsg.Response {
	switch sl.req.(type) {
	case *kmsg.HeartbeatRequest:
		sl.hbResp = kmsg.HeartbeatResponse{Version: sl.version}
		sl.hbResp.Default()
		return &sl.hbResp
	case *kmsg.ConsumerGroupHeartbeatRequest:
		sl.cghbResp = kmsg.ConsumerGroupHeartbeatResponse{Version: sl.version}
		sl.cghbResp.Default()
		return &sl.cghbResp
	}
	return nil
}
