package ha

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
)

// lease is one etcd lease of the node, the deadline its acknowledged
// renewals vouch for, and the term (at most one) held under it. A node
// replaces its lease when the deadline passes; a lease never comes back.
type lease struct {
	id     clientv3.LeaseID
	ttl    time.Duration
	window epoch.Window
	// base is the node's monotonic origin; deadline is in nanoseconds
	// after it, so that Valid is one atomic load and a subtraction.
	base     time.Time
	deadline atomic.Int64

	// ctx is the context of everything done under the lease; it ends with
	// the lease (cancel) and with the node.
	ctx    context.Context
	cancel context.CancelFunc
	over   chan struct{} // closed once the lease has ended

	mu       sync.Mutex
	ended    bool
	reason   endReason
	term     *Term // the term held now, if any
	lastTerm int64 // the revision of the last term started under the lease
	// shards are the shard terms held now, by shard (Shards > 1).
	shards map[int]*Term
}

func (l *lease) deadlineTime() time.Time { return l.base.Add(time.Duration(l.deadline.Load())) }

// valid reports whether now is before the deadline. now must carry a
// monotonic reading (time.Now's); without one, Sub falls back to the wall
// clock.
func (l *lease) valid(now time.Time) bool {
	return now.Sub(l.base) < time.Duration(l.deadline.Load())
}

// acked moves the deadline for a renewal sent at sent and acknowledged at
// at. It refuses (false) once the lease has ended or its deadline passed
// before the acknowledgement came: a deadline that passed stays passed,
// which is what makes a term's Valid monotone.
func (l *lease) acked(sent, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || !l.valid(at) {
		return false
	}
	if d := int64(l.window.Deadline(sent).Sub(l.base)); d > l.deadline.Load() {
		l.deadline.Store(d)
	}
	return true
}

// expire ends the lease in doubt if its deadline has passed at now, and
// reports whether the lease has ended.
func (l *lease) expire(now time.Time) bool {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return true
	}
	if l.valid(now) {
		l.mu.Unlock()
		return false
	}
	l.endLocked(reasonInDoubt)
	return true
}

// end ends the lease, and the term held under it, for r; the first reason
// sticks.
func (l *lease) end(r endReason) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.endLocked(r)
}

// endLocked ends the term before anything can release the leader key
// (the run loop revokes the lease only once over is closed), so that no
// successor can win while this node's term still reads valid. It unlocks
// l.mu.
func (l *lease) endLocked(r endReason) {
	l.ended, l.reason = true, r
	t := l.term
	l.term = nil
	shards := l.shards
	l.shards = nil
	l.mu.Unlock()
	if t != nil {
		t.end(r)
	}
	for _, st := range shards {
		st.end(r)
	}
	close(l.over)
	l.cancel()
}

// start makes t the lease's term if the lease still stands and its
// deadline is ahead of now: a term is never handed out already expired.
func (l *lease) start(t *Term, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || !l.valid(now) {
		return false
	}
	l.term, l.lastTerm = t, t.rev
	// Under l.mu, so that the gauge's 1 lands before the 0 of any end.
	t.n.met.termStarted()
	return true
}

// startShard makes t the lease's term of its shard, on the same terms as
// start.
func (l *lease) startShard(t *Term, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || !l.valid(now) {
		return false
	}
	if l.shards == nil {
		l.shards = make(map[int]*Term)
	}
	l.shards[t.shard] = t
	t.n.met.shardStarted()
	return true
}

// shardTerms returns the shard terms held now, ended or not, by shard.
func (l *lease) shardTerms() map[int]*Term {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.shards)
}

// dropShard forgets shard term t once it has ended.
func (l *lease) dropShard(t *Term) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shards[t.shard] == t {
		delete(l.shards, t.shard)
	}
}

// current returns the term held now, nil if none.
func (l *lease) current() *Term {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

// release forgets t once it has ended (resigned or deposed) while the
// lease goes on.
func (l *lease) release(t *Term) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term == t {
		l.term = nil
	}
}

func (l *lease) lastTermRev() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastTerm
}

func (l *lease) endedFor() endReason {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}

func (l *lease) field() zap.Field {
	return zap.String("lease", strconv.FormatInt(int64(l.id), 16))
}

// newLease grants a lease and starts renewing it. The first deadline
// counts from before the Grant was sent: etcd starts the TTL when it
// grants, later.
func (n *Node) newLease(ctx context.Context) (*lease, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
	defer cancel()
	sent := time.Now()
	resp, err := n.cli.Grant(ctx, int64(n.cfg.ttl/time.Second))
	if err != nil {
		return nil, err
	}
	// etcd raises a TTL below its minimum (1.5 election timeouts) and never
	// lowers one; the window counts the shorter of the two, which is
	// always safe.
	ttl := n.cfg.ttl
	if granted := time.Duration(resp.TTL) * time.Second; granted != ttl {
		n.logger().Warn("etcd granted a lease TTL other than the one asked; fail-over takes as long as the longer",
			zap.Duration("asked", ttl), zap.Duration("granted", granted))
		ttl = min(ttl, granted)
	}
	w := n.cfg.window()
	w.SessionTimeout = ttl
	l := &lease{id: resp.ID, ttl: ttl, window: w, base: n.base, over: make(chan struct{})}
	l.deadline.Store(int64(w.Deadline(sent).Sub(n.base)))
	l.ctx, l.cancel = context.WithCancel(n.ctx)
	n.wg.Add(1)
	go n.keepLease(l)
	return l, nil
}

type keepaliveResult struct {
	sent, at time.Time
	err      error
}

// keepLease renews l every TTL/6 until it ends, and ends it when its
// deadline passes (in_doubt), when etcd says it is gone (lease_lost), or
// when the node closes. One goroutine owns the timers; each renewal runs
// in a goroutine of its own, so that a renewal stuck in the network does
// not hold up the deadline.
func (n *Node) keepLease(l *lease) {
	defer n.wg.Done()
	interval := keepaliveInterval(l.ttl)
	results := make(chan keepaliveResult, 1) // one renewal in flight at most
	inflight := false
	next := time.NewTimer(interval)
	defer next.Stop()
	watchdog := time.NewTimer(time.Until(l.deadlineTime()))
	defer watchdog.Stop()
	var (
		failures int
		lastErr  error
		lastSent time.Time // of the last acknowledged renewal
	)
	for {
		var nextC <-chan time.Time
		if !inflight {
			nextC = next.C
		}
		select {
		case <-l.ctx.Done():
			l.end(reasonClosed) // a no-op when the lease ended otherwise
			return

		case <-nextC:
			inflight = true
			n.wg.Add(1)
			go n.renew(l, results)

		case r := <-results:
			inflight = false
			if r.err == nil {
				if !l.acked(r.sent, r.at) {
					continue // the watchdog ends it
				}
				if failures > 0 {
					n.logger().Info("lease renewals succeed again", l.field(), zap.Int("failed", failures))
				}
				failures, lastErr, lastSent = 0, nil, r.sent
				watchdog.Reset(time.Until(l.deadlineTime()))
				next.Reset(time.Until(r.sent.Add(interval)))
				continue
			}
			n.met.keepaliveFailed()
			if errors.Is(r.err, rpctypes.ErrLeaseNotFound) {
				n.logger().Warn("etcd has no longer the node's lease", l.field(), zap.Error(r.err))
				l.end(reasonLeaseLost)
				return
			}
			if failures == 0 {
				n.logger().Warn("lease renewal failed; retrying", l.field(), zap.Error(r.err),
					zap.Duration("deadline_in", time.Until(l.deadlineTime())))
			}
			failures, lastErr = failures+1, r.err
			// Retry sooner than the interval: the window is running out.
			next.Reset(interval / 3)

		case <-watchdog.C:
			// Not the channel's time: that is when the timer was due,
			// which after a pause (SIGSTOP, a stalled VM) is the pause's
			// length ago, and late_by would hide the pause.
			now := time.Now()
			if !l.expire(now) {
				watchdog.Reset(time.Until(l.deadlineTime()))
				continue
			}
			if l.endedFor() != reasonInDoubt {
				return // ended otherwise just before
			}
			fields := []zap.Field{l.field(), zap.Int("failed_renewals", failures), zap.Error(lastErr),
				zap.Duration("late_by", now.Sub(l.deadlineTime()))}
			if !lastSent.IsZero() {
				fields = append(fields, zap.Duration("since_last_acked_send", now.Sub(lastSent)))
			}
			n.logger().Warn("lease in doubt: no renewal acknowledged in time", fields...)
			return
		}
	}
}

// renew sends one renewal of l and reports it on out, with its send time
// read before the request left.
func (n *Node) renew(l *lease, out chan<- keepaliveResult) {
	defer n.wg.Done()
	// KeepAliveOnce retries by itself until its context ends; a renewal
	// that takes two intervals is better abandoned and sent again, maybe
	// to another endpoint.
	ctx, cancel := context.WithTimeout(l.ctx, 2*keepaliveInterval(l.ttl))
	defer cancel()
	sent := time.Now()
	_, err := n.cli.KeepAliveOnce(ctx, l.id)
	out <- keepaliveResult{sent: sent, at: time.Now(), err: err}
}

func (r endReason) String() string { return string(r) }
