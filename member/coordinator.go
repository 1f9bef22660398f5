package member

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The session finds its group's coordinator itself and heartbeats that
// broker directly, rather than through kgo's coordinator cache:
//
//   - kgo sends FindCoordinator (and Metadata) to one broker of its
//     choosing, round robin over the brokers and the seeds. When a node
//     of an HA set freezes (SIGSTOP, a cut network) while its
//     connections stay open, a lookup that lands on it waits out kgo's
//     RequestTimeoutOverhead (10 s) before kgo tries another broker,
//     and every heartbeat queues behind that lookup: a member joining
//     while its coordinator froze failed its join heartbeats for 22 s.
//     The session asks every broker at once and takes the first answer.
//   - a surviving tenure node holds a FindCoordinator while no live node
//     coordinates the group (up to its CoordinatorWait, at most 8 s for
//     tenure serve), so the lookup outlives one heartbeat's
//     RequestTimeout: it runs on its own, up to coordinatorLookupWait,
//     and each heartbeat waits for it only up to its own deadline, so
//     the next heartbeat finds the answer.

// coordinatorLookupWait bounds one coordinator lookup: above the longest
// a tenure node holds a FindCoordinator (8 s).
const coordinatorLookupWait = 15 * time.Second

// coordinator is the session's view of its group's coordinator.
type coordinator struct {
	mu   sync.Mutex
	id   int32         // the coordinator's broker ID, -1 if unknown
	err  error         // why the last lookup found none
	wait chan struct{} // closed when the running lookup ends; nil if none runs
	// closed is set once the session's loop has ended: no lookup starts
	// after it, so that none starts while Close waits for the session's
	// goroutines (s.bg), an Add racing a Wait.
	closed bool
}

// coordinatorID returns the group's coordinator, starting a lookup if none
// is known and waiting for it until ctx ends; ErrClosed if none is known
// once the session's loop has ended (a handler's commit during Close).
func (s *Session) coordinatorID(ctx context.Context) (int32, error) {
	c := &s.coord
	c.mu.Lock()
	if c.id >= 0 {
		id := c.id
		c.mu.Unlock()
		return id, nil
	}
	if c.wait == nil {
		if c.closed {
			c.mu.Unlock()
			return -1, ErrClosed
		}
		c.wait = make(chan struct{})
		s.bg.Add(1)
		go s.lookupCoordinator(c.wait)
	}
	wait := c.wait
	c.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id < 0 {
		return -1, c.err
	}
	return c.id, nil
}

func (s *Session) lookupCoordinator(done chan struct{}) {
	defer s.bg.Done()
	ctx, cancel := context.WithTimeout(s.loopCtx, coordinatorLookupWait)
	id, err := findCoordinator(ctx, s.cl, s.cfg.Group)
	cancel()
	c := &s.coord
	c.mu.Lock()
	c.id, c.err, c.wait = id, err, nil
	c.mu.Unlock()
	close(done)
}

// closeLookups refuses every coordinator lookup from now on.
func (s *Session) closeLookups() {
	c := &s.coord
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// forgetCoordinator drops coordinator id after a transport error or an
// answer that it does not coordinate the group; the next heartbeat looks
// it up again.
func (s *Session) forgetCoordinator(id int32) {
	c := &s.coord
	c.mu.Lock()
	if c.id == id {
		c.id = -1
	}
	c.mu.Unlock()
}

// errNoCoordinator: no broker named a coordinator.
var errNoCoordinator = errors.New("no broker named the group's coordinator")

// findCoordinator asks every broker cl knows for group's coordinator at
// once (firstAnswer) and returns the first broker ID named.
func findCoordinator(ctx context.Context, cl *kgo.Client, group string) (int32, error) {
	var id int32 = -1
	_, _, err := firstAnswer(ctx, cl, func() kmsg.Request {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		req.CoordinatorKeys = []string{group}
		return req
	}, func(resp kmsg.Response) error {
		got, err := coordinatorOf(resp.(*kmsg.FindCoordinatorResponse), nil)
		if err == nil {
			id = got
		}
		return err
	})
	if err != nil {
		return -1, err
	}
	return id, nil
}

// firstAnswer sends a request made by newReq to every broker cl knows (its
// seeds, until it has read Metadata) at once, and returns the first
// answer that accept takes (nil error), with the request that got it;
// else the last error. A broker that never answers holds up nobody: kgo
// itself sends such requests to one broker of its choosing, and waits
// out its RequestTimeoutOverhead on a frozen one. accept is called on
// one goroutine at a time.
func firstAnswer(ctx context.Context, cl *kgo.Client, newReq func() kmsg.Request, accept func(kmsg.Response) error) (kmsg.Response, kmsg.Request, error) {
	brokers := cl.DiscoveredBrokers()
	if len(brokers) == 0 {
		brokers = cl.SeedBrokers()
	}
	if len(brokers) == 0 {
		req := newReq()
		resp, err := cl.Request(ctx, req)
		if err == nil {
			err = accept(resp)
		}
		return resp, req, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		req  kmsg.Request
		resp kmsg.Response
		err  error
	}
	answers := make(chan answer, len(brokers))
	for _, b := range brokers {
		go func() {
			req := newReq()
			resp, err := b.Request(ctx, req)
			answers <- answer{req, resp, err}
		}()
	}
	err := errNoCoordinator
	for range brokers {
		a := <-answers
		if a.err == nil {
			if a.err = accept(a.resp); a.err == nil {
				return a.resp, a.req, nil
			}
		}
		err = a.err
	}
	return nil, nil, err
}

// coordinatorOf reads a FindCoordinator answer for one key.
func coordinatorOf(resp *kmsg.FindCoordinatorResponse, err error) (int32, error) {
	if err != nil {
		return -1, err
	}
	code, id := resp.ErrorCode, resp.NodeID
	if len(resp.Coordinators) > 0 {
		code, id = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return -1, err
	}
	if id < 0 {
		return -1, errNoCoordinator
	}
	return id, nil
}

// staleCoordinator reports whether a heartbeat's outcome says its
// coordinator is gone: a transport error, or an answer that it does not
// (or not yet) coordinate the group.
func staleCoordinator(err error, code int16) bool {
	if err != nil {
		return true
	}
	e := kerr.ErrorForCode(code)
	return errors.Is(e, kerr.NotCoordinator) || errors.Is(e, kerr.CoordinatorNotAvailable) ||
		errors.Is(e, kerr.CoordinatorLoadInProgress)
}

// staleAddress reports whether an outcome from the broker kgo dials for
// the coordinator's ID may mean that kgo dials the wrong address: a
// transport error (the node died and the survivors' Metadata points its
// ID elsewhere), or NOT_COORDINATOR. A tenure node that stood in for a
// departed one aliases the departed node's ID to its own address in its
// Metadata; a member that read that Metadata keeps dialing the stand-in
// under the old ID once the departed node coordinates again, every
// lookup names that ID, the stand-in answers NOT_COORDINATOR, and kgo
// reads Metadata again only every MetadataMaxAge (5 min): a worker was
// left unserved for the rest of a 13 s chaos run. COORDINATOR_NOT_AVAILABLE
// and LOAD_IN_PROGRESS come from the right node, which is not ready yet.
//
// The caller forces a Metadata refresh. That is cheap at a takeover,
// when every member of a fleet gets NOT_COORDINATOR once: kgo's
// ForceMetadataRefresh only queues a trigger (a send that drops when one
// is queued), its metadata loop runs one request at a time, drains the
// triggers that came meanwhile and spaces two by 10 ms, so a member asks
// at most once per answer and never piles up; the member's client tracks
// no topics, so its Metadata is the broker list only; and a member whose
// coordinator died (the common takeover) refreshed on the transport
// error already.
func staleAddress(err error, code int16) bool {
	return err != nil || errors.Is(kerr.ErrorForCode(code), kerr.NotCoordinator)
}

// Requests about the group's offsets go to the coordinator the session
// heartbeats, too (toCoordinator), not through kgo's coordinator cache:
// kgo looks its coordinator up on one broker of its choosing and keeps
// it until a request fails, so a commit after the coordinator froze went
// to the frozen node and waited out kgo's 10 s RequestTimeoutOverhead
// while the heartbeats had long moved on.

// coordinatorRetryWait bounds how long one commit or offset read keeps
// finding the group's coordinator again after it moved, as kgo's
// RetryTimeout (30 s) bounds its own retries.
const coordinatorRetryWait = 30 * time.Second

// coordinatorBackoff is the first pause between two tries of a request
// whose coordinator moved; it doubles up to a second.
const coordinatorBackoff = 50 * time.Millisecond

// toCoordinator sends req to the group's coordinator (coordinatorID, the
// broker the heartbeats go to), each try bounded by RequestTimeout, and
// returns its answer. A transport error, or an answer whose code (read
// by code) says the broker does not or not yet coordinate the group,
// forgets that coordinator, as a heartbeat's would, and the request goes
// again to the one found next, until ctx ends or coordinatorRetryWait
// passes; then the last error is returned. Once the session has ended
// there is no next one to find: ErrClosed. Any other answer, stale
// epochs included, is the caller's to read.
func (s *Session) toCoordinator(ctx context.Context, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, coordinatorRetryWait)
	defer cancel()
	backoff := coordinatorBackoff
	for {
		id, err := s.coordinatorID(ctx)
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		if err == nil {
			tctx, tcancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
			var resp kmsg.Response
			resp, err = s.cl.Broker(int(id)).Request(tctx, req)
			tcancel()
			var c int16
			if err == nil {
				c = code(resp)
			}
			if !staleCoordinator(err, c) {
				return resp, nil
			}
			s.forgetCoordinator(id)
			if staleAddress(err, c) {
				s.cl.ForceMetadataRefresh()
			}
			if err == nil {
				err = kerr.ErrorForCode(c)
			}
			s.log.Debug("request to the group's coordinator failed; finding it again",
				zap.Int32("coordinator", id), zap.Int16("key", req.Key()), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
