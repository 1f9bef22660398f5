package ha

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"go.uber.org/zap"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errNoFreeID is register's error when every int32 is taken, which a real
// set never meets.
var errNoFreeID = errors.New("ha: no free node ID")

// register claims a node ID under lease l: prefer if it is free or still
// bound to the node's previous lease old, otherwise the PreferID option's
// if free, otherwise the lowest free one.
// prefer < 0 means none: a node that joins prefers the ID its address had
// (stickyID).
func (n *Node) register(ctx context.Context, l *lease, prefer int32, old clientv3.LeaseID, addr string) (int32, error) {
	if prefer < 0 {
		id, ok, err := n.stickyID(ctx, l, addr)
		if err != nil || ok {
			return id, err
		}
	}
	if prefer >= 0 {
		ok, holder, err := n.claim(ctx, l, prefer, addr, clientv3.NoLease)
		if err != nil || ok {
			return prefer, err
		}
		// The old lease could not be revoked and still holds the key: the
		// key is this node's, and moves to the new lease.
		if old != clientv3.NoLease && holder == old {
			ok, _, err := n.claim(ctx, l, prefer, addr, old)
			if err != nil || ok {
				return prefer, err
			}
		}
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
		resp, err := n.cli.Get(rctx, n.keys.nodesDir(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			return 0, err
		}
		used := make(map[int32]bool, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			if id, ok := n.keys.nodeID(string(kv.Key)); ok {
				used[id] = true
			}
		}
		// An ID another address had stays that address's: a client may
		// still map it to that address.
		rctx, cancel = context.WithTimeout(ctx, n.cfg.ttl)
		held, err := n.cli.Get(rctx, n.keys.addrsDir(), clientv3.WithPrefix())
		cancel()
		if err != nil {
			return 0, err
		}
		for _, kv := range held.Kvs {
			if id, err := strconv.ParseInt(string(kv.Value), 10, 32); err == nil && string(kv.Key) != n.keys.addr(addr) {
				used[int32(id)] = true
			}
		}
		id := int32(0)
		if p := n.cfg.preferID; p >= 0 && !used[p] {
			id = p
		}
		for used[id] {
			if id == 1<<31-1 {
				return 0, errNoFreeID
			}
			id++
		}
		// Another node may claim the same ID first; then look again.
		ok, _, err := n.claim(ctx, l, id, addr, clientv3.NoLease)
		if err != nil {
			return 0, err
		}
		if ok {
			return id, n.remember(ctx, id, addr)
		}
	}
}

// stickyID claims the ID this node's address had before, as a Kafka broker
// keeps its ID across restarts: clients map broker IDs to addresses, and an
// ID that moved to another address would send them to the wrong node.
// After a kill -9 the previous incarnation's lease holds the ID for up to
// a TTL: stickyID waits for it, a little longer than that, before it gives
// up (ok false) and the caller takes an ID no address has had.
func (n *Node) stickyID(ctx context.Context, l *lease, addr string) (id int32, ok bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
	resp, err := n.cli.Get(rctx, n.keys.addr(addr))
	cancel()
	if err != nil || len(resp.Kvs) == 0 {
		return 0, false, err
	}
	v, perr := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 32)
	if perr != nil || v < 0 {
		return 0, false, nil
	}
	id = int32(v)
	deadline := time.Now().Add(2*n.cfg.ttl + time.Second)
	for {
		claimed, _, err := n.claim(ctx, l, id, addr, clientv3.NoLease)
		if err != nil || claimed {
			return id, claimed, err
		}
		if time.Now().After(deadline) {
			n.logger().Warn("the node ID of this address stays taken; taking another", zap.Int32("node_id", id), zap.String("addr", addr))
			return 0, false, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// remember records that addr has node ID id.
func (n *Node) remember(ctx context.Context, id int32, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
	defer cancel()
	_, err := n.cli.Put(ctx, n.keys.addr(addr), strconv.FormatInt(int64(id), 10))
	return err
}

// claim puts the nodes/ key of id under lease l, if the key does not exist
// (from == NoLease) or is bound to lease from. It reports whether it did,
// and otherwise the lease the key is bound to.
func (n *Node) claim(ctx context.Context, l *lease, id int32, addr string, from clientv3.LeaseID) (bool, clientv3.LeaseID, error) {
	key := n.keys.node(id)
	val, err := json.Marshal(NodeInfo{ID: id, Addr: addr, HTTP: n.cfg.http, Listeners: n.cfg.listeners, Format: n.cfg.format})
	if err != nil {
		return false, 0, err
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if from != clientv3.NoLease {
		cmp = clientv3.Compare(clientv3.LeaseValue(key), "=", from)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
	defer cancel()
	resp, err := n.cli.Txn(ctx).If(cmp).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(l.id))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return false, 0, err
	}
	if resp.Succeeded {
		return true, 0, nil
	}
	var holder clientv3.LeaseID
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		holder = clientv3.LeaseID(kvs[0].Lease)
	}
	return false, holder, nil
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
