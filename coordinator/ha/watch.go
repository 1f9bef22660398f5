package ha

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// watch keeps the view of <prefix>meta/ha/ from revision rev on, until
// Close: a watch from the last revision seen, and a fresh load whenever
// the watch breaks (an error, a compaction, a member without a leader).
func (n *Node) watch(rev int64) {
	defer n.wg.Done()
	b := n.newBackoff()
	for {
		if rev == 0 {
			r, err := n.load(n.ctx)
			if err != nil {
				if n.ctx.Err() != nil {
					return
				}
				n.logger().Debug("loading the nodes failed; retrying", zap.Error(err))
				if !b.wait(n.ctx.Done()) {
					return
				}
				continue
			}
			rev = r
			b.reset()
		}
		err := n.follow(rev)
		if n.ctx.Err() != nil {
			return
		}
		n.logger().Debug("the watch of the nodes broke; loading again", zap.Error(err))
		rev = 0
		if !b.wait(n.ctx.Done()) {
			return
		}
	}
}

// load reads every key of <prefix>meta/ha/ into the view and returns the
// revision it read at.
func (n *Node) load(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
	defer cancel()
	resp, err := n.cli.Get(ctx, n.keys.dir, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	n.view.reset(resp.Kvs)
	n.publish()
	// A deletion of the current term's key that the broken watch missed.
	if l := n.cur.Load(); l != nil {
		if t := l.current(); t != nil && resp.Header.Revision > t.rev && n.view.candidate(t.key) != t.rev {
			t.end(reasonDeposed)
		}
		for s, t := range l.shardTerms() {
			if resp.Header.Revision > t.rev && n.view.shardRev(s) != t.rev {
				t.end(reasonDeposed)
			}
		}
	}
	return resp.Header.Revision, nil
}

// follow applies the watch's events from rev+1 until the watch breaks.
func (n *Node) follow(rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(n.ctx))
	defer cancel()
	for wr := range n.cli.Watch(ctx, n.keys.dir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		if len(wr.Events) == 0 {
			continue
		}
		n.view.apply(wr.Events)
		n.publish()
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.DELETE {
				continue
			}
			if key := string(ev.Kv.Key); n.keys.isLeader(key) {
				n.deleted(key, ev.Kv.ModRevision)
			} else if s, ok := n.keys.shardOf(key); ok {
				n.shardDeleted(s, ev.Kv.ModRevision)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errWatchClosed
}

// deleted ends the current term if key is its leader key and was deleted
// at rev, after the term's key was created: nobody but the node itself
// deletes it, except an operator or a revocation of the node's lease.
func (n *Node) deleted(key string, rev int64) {
	l := n.cur.Load()
	if l == nil {
		return
	}
	if t := l.current(); t != nil && t.key == key && rev > t.rev {
		t.end(reasonDeposed)
	}
}

// shardDeleted ends this node's term of shard s if its key was deleted
// at rev, after the term's key was created, by anyone but the node's
// placement loop (which ends the term before it deletes the key).
func (n *Node) shardDeleted(s int, rev int64) {
	l := n.cur.Load()
	if l == nil {
		return
	}
	if t := l.shardTerms()[s]; t != nil && rev > t.rev {
		t.end(reasonDeposed)
	}
}

func (n *Node) publish() {
	n.met.liveNodes(len(n.view.nodes()))
	n.logLeader()
	select {
	case n.changed <- struct{}{}:
	default:
	}
	n.bcastMu.Lock()
	close(n.bcast)
	n.bcast = make(chan struct{})
	n.bcastMu.Unlock()
}

// logLeader says, once per change, which node leads a one-leader set:
// the leader logs that it leads, and a follower's log would otherwise
// never name it.
func (n *Node) logLeader() {
	if n.cfg.shards > 1 {
		return // every node owns shards; there is no one leader
	}
	l, ok := n.view.leader()
	id := int64(noLeader)
	if ok {
		id = int64(l.ID)
	}
	prev := n.loggedLeader.Swap(id)
	switch {
	case prev == id:
	case !ok && prev != notLogged:
		n.logger().Info("no node leads the HA set; waiting for an election", zap.Int64("was", prev))
	case ok && l.ID != n.Self().ID:
		n.logger().Info("following", zap.Int32("leader", l.ID), zap.String("leader_addr", l.Addr),
			zap.String("leader_http", l.HTTP))
	}
}

// Values of Node.loggedLeader that are not node IDs.
const (
	notLogged = -2
	noLeader  = -1
)

// shardRev returns the create revision of shard s's owner key, 0 if
// absent.
func (v *view) shardRev(s int) int64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.owners[s].rev
}

// reset replaces the view with the keys kvs.
func (v *view) reset(kvs []*mvccpb.KeyValue) {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.byID)
	clear(v.candidates)
	clear(v.owners)
	for _, kv := range kvs {
		v.putLocked(kv)
	}
	v.deriveLocked()
}

// apply applies watch events in order.
func (v *view) apply(evs []*clientv3.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		switch {
		case ev.Type == mvccpb.PUT:
			v.putLocked(ev.Kv)
		case v.keys.isLeader(key):
			delete(v.candidates, key)
		default:
			if s, ok := v.keys.shardOf(key); ok {
				delete(v.owners, s)
				continue
			}
			if id, ok := v.keys.nodeID(key); ok {
				delete(v.byID, id)
			}
		}
	}
	v.deriveLocked()
}

func (v *view) putLocked(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	if v.keys.isLeader(key) {
		c := candidate{rev: kv.CreateRevision, id: -1}
		if id, err := strconv.ParseInt(string(kv.Value), 10, 32); err == nil {
			c.id = int32(id)
		}
		v.candidates[key] = c
		return
	}
	if s, ok := v.keys.shardOf(key); ok {
		o := shardOwner{id: -1, lease: clientv3.LeaseID(kv.Lease), rev: kv.CreateRevision}
		if id, err := strconv.ParseInt(string(kv.Value), 10, 32); err == nil {
			o.id = int32(id)
		}
		v.owners[s] = o
		return
	}
	id, ok := v.keys.nodeID(key)
	if !ok {
		return
	}
	info := NodeInfo{ID: id}
	// An unreadable value still names a live node; it just has no address.
	_ = json.Unmarshal(kv.Value, &info)
	info.ID = id
	v.byID[id] = info
}

// deriveLocked recomputes the sorted nodes and the leader: the candidate
// with the lowest create revision, if its node is registered.
func (v *view) deriveLocked() {
	v.sorted = v.sorted[:0]
	for _, info := range v.byID {
		v.sorted = append(v.sorted, info)
	}
	slices.SortFunc(v.sorted, func(a, b NodeInfo) int { return cmp.Compare(a.ID, b.ID) })
	var first candidate
	for _, c := range v.candidates {
		if first.rev == 0 || c.rev < first.rev {
			first = c
		}
	}
	v.leaderInfo, v.hasLeader = v.byID[first.id]
	if first.rev == 0 {
		v.leaderInfo, v.hasLeader = NodeInfo{}, false
	}
}
