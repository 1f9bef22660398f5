package ha

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	// errNotFirst: the node's candidate key was not first when the node
	// read the election after its predecessors were gone (the key was
	// deleted meanwhile).
	errNotFirst = errors.New("ha: the candidate key is not first")
	// errInDoubt: the election was won, but the lease's deadline passed
	// first.
	errInDoubt = errors.New("ha: the lease is in doubt")
	// errWatchClosed: a watch ended without an error or a cancelled
	// context.
	errWatchClosed = errors.New("ha: watch closed")
)

// campaign puts the node's candidate key under l and returns once it
// leads: every candidate created before it is gone and a linearizable read
// shows its key first. The term is started under l, so it ends with l.
func (n *Node) campaign(l *lease) (*Term, error) {
	key := n.keys.leader(l.id)
	val := strconv.FormatInt(int64(n.Self().ID), 10)
	ctx, cancel := context.WithTimeout(l.ctx, l.ttl)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(l.id))).
		Else(clientv3.OpGet(key)).Commit()
	cancel()
	if err != nil {
		return nil, err
	}
	rev := resp.Header.Revision
	if !resp.Succeeded {
		// The put of an earlier try landed though its answer was lost.
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) != 1 {
			return nil, errNotFirst
		}
		rev = kvs[0].CreateRevision
		if rev <= l.lastTermRev() {
			// The key of a term that ended: a term is never handed out
			// twice under one revision.
			n.retire(l, &Term{key: key, rev: rev})
			return nil, errNotFirst
		}
	}
	if err := n.waitPredecessors(l.ctx, rev); err != nil {
		return nil, err
	}
	ctx, cancel = context.WithTimeout(l.ctx, l.ttl)
	first, err := n.cli.Get(ctx, n.keys.leaderDir(), clientv3.WithFirstCreate()...)
	cancel()
	if err != nil {
		return nil, err
	}
	if len(first.Kvs) != 1 || string(first.Kvs[0].Key) != key || first.Kvs[0].CreateRevision != rev {
		return nil, errNotFirst
	}
	t := newTerm(n, l, key, rev)
	// Every predecessor's key was gone before this read (a linearizable
	// one), so every write it guarded landed below its revision.
	t.handover = first.Header.Revision
	if !l.start(t, time.Now()) {
		return nil, errInDoubt
	}
	return t, nil
}

// waitPredecessors returns once no candidate key created before rev
// exists. It waits for the deletion of the latest one, then looks again,
// as concurrency.Election does: each candidate watches one key.
func (n *Node) waitPredecessors(ctx context.Context, rev int64) error {
	for {
		gctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
		resp, err := n.cli.Get(gctx, n.keys.leaderDir(),
			append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		cancel()
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := n.waitDelete(ctx, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitDelete waits for key to be deleted after revision rev. The watch
// requires an etcd leader, so that a member cut off from its cluster
// fails it instead of leaving it silent.
func (n *Node) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range n.cli.Watch(wctx, key, clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errWatchClosed
}

// retire deletes the key of term t, which has ended, if it is still
// there, retrying until it is done or l ends.
func (n *Node) retire(l *lease, t *Term) {
	b := n.newBackoff()
	for {
		ctx, cancel := context.WithTimeout(l.ctx, l.ttl)
		_, err := n.cli.Txn(ctx).If(t.Guard()).Then(clientv3.OpDelete(t.key)).Commit()
		cancel()
		if err == nil || !b.wait(l.over) {
			return
		}
	}
}
