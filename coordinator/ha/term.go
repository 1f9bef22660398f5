package ha

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A Term is one leadership term this node won: from the moment its leader
// key was confirmed first in the election until the term ends. Its
// methods are safe for concurrent use.
//
// With Shards, a Term is one shard's: the same, for the groups of that
// shard only, from the moment its owner key was created under the node's
// lease (ShardTerms).
type Term struct {
	n   *Node
	l   *lease
	key string
	rev int64
	// handover is a revision at or above which no earlier term of the
	// same leadership (or shard) wrote: HandoverRevision.
	handover int64
	shard    int // -1 for a leadership term
	ended    atomic.Bool
	done     chan struct{}
	once     sync.Once

	released chan struct{} // closed by Release
	relOnce  sync.Once
}

func newTerm(n *Node, l *lease, key string, rev int64) *Term {
	return &Term{n: n, l: l, key: key, rev: rev, handover: rev, shard: -1, done: make(chan struct{}), released: make(chan struct{})}
}

func newShardTerm(n *Node, l *lease, shard int, rev int64) *Term {
	t := newTerm(n, l, n.keys.shard(shard), rev)
	t.shard = shard
	return t
}

// Shard returns the term's shard, or -1 for a leadership term.
func (t *Term) Shard() int { return t.shard }

// Release tells the node that the holder of an ended shard term has
// stopped acting on it: its groups are dropped and the writes it had in
// flight have settled. A node moving a shard to another node waits for it
// (up to the election TTL) before deleting the owner key, so that the
// next owner loads everything the last one wrote, and no write of the last
// owner fails on its guard. Calls after the first do nothing.
func (t *Term) Release() { t.relOnce.Do(func() { close(t.released) }) }

// Guard returns the comparison that holds only while this term's leader
// key exists: CreateRevision(leader key) = Revision. Give it to
// etcdstore.Guard: etcd evaluates it when it applies a write, so a write
// of a deposed leader (paused, cut off, or just late) changes nothing,
// whatever its own clock said. It is monotone, as etcdstore requires: once
// the key is deleted it never holds again.
func (t *Term) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)
}

// Revision returns the create revision of the term's leader key: the
// term's identity, strictly increasing across the terms of the HA set.
func (t *Term) Revision() int64 { return t.rev }

// HandoverRevision returns a store revision above every write that an
// earlier term of this leadership (or of this shard) made: a reader that
// holds every write up to it holds the last one of the node it takes over
// from, and needs no read of the store's current revision to know so. A
// term's writes are guarded by its key (Guard), so each landed while the
// key existed, below the revision that deleted it. For a leadership term
// it is the revision of the read that found the node's candidate key
// first, made after every earlier candidate's key was gone (the term's
// own key may be older than the last leader's last write: a candidate
// puts it when it starts waiting). For a shard term it is the create
// revision of the owner key, put only once the previous owner's was gone.
func (t *Term) HandoverRevision() int64 { return t.handover }

// Valid reports whether, at now, this node may still act as the leader:
// the term has not ended and now is before the deadline its lease
// renewals vouch for (the package doc gives the arithmetic). now must be
// the current time from time.Now, whose monotonic reading is what is
// compared. Once Valid returns false it never returns true again, whatever
// now is passed later. It is an atomic load or two; check it before every
// reply that must come from the leader.
func (t *Term) Valid(now time.Time) bool {
	if t.ended.Load() {
		return false
	}
	if t.l.valid(now) {
		return true
	}
	// A renewal acknowledged just after this check could still move the
	// lease's deadline, but a term must not come back; and it must not
	// linger either, holding the leader key with Done open.
	t.end(reasonInDoubt)
	return false
}

// Done returns a channel closed when the term ends: its deadline passed
// (renewals failing), etcd dropped the lease or the key, it resigned, or
// the node closed. It closes promptly, but Valid is the authority: it
// turns false at the deadline itself.
func (t *Term) Done() <-chan struct{} { return t.done }

// Resign ends the term at once (Valid false, Done closed) and deletes its
// leader key, so that another candidate wins without waiting for the
// lease. The node stays a candidate, behind those that wait already, and
// may win a later term. It returns the deletion's error; the node keeps
// trying to delete the key in the background.
func (t *Term) Resign(ctx context.Context) error {
	t.end(reasonResigned)
	_, err := t.n.cli.Txn(ctx).If(t.Guard()).Then(clientv3.OpDelete(t.key)).Commit()
	return err
}

// end ends the term for r: Valid false first, then Done, then the
// metrics and the log.
func (t *Term) end(r endReason) {
	t.once.Do(func() {
		t.ended.Store(true)
		close(t.done)
		fields := []zap.Field{zap.Int64("revision", t.rev), zap.Stringer("reason", r), t.l.field()}
		if t.shard >= 0 {
			t.n.met.shardEnded(r)
			fields = append(fields, zap.Int("shard", t.shard))
			if r == reasonMoved || r == reasonClosed {
				t.n.logger().Debug("shard term ended", fields...)
			} else {
				t.n.logger().Warn("shard term ended", fields...)
			}
			return
		}
		t.n.met.termEnded(r)
		switch r {
		case reasonResigned, reasonClosed:
			t.n.logger().Info("leadership term ended", fields...)
		default:
			t.n.logger().Warn("leadership term ended", fields...)
		}
	})
}
