package server

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-4.
//
// Every group's coordinator is this node, or in an HA set the leader, or
// with shards the owner of the group's shard (while there is none,
// COORDINATOR_NOT_AVAILABLE), at the address it advertises on
// the client's listener. v0-3 carry one key, v4 a batch
// (KIP-699). Only group coordinators (type 0) exist: a transaction
// coordinator lookup is INVALID_REQUEST, as Kafka answers an unknown type.
//
// Authorization: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED
// for its key, before anything else is said of it.
//
// In an HA set, while no live node coordinates a key asked for (the
// coordinator just died, or is probed down, and no other node has taken
// its groups yet), the request is held, up to Config.CoordinatorWait, and
// answered as soon as every key has a live coordinator: clients back off
// after COORDINATOR_NOT_AVAILABLE, some for long, and some give up after
// a few. Past the wait it is answered as it stands then.

func init() {
	register(api{
		key: 10, min: 0, max: 4,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			req := sl.req.(*kmsg.FindCoordinatorRequest)
			resp := s.handleFindCoordinator(c, req, now)
			if s.view == nil || s.cfg.CoordinatorWait <= 0 || !s.awaitingCoordinator(req, resp, now) || !s.parkAllowed(c) {
				c.respond(sl, resp)
				return
			}
			s.m.findHeld.Inc()
			c.holdFind(sl, resp, func() (kmsg.Response, bool) {
				now := time.Now()
				r := s.handleFindCoordinator(c, req, now)
				return r, !s.awaitingCoordinator(req, r, now)
			}, s.cfg.CoordinatorWait, s.view.changes)
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			r := req.(*kmsg.FindCoordinatorRequest)
			resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
			if r.Version <= 3 {
				resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
				return resp
			}
			for _, key := range r.CoordinatorKeys {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code
				resp.Coordinators = append(resp.Coordinators, c)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			r := resp.(*kmsg.FindCoordinatorResponse)
			return cmp.Or(r.ErrorCode, firstCode(r.Coordinators, func(c *kmsg.FindCoordinatorResponseCoordinator) int16 { return c.ErrorCode }))
		},
	})
}

func (s *Server) handleFindCoordinator(cn *conn, req *kmsg.FindCoordinatorRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version <= 3 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		coord, known := s.coordinatorNode(key, now)
		var host string
		var port int32
		if known {
			// A coordinator without the client's listener cannot be
			// reached by the client: as if there were none (Kafka).
			host, port, known = coord.hostPortOn(cn.ln.Name)
		}
		if req.CoordinatorType == 0 && !s.authorized(cn, 10, resGroup, key, opDescribe) {
			c.ErrorCode = kerr.GroupAuthorizationFailed.Code
			c.NodeID, c.Port = -1, -1
		} else if req.CoordinatorType != 0 {
			c.ErrorCode = kerr.InvalidRequest.Code
			msg := "tenure coordinates consumer groups only"
			c.ErrorMessage = &msg
		} else if known {
			c.NodeID = coord.ID
			c.Host, c.Port = host, port
		} else {
			// No node leads: an election is under way, or etcd lost
			// its quorum. Retriable: the client asks again.
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			c.NodeID, c.Port = -1, -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version <= 3 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		if c.ErrorCode != 0 {
			resp.NodeID, resp.Host, resp.Port = -1, "", -1
		}
		resp.Coordinators = nil
	}
	return resp
}

// awaitingCoordinator reports whether resp, the answer to req, says that
// a key has no live coordinator yet (rather than one the client cannot
// reach on its listener, which waiting does not change).
func (s *Server) awaitingCoordinator(req *kmsg.FindCoordinatorRequest, r kmsg.Response, now time.Time) bool {
	resp := r.(*kmsg.FindCoordinatorResponse)
	if req.Version <= 3 {
		if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			return false
		}
		_, known := s.coordinatorNode(req.CoordinatorKey, now)
		return !known
	}
	for _, c := range resp.Coordinators {
		if c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			continue
		}
		if _, known := s.coordinatorNode(c.Key, now); !known {
			return true
		}
	}
	return false
}

// holdFindRecheck is how often a held FindCoordinator looks again without
// a change of the view: a term of this node that starts loading.
const holdFindRecheck = 100 * time.Millisecond

// holdFind parks sl, answered with resp, for at most wait: each time the
// view changes (changes) or every holdFindRecheck, answer recomputes the
// response and says whether it is ready; once it is, or at the end of the
// wait, sl is answered with it. At shutdown sl is answered with resp.
func (c *conn) holdFind(sl *slot, resp kmsg.Response, answer func() (kmsg.Response, bool), wait time.Duration, changes func() <-chan struct{}) {
	c.mu.Lock()
	if c.closed || sl.state != slotWaiting {
		c.mu.Unlock()
		return
	}
	seq := sl.seq
	sl.held = resp
	// The timer marks the slot parked (conn.parked) and bounds the wait.
	sl.timer = time.AfterFunc(wait, func() {
		r, _ := answer()
		c.deliver(sl, r, seq, true)
	})
	c.mu.Unlock()
	go func() {
		tick := time.NewTicker(holdFindRecheck)
		defer tick.Stop()
		for {
			ch := changes()
			if r, ok := answer(); ok {
				c.deliver(sl, r, seq, true)
				return
			}
			select {
			case <-ch:
			case <-tick.C:
			case <-c.done:
				return
			}
			c.mu.Lock()
			over := c.closed || sl.seq != seq || sl.state != slotWaiting
			c.mu.Unlock()
			if over {
				return
			}
		}
	}()
}
