package ha

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrShardCount is Join's error when the prefix was first used with
// another shard count than the node's Shards.
var ErrShardCount = errors.New("ha: the shard count differs from the one the prefix was created with")

// ShardCount returns the node's shard count (Shards; 1 without shards).
func (n *Node) ShardCount() int { return n.cfg.shards }

// ShardTerms returns the channel of the shard terms this node wins (with
// Shards above 1; nothing is ever sent on it otherwise). A node holds
// any number of shard terms at once, at most one per shard; each is
// valid, and is to be acted on, as a leadership term is (Valid, Guard,
// Done), for the groups of its shard. When one ends, its holder drops
// the shard's groups and calls Release. The channel is buffered (the
// node never waits for the receiver); it is closed by Close.
func (n *Node) ShardTerms() <-chan *Term { return n.shardTerms }

// ShardOwner returns the live node whose owner key shard s has, as the
// node's watch last saw it: advice for pointing clients at the shard's
// coordinator, never a reason to act as it (that is Term.Valid).
func (n *Node) ShardOwner(s int) (NodeInfo, bool) { return n.view.shardOwner(s) }

// checkShardCount records the node's shard count at <prefix>meta/shards
// if the prefix has none, and refuses a count other than the recorded
// one. A prefix used before shards existed has none and one leader: it
// counts as 1.
func (n *Node) checkShardCount(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
	defer cancel()
	key := n.keys.shardCount
	want := strconv.Itoa(n.cfg.shards)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, want)).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return fmt.Errorf("ha: recording the shard count: %w", err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 1 && string(kvs[0].Value) != want {
		return fmt.Errorf("%w: the node has %d, %s holds %q; the count is fixed once a prefix is used (start every node with --shards %s)",
			ErrShardCount, n.cfg.shards, key, kvs[0].Value, kvs[0].Value)
	}
	return nil
}

// placeShards keeps this node's shards under l as the placement says,
// until l ends: it lets go of the shards placed elsewhere and takes the
// unowned shards placed here, each time the view changes (and every TTL,
// in case a change was missed or an attempt failed).
func (n *Node) placeShards(l *lease) {
	tick := time.NewTicker(l.ttl)
	defer tick.Stop()
	for {
		n.reconcile(l)
		select {
		case <-l.over:
			return
		case <-n.changed:
		case <-tick.C:
		}
	}
}

// reconcile makes one pass of placement under l.
func (n *Node) reconcile(l *lease) {
	self := n.Self().ID
	ids, keys := n.view.shardState(n.cfg.shards)
	if n.leaving.Load() {
		// The registration is gone, or going: place as the others do.
		ids = slices.DeleteFunc(ids, func(id int32) bool { return id == self })
	}
	held := l.shardTerms()
	owners := make([]int32, len(keys))
	for s, k := range keys {
		owners[s] = k.id
		if t := held[s]; t != nil {
			// The node's own terms are the truth about what it holds;
			// the watch may not show a key taken a moment ago.
			owners[s] = self
			if t.ended.Load() {
				owners[s] = -1
			}
		}
	}
	target := placement(n.cfg.shards, ids, owners)
	var moving []*Term
	for s, k := range keys {
		t := held[s]
		switch {
		case t != nil && t.ended.Load():
			// Ended otherwise (deposed): forget it, and delete its key
			// if it still stands.
			l.dropShard(t)
			n.retire(l, t)
		case t != nil && target[s] != self:
			moving = append(moving, t)
		case t == nil && k.id >= 0 && k.lease == l.id:
			// A key of this lease with no term: an acquisition whose
			// answer was lost. Delete it; the next pass takes it again
			// if it is still placed here.
			n.retire(l, &Term{key: n.keys.shard(s), rev: k.rev})
		case t == nil && k.id < 0 && target[s] == self:
			n.acquire(l, s)
		}
		if l.ctx.Err() != nil {
			return
		}
	}
	n.moveAway(l, moving)
}

// acquire takes shard s under l if nobody holds it, and hands out its
// term.
func (n *Node) acquire(l *lease, s int) {
	key := n.keys.shard(s)
	ctx, cancel := context.WithTimeout(l.ctx, l.ttl)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.FormatInt(int64(n.Self().ID), 10), clientv3.WithLease(l.id))).
		Commit()
	cancel()
	if err != nil {
		n.logger().Debug("taking a shard failed; retrying later", zap.Int("shard", s), zap.Error(err))
		return
	}
	if !resp.Succeeded {
		return // another node was faster; the placement sorts it out
	}
	t := newShardTerm(n, l, s, resp.Header.Revision)
	if !l.startShard(t, time.Now()) {
		return // the lease is ending: the key goes with it
	}
	n.logger().Debug("shard term started", zap.Int("shard", s), zap.Int64("revision", t.rev), l.field())
	select {
	case n.shardTerms <- t:
	case <-l.over:
	}
}

// moveAway moves terms to other nodes: each ends (its holder stops
// serving the shard at once), its holder gets up to a TTL to drop the
// shard's groups and settle their writes (Release), then its key is
// deleted, and the shard's target takes it. Ending them all before
// waiting lets the holder drop them in parallel.
func (n *Node) moveAway(l *lease, terms []*Term) {
	if len(terms) == 0 {
		return
	}
	for _, t := range terms {
		t.end(reasonMoved)
	}
	wait := time.NewTimer(l.ttl)
	defer wait.Stop()
	for _, t := range terms {
		select {
		case <-t.released:
		case <-wait.C:
			n.logger().Warn("a moved shard was not released in time; deleting its key anyway", zap.Int("shard", t.shard))
			wait.Reset(0)
		case <-l.over:
			return // the keys go with the lease
		}
		n.retire(l, t)
		l.dropShard(t)
	}
	n.logger().Info("shards moved to other nodes", zap.Int("count", len(terms)))
}

// Leave hands every shard of this node to the other nodes before the
// node closes, so that a node stopped on purpose (a rolling restart)
// costs its groups a hand-off rather than an election TTL, and its
// clients, still connected, are answered NOT_COORDINATOR and find the new
// owners instead of redialing a closed port. It deletes the node's
// registration (the others then place its shards elsewhere), lets each
// shard go as a moved one (the holder's Release, then the key), and
// returns once the node holds none and the watch shows every shard owned
// by another node, or when ctx ends. The node keeps its lease and its
// watch until Close, which must follow; it takes no shard meanwhile.
// It returns how many shards it held when it began. Without another node
// to take them, it does nothing.
//
// Without shards (one leader), the leader leaves the same way: it deletes
// its registration, resigns its term (it answers NOT_COORDINATOR from
// then on), and returns 1 once the watch shows another node leading, or
// when ctx ends. A node that does not lead returns 0 and wins no term
// until Close.
func (n *Node) Leave(ctx context.Context) (int, error) {
	if n.cfg.shards <= 1 {
		return n.leaveLeader(ctx)
	}
	self := n.Self().ID
	if !slices.ContainsFunc(n.Nodes(), func(o NodeInfo) bool { return o.ID != self }) {
		return 0, nil // nobody to hand them to: they go with the lease
	}
	n.leaving.Store(true)
	l := n.cur.Load()
	held := len(l.shardTerms())
	key := n.keys.node(self)
	if _, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", l.id)).
		Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return held, fmt.Errorf("ha: leaving: %w", err)
	}
	n.publish() // reconcile now: the watch may take a moment
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if n.handedOff(l) {
			n.logger().Info("handed every shard to the other nodes", zap.Int("held", held))
			return held, nil
		}
		select {
		case <-ctx.Done():
			return held, fmt.Errorf("ha: leaving: shards not all handed off: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// handedOff reports whether this node holds no shard under l and the
// watch shows an owner other than itself for every shard.
func (n *Node) handedOff(l *lease) bool {
	if len(l.shardTerms()) > 0 {
		return false
	}
	self := n.Self().ID
	_, owners := n.view.shardState(n.cfg.shards)
	for _, o := range owners {
		if o.id < 0 || o.id == self {
			return false
		}
	}
	return true
}
