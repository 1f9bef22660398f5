package etcdstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Combiner sends the write transactions of several stores on one client
// (the shards a node owns, a store each) to etcd as one request: a
// transaction whose operations are the stores' transactions, each nested
// with its own comparisons (guard and fence) and its own Else. etcd
// applies a request as one raft entry, so N shards writing at once cost
// one round trip, one proposal and one apply instead of N; and since
// each nested transaction compares for itself, a shard whose guard or
// fence fails writes nothing while the others in the request are written
// (etcd checks the nested comparisons one by one, as the outer Then
// runs them).
//
// It works as group commit does: a transaction sent while no request is
// unanswered waits up to the combine delay (CombineDelay) for company;
// those that come meanwhile, or while a request is unanswered, wait and
// go together in the next request, sent when the delay ends, at once when
// the request before is answered, or when more waits than one request
// holds. A node's shards are written at the pace of its clients' bursts,
// not all at the same instant: without the delay the first write of a
// burst went alone and the rest in a second request, so a node sent two
// requests a burst whatever its share of the load, each paid for by etcd
// and by every node's watch. A second request starts beside the first (up to
// maxCombinedInFlight) only once more waits than one request holds:
// etcd, and every node that follows the prefix through a watch, pays per
// request about as much as for hundreds of operations, so a trickle is
// better served one request at a time, each growing while the one before
// is answered (the server's writer does the same with its batches).
//
// etcd bounds the nesting: a nested transaction may hold at most
// --max-txn-ops minus the outer one's operations. A store with a Combiner
// therefore plans its transactions a quarter smaller (combineRoom), and a
// request takes nested transactions only while they fit; a transaction
// too large to nest at all is sent alone, as it would be without a
// Combiner.
type Combiner struct {
	cli      *clientv3.Client
	maxOps   int
	maxBytes int

	delay time.Duration

	mu       sync.Mutex
	queue    []*combined
	inFlight int
	closed   bool
	// lingering is set while the transactions queued wait out the delay
	// with nothing in flight; linger counts the delays, so that a timer
	// that fires after its delay ended (by a request sent) ends nothing.
	lingering bool
	linger    uint64
	timer     *time.Timer
	ctx       context.Context
	cancel    context.CancelFunc
}

// maxCombinedInFlight is how many combined requests may be unanswered at
// once; a second starts only once more waits than one request holds.
const maxCombinedInFlight = 2

// combineRoom is the share of MaxTxnOps a store with a Combiner leaves out
// of each transaction it plans, so that up to that many nest in one
// request.
func combineRoom(maxOps int) int { return maxOps / 4 }

// combined is one store's transaction waiting for its request.
type combined struct {
	ctx   context.Context
	cmps  []clientv3.Cmp
	then  []clientv3.Op
	els   []clientv3.Op
	opc   int // etcd's count: the most of cmps, then and els
	bytes int
	done  chan combinedResult // buffered: the sender never blocks
}

type combinedResult struct {
	resp *clientv3.TxnResponse
	err  error
}

// NewCombiner returns a Combiner of cli's writes for the stores opened
// with opts (their MaxTxnOps and MaxTxnBytes bound its requests) and
// Combine(it). Close it after them.
func NewCombiner(cli *clientv3.Client, opts ...Opt) *Combiner {
	c := newCfg(opts)
	ctx, cancel := context.WithCancel(context.Background())
	return &Combiner{cli: cli, maxOps: c.maxTxnOps, maxBytes: c.maxTxnBytes, delay: c.combineDelay, ctx: ctx, cancel: cancel}
}

// Combine makes the store send its write transactions through c.
func Combine(c *Combiner) Opt { return opt(func(cf *cfg) { cf.combiner = c }) }

// ErrCombinerClosed is the error of a write sent through a closed
// Combiner; nothing of it was written.
var ErrCombinerClosed = errors.New("etcdstore: the combiner is closed")

// Close fails the transactions still waiting (nothing of them written)
// and ends the requests in flight (their outcome unknown to their stores,
// which settle it as any other).
func (c *Combiner) Close() {
	c.mu.Lock()
	c.closed = true
	q := c.queue
	c.queue = nil
	c.stopLingerLocked()
	c.mu.Unlock()
	for _, t := range q {
		t.done <- combinedResult{err: ErrCombinerClosed}
	}
	c.cancel()
}

// txn sends If(cmps).Then(then).Else(els) and returns its response, as
// cli.Txn(ctx) would; bytes is its size as the planner counts it.
func (c *Combiner) txn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op, bytes int) (*clientv3.TxnResponse, error) {
	t := &combined{ctx: ctx, cmps: cmps, then: then, els: els, opc: max(len(cmps), len(then), len(els)),
		bytes: bytes + 64*len(cmps), done: make(chan combinedResult, 1)}
	if t.opc+1 > c.maxOps {
		// Too large to nest beside anything.
		return c.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrCombinerClosed
	}
	c.queue = append(c.queue, t)
	if c.delay > 0 && c.inFlight == 0 && !c.lingering {
		// The first of a burst: nothing in flight, nothing waiting
		// (sendLocked leaves nothing queued with nothing in flight
		// but while lingering).
		c.lingering = true
		c.linger++
		n := c.linger
		c.timer = time.AfterFunc(c.delay, func() { c.endLinger(n) })
	}
	c.sendLocked()
	c.mu.Unlock()
	select {
	case r := <-t.done:
		return r.resp, r.err
	case <-ctx.Done():
		// It may still be written: the caller settles that as any
		// write whose outcome it does not know.
		return nil, context.Cause(ctx)
	}
}

// sendLocked starts requests while transactions wait and there is room in
// flight: one request at a time (once the delay is over), and a second
// beside it only while more waits than one request holds. c.mu must be
// held.
func (c *Combiner) sendLocked() {
	for len(c.queue) > 0 && (c.inFlight == 0 && !c.lingering || c.inFlight < maxCombinedInFlight && c.overflowsLocked()) {
		req := c.takeLocked()
		if len(req) == 0 {
			continue
		}
		c.stopLingerLocked()
		c.inFlight++
		go c.send(req)
	}
}

// endLinger sends what waited out the delay numbered n, unless a request
// already took it.
func (c *Combiner) endLinger(n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lingering && c.linger == n {
		c.lingering = false
		c.sendLocked()
	}
}

// stopLingerLocked ends the delay, if one runs. c.mu must be held.
func (c *Combiner) stopLingerLocked() {
	if c.lingering {
		c.lingering = false
		c.timer.Stop()
	}
}

// overflowsLocked reports whether the waiting transactions would not all
// fit in one request. c.mu must be held.
func (c *Combiner) overflowsLocked() bool {
	most, bytes := 0, 0
	for i, t := range c.queue {
		most, bytes = max(most, t.opc), bytes+t.bytes
		if i+1+most > c.maxOps || i > 0 && bytes > c.maxBytes {
			return true
		}
	}
	return false
}

// takeLocked takes from the queue the transactions of the next request:
// in order, skipping those whose caller gave up, while they fit etcd's
// bounds. The first always fits (txn sends larger ones alone). c.mu must be
// held.
func (c *Combiner) takeLocked() []*combined {
	var req []*combined
	most, bytes, n := 0, 0, 0
	for i, t := range c.queue {
		if t.ctx.Err() != nil {
			t.done <- combinedResult{err: context.Cause(t.ctx)} // never sent: nothing written
			continue
		}
		fits := len(req)+1+max(most, t.opc) <= c.maxOps && (len(req) == 0 || bytes+t.bytes <= c.maxBytes)
		if !fits {
			c.queue[n] = c.queue[i]
			n++
			continue
		}
		req = append(req, t)
		most, bytes = max(most, t.opc), bytes+t.bytes
	}
	clear(c.queue[n:])
	c.queue = c.queue[:n]
	return req
}

// send sends one combined request and hands each transaction its own
// response.
func (c *Combiner) send(req []*combined) {
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.sendLocked()
		c.mu.Unlock()
	}()
	ctx, cancel := c.requestCtx(req)
	defer cancel()
	if len(req) == 1 {
		t := req[0]
		resp, err := c.cli.Txn(ctx).If(t.cmps...).Then(t.then...).Else(t.els...).Commit()
		t.done <- combinedResult{resp: resp, err: err}
		return
	}
	ops := make([]clientv3.Op, len(req))
	for i, t := range req {
		ops[i] = clientv3.OpTxn(t.cmps, t.then, t.els)
	}
	resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil && knownRejection(err) && !errors.Is(err, rpctypes.ErrTooManyRequests) {
		// Nothing was written, and each transaction alone is what its
		// store would have sent without the Combiner: if the request
		// broke a bound that they keep one by one (two of them writing
		// one key, which etcd refuses within a request; a size the
		// estimate missed), they go alone.
		for _, t := range req {
			resp, err := c.cli.Txn(ctx).If(t.cmps...).Then(t.then...).Else(t.els...).Commit()
			t.done <- combinedResult{resp: resp, err: err}
		}
		return
	}
	if err == nil && len(resp.Responses) != len(req) {
		err = errors.New("etcdstore: a combined request's response does not match its transactions")
	}
	for i, t := range req {
		if err != nil {
			t.done <- combinedResult{err: err}
			continue
		}
		nested := resp.Responses[i].GetResponseTxn()
		if nested == nil {
			t.done <- combinedResult{err: errors.New("etcdstore: a combined request's response lacks a transaction's")}
			continue
		}
		r := (*clientv3.TxnResponse)(nested)
		if r.Header == nil {
			r.Header = resp.Header
		}
		t.done <- combinedResult{resp: r}
	}
}

// requestCtx is the context of a request: it lasts until the latest
// deadline of its transactions' callers (a caller that gives up earlier
// stops waiting, and settles the outcome itself), and ends on Close.
func (c *Combiner) requestCtx(req []*combined) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, t := range req {
		d, ok := t.ctx.Deadline()
		if !ok {
			return context.WithCancel(c.ctx)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(c.ctx, last)
}
