package ha

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// NodeInfo is a node of the HA set as its Kafka clients see it.
type NodeInfo struct {
	// ID is the node's broker ID, assigned through etcd: the lowest
	// non-negative integer no live node holds.
	ID int32 `json:"id"`
	// Addr is the host:port the node advertises to Kafka clients.
	Addr string `json:"addr"`
	// HTTP is the host:port of the node's HTTP listener (status page and
	// admin API; see HTTPAddr), "" if it has none. Registrations written
	// before the field existed read as "".
	HTTP string `json:"http,omitempty"`
	// Listeners are the host:port the node advertises on each of its
	// listeners, by listener name (the Listeners option); clients are
	// told the address of the listener they came in on.
	Listeners map[string]string `json:"listeners,omitempty"`
	// Format is the newest store format the node reads (ReadsFormat). A
	// tenure from before the field leaves it out: 0, a node that reads
	// no format past the one its registration cannot name, which
	// FormatReaders counts as behind every format it is asked about.
	Format int `json:"format,omitempty"`
}

// A Node is this process's membership of the HA set: its registration,
// its candidacy, and the terms it wins. Its methods are safe for
// concurrent use.
type Node struct {
	cli  *clientv3.Client
	cfg  cfg
	keys keys
	logp atomic.Pointer[zap.Logger] // the configured logger with node_id
	met  *metrics
	base time.Time // the monotonic origin of every lease's deadline

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	terms  chan *Term

	shardTerms chan *Term
	changed    chan struct{} // signalled when the view changes (Shards > 1)
	leaving    atomic.Bool   // Leave was called: place nothing here, win no term

	// bcast is closed and replaced at every change of the view
	// (Changed).
	bcastMu sync.Mutex
	bcast   chan struct{}

	self atomic.Pointer[NodeInfo]
	// loggedLeader is the ID of the leader logLeader last named.
	loggedLeader atomic.Int64
	cur          atomic.Pointer[lease] // the lease held now
	view         view

	closeOnce sync.Once
	closeErr  error // the final revocation's; written by run before it exits
}

// Join registers a node advertising advertise (host:port) on the etcd
// cluster of cli and makes it a candidate for leadership. It returns once
// the node has a lease and an ID and its view of the set is loaded; terms
// arrive on Terms. The node lives until Close, whatever becomes of ctx,
// which bounds Join alone. cli must outlive the node.
func Join(ctx context.Context, cli *clientv3.Client, advertise string, opts ...Opt) (*Node, error) {
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkAddr(advertise); err != nil {
		return nil, err
	}
	met, err := newMetrics(c.reg, c.shards)
	if err != nil {
		return nil, fmt.Errorf("ha: metrics: %w", err)
	}
	n := &Node{
		cli:   cli,
		cfg:   c,
		keys:  newKeys(c.prefix),
		met:   met,
		base:  time.Now(),
		terms: make(chan *Term),
		// Room for every shard twice (one ending, one starting): the
		// placement loop never waits for the server to take a term.
		shardTerms: make(chan *Term, 2*c.shards),
		changed:    make(chan struct{}, 1),
		bcast:      make(chan struct{}),
	}
	n.view.init(n.keys)
	n.logp.Store(c.log)
	n.ctx, n.cancel = context.WithCancel(context.Background())

	l, err := n.newLease(ctx)
	if err != nil {
		n.abort(nil)
		return nil, fmt.Errorf("ha: lease: %w", err)
	}
	id, err := n.register(ctx, l, -1, clientv3.NoLease, advertise)
	if err != nil {
		n.abort(l)
		return nil, fmt.Errorf("ha: register: %w", err)
	}
	n.self.Store(&NodeInfo{ID: id, Addr: advertise, HTTP: c.http, Listeners: c.listeners, Format: c.format})
	n.loggedLeader.Store(notLogged)
	n.cur.Store(l)
	if err := n.checkShardCount(ctx); err != nil {
		n.abort(l)
		return nil, err
	}
	rev, err := n.load(ctx)
	if err != nil {
		n.abort(l)
		return nil, fmt.Errorf("ha: load the nodes: %w", err)
	}
	n.logp.Store(c.log.With(zap.Int32("node_id", id)))
	n.logger().Info("joined the HA set", zap.String("addr", advertise), zap.String("http", c.http), l.field(),
		zap.Duration("ttl", l.ttl), zap.Duration("valid_after_renewal", l.window.SuspectAfter()))
	n.wg.Add(2)
	go n.watch(rev)
	go n.run(l)
	return n, nil
}

// abort undoes a Join that failed after it took lease l (nil if none).
func (n *Node) abort(l *lease) {
	n.cancel()
	n.wg.Wait()
	if l != nil {
		_ = n.release([]clientv3.LeaseID{l.id})
	}
	n.met.unregister()
}

func (n *Node) logger() *zap.Logger { return n.logp.Load() }

func checkAddr(addr string) error { return checkHostPort("advertised address", addr) }

// checkHostPort checks that addr, the node's what, is host:port with a
// port other nodes and clients can reach.
func checkHostPort(what, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidOption, what, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%w: %s %q: bad port", ErrInvalidOption, what, addr)
	}
	return nil
}

// Self returns this node. Its ID is kept for the process's life unless
// the node lost its lease and another node took the ID meanwhile.
func (n *Node) Self() NodeInfo { return *n.self.Load() }

// Nodes returns the live nodes, sorted by ID, as the node's watch last saw
// them.
func (n *Node) Nodes() []NodeInfo { return n.view.nodes() }

// Leader returns the leader as the node's watch last saw it: the node
// whose candidate key has the lowest create revision; false when there is
// none. It may lag, and the leader it names may already be in doubt: it is
// for pointing clients at the leader, never for deciding to act as one
// (that is Term.Valid).
func (n *Node) Leader() (NodeInfo, bool) { return n.view.leader() }

// Candidates returns the registered nodes that stand for leadership, in
// the order in which they lead, as the node's watch last saw them: by
// their candidate keys' create revisions, lowest first. The first is the
// leader (Leader); each next one wins once every key before its own is
// gone, so when the leader dies the first live node after it is the one
// that will lead once its key expires, and every node that sees the same
// keys names the same one. Like Leader it may lag, and it is for
// pointing clients, never for deciding to act as leader.
func (n *Node) Candidates() []NodeInfo { return n.view.candidatesInOrder() }

// Changed returns a channel closed at the next change of the node's view
// of the set: a node registering or leaving, a candidacy won or ended, a
// shard changing owner. Call it again after each close. Any number of
// goroutines may wait on it; a burst of changes may close one channel
// only, so read the view (Nodes, Leader, ShardOwner) after the close,
// never count closes.
func (n *Node) Changed() <-chan struct{} {
	n.bcastMu.Lock()
	defer n.bcastMu.Unlock()
	return n.bcast
}

// Terms returns the channel of the terms this node wins, in order. A won
// term waits on the channel until it is received or ends, and the node
// wins no other meanwhile; so receive promptly. A term received may have
// ended during the hand-off: check Valid. The channel is closed by Close.
func (n *Node) Terms() <-chan *Term { return n.terms }

// Close ends the node's term (reason closed), stops every goroutine of
// the node, and revokes its lease, which deletes its registration and its
// candidacy so that another node wins at once. It waits at most
// ElectionTTL for the revocation (past that the lease expires anyway) and
// returns its error. Calls after the first return the same.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		n.wg.Wait()
		n.met.unregister()
		n.logger().Info("left the HA set", zap.Error(n.closeErr))
	})
	return n.closeErr
}

// run holds the node's lease, replacing it whenever it ends, and
// campaigns under each, until Close.
func (n *Node) run(l *lease) {
	defer n.wg.Done()
	defer close(n.terms)
	defer close(n.shardTerms)
	var stale []clientv3.LeaseID // leases given up whose revocation failed
	for {
		if n.cfg.shards > 1 {
			n.placeShards(l)
		} else {
			n.lead(l)
		}
		<-l.over
		stale = append(stale, l.id)
		if n.ctx.Err() != nil {
			n.closeErr = n.release(stale)
			return
		}
		n.logger().Warn("lost the lease; taking a new one", l.field(), zap.Stringer("reason", l.endedFor()))
		l, stale = n.recover(l, stale)
		if l == nil {
			n.closeErr = n.release(stale)
			return
		}
	}
}

// lead campaigns under l and hands out the terms won, until l ends.
func (n *Node) lead(l *lease) {
	b := n.newBackoff()
	for {
		if n.leaving.Load() {
			<-l.over // Leave: no more terms here
			return
		}
		t, err := n.campaign(l)
		if err != nil {
			if l.ctx.Err() != nil {
				<-l.over // keepLease ends it
				return
			}
			n.logger().Warn("campaign failed; retrying", l.field(), zap.Error(err))
			if !b.wait(l.over) {
				return
			}
			continue
		}
		b.reset()
		if n.leaving.Load() {
			// Won while leaving: give it straight to the next candidate.
			t.end(reasonResigned)
			l.release(t)
			n.retire(l, t)
			continue
		}
		n.logger().Info("leadership term started", zap.Int64("revision", t.rev), l.field(),
			zap.Duration("valid_for", time.Until(l.deadlineTime())))
		if t.Valid(time.Now()) {
			select {
			case n.terms <- t:
			case <-t.done:
			}
		}
		<-t.done
		l.release(t)
		select {
		case <-l.over:
			return
		default:
		}
		// Resigned or deposed with the lease alive: the old key must go
		// before a new one is put, or the node would queue behind itself.
		n.retire(l, t)
	}
}

// recover takes a new lease after old ended, and registers again,
// preferring the node's ID; it backs off while etcd is unreachable. It
// returns nil if the node closed first.
func (n *Node) recover(old *lease, stale []clientv3.LeaseID) (*lease, []clientv3.LeaseID) {
	b := n.newBackoff()
	self := n.Self()
	for {
		// Revoking first frees the old ID and candidacy at once; a lease
		// that cannot be revoked expires within its TTL anyway.
		stale = n.revoke(stale)
		l, err := n.newLease(n.ctx)
		if err == nil {
			var id int32
			id, err = n.register(n.ctx, l, self.ID, old.id, self.Addr)
			if err == nil {
				if id != self.ID {
					n.logger().Warn("the node's ID was taken while it had no lease; it has a new one",
						zap.Int32("old_id", self.ID), zap.Int32("new_id", id))
					n.logp.Store(n.cfg.log.With(zap.Int32("node_id", id)))
				}
				n.self.Store(&NodeInfo{ID: id, Addr: self.Addr, HTTP: self.HTTP, Listeners: self.Listeners, Format: self.Format})
				n.cur.Store(l)
				n.logger().Info("registered again", l.field())
				return l, n.revoke(stale)
			}
			l.end(reasonClosed)
			stale = append(stale, l.id)
		}
		if n.ctx.Err() != nil {
			return nil, stale
		}
		n.logger().Warn("cannot take a new lease yet; backing off", zap.Error(err))
		if !b.wait(n.ctx.Done()) {
			return nil, stale
		}
	}
}

// revoke revokes each lease once and returns those that failed.
func (n *Node) revoke(ids []clientv3.LeaseID) []clientv3.LeaseID {
	var left []clientv3.LeaseID
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ttl/2)
		_, err := n.cli.Revoke(ctx, id)
		cancel()
		if err != nil && !isLeaseNotFound(err) {
			left = append(left, id)
		}
	}
	return left
}

// release revokes the leases at Close, within one TTL in all.
func (n *Node) release(ids []clientv3.LeaseID) error {
	// A revocation lets the others take over at once rather than a TTL
	// later; an etcd without a quorum (the last nodes of a set stopping)
	// cannot revoke, and the lease expires on its own.
	wait := min(n.cfg.ttl, releaseTimeout)
	n.logger().Info("leaving: revoking the lease", zap.Int("leases", len(ids)), zap.Duration("up_to", wait))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var errs []error
	for _, id := range ids {
		if _, err := n.cli.Revoke(ctx, id); err != nil && !isLeaseNotFound(err) {
			errs = append(errs, fmt.Errorf("ha: revoke lease %x: %w", int64(id), err))
		}
	}
	return errors.Join(errs...)
}

// releaseTimeout bounds revoking the leases when a node leaves.
const releaseTimeout = 2 * time.Second

// backoff spaces out retries against an etcd that does not answer: from
// TTL/20, doubling, to TTL.
type backoff struct{ cur, max time.Duration }

func (n *Node) newBackoff() *backoff { return &backoff{cur: n.cfg.ttl / 20, max: n.cfg.ttl} }

func (b *backoff) reset() { b.cur = b.max / 20 }

// wait waits for the current delay and doubles it; false if stop closed
// first.
func (b *backoff) wait(stop <-chan struct{}) bool {
	t := time.NewTimer(b.cur)
	defer t.Stop()
	b.cur = min(2*b.cur, b.max)
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// view is what the watch of <prefix>meta/ha/ shows: the nodes and the
// candidates.
type view struct {
	keys keys

	mu         sync.RWMutex
	byID       map[int32]NodeInfo
	candidates map[string]candidate // by leader key
	owners     map[int]shardOwner   // by shard
	sorted     []NodeInfo
	leaderInfo NodeInfo
	hasLeader  bool
}

type candidate struct {
	rev int64 // create revision
	id  int32 // -1 if the value does not parse
}

// shardOwner is a shard's owner key as the watch saw it.
type shardOwner struct {
	id    int32 // -1 if the value does not parse
	lease clientv3.LeaseID
	rev   int64 // create revision
}

func (v *view) init(k keys) {
	v.keys = k
	v.byID = map[int32]NodeInfo{}
	v.candidates = map[string]candidate{}
	v.owners = map[int]shardOwner{}
}

// shardState returns the live node IDs, sorted, and the owner key of
// every shard of count, with id -1 where there is none.
func (v *view) shardState(count int) ([]int32, []shardOwner) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	ids := make([]int32, len(v.sorted))
	for i, n := range v.sorted {
		ids[i] = n.ID
	}
	owners := make([]shardOwner, count)
	for s := range owners {
		o, ok := v.owners[s]
		if !ok {
			o.id = -1
		}
		owners[s] = o
	}
	return ids, owners
}

// shardOwner returns the live node that owns shard s.
func (v *view) shardOwner(s int) (NodeInfo, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	o, ok := v.owners[s]
	if !ok {
		return NodeInfo{}, false
	}
	info, ok := v.byID[o.id]
	return info, ok
}

func (v *view) nodes() []NodeInfo {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return slices.Clone(v.sorted)
}

func (v *view) leader() (NodeInfo, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.leaderInfo, v.hasLeader
}

// candidatesInOrder returns the registered candidates by their keys'
// create revisions.
func (v *view) candidatesInOrder() []NodeInfo {
	v.mu.RLock()
	defer v.mu.RUnlock()
	cs := make([]candidate, 0, len(v.candidates))
	for _, c := range v.candidates {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b candidate) int { return cmp.Compare(a.rev, b.rev) })
	out := make([]NodeInfo, 0, len(cs))
	for _, c := range cs {
		if info, ok := v.byID[c.id]; ok {
			out = append(out, info)
		}
	}
	return out
}

// candidate returns the create revision of a leader key, 0 if absent.
func (v *view) candidate(key string) int64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.candidates[key].rev
}
