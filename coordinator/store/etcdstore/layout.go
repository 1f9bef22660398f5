package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// FormatVersion is the newest version of the key layout and value
// encoding that this package reads, kept in <prefix>meta/format. Version 2
// added the generation log (log/) and drained members, version 3 the SASL
// users' credentials (users/), version 4 the sharded layout (shards/,
// meta/shards), version 5 the offset batches (obatch/, and "fr" in
// partition keys: offset_batch.go), version 6 the targets in group values
// (TargetsFormat). A node of an HA set advertises it to the others
// (ha.ReadsFormat), so that the set knows when every node reads it.
const FormatVersion = 6

// openFormat is the format New raises an older prefix to, so that an
// older tenure refuses it rather than fail on keys it does not know, or
// read none of the groups, or (before 5) read a partition key's offset
// and miss the newer one in a batch: from 5 on, the nodes of an HA set
// could not be upgraded one at a time across those changes (docs/
// STORE.md). Past it, a format is raised only once every node of the
// set reads it (RaiseFormat), so that the set is upgraded node by node.
const openFormat = 5

// TargetsFormat is the format from which the prefix's group values may
// carry the targets of an epoch bump (coordinator.GroupRecord.Targets,
// value version 3), which tenures before it refuse. Below it, a group's
// records must keep every target in its members' assignment values
// (coordinator.Group.SetGroupTargets(false)): the store writes what it
// is given.
const TargetsFormat = 6

// ErrNewerFormat is returned by New for a prefix that a newer tenure has
// written in a format this one does not know.
var ErrNewerFormat = errors.New("etcdstore: the store's format is newer than this tenure's")

// ErrShardCount is returned by New when the shard count of the store
// (Shard) is not the one recorded in <prefix>meta/shards: stores of two
// counts on one prefix would give a group two owners. A prefix without
// the key (written before tenure had shards) counts as unsharded.
var ErrShardCount = errors.New("etcdstore: the shard count is not the prefix's")

// maxLayoutAttempts bounds how often New reads the layout keys again
// because other stores changed them meanwhile.
const maxLayoutAttempts = 8

// checkLayout checks the prefix's format and shard count against the
// store's before New writes anything else, and writes what the prefix
// lacks. Each write compares the two keys' revisions as read (and the
// guard), so it is decided by the transaction: a new prefix gets both keys
// in one, and of two first stores with different counts exactly one
// creates them and the other reads the winner's count and fails.
func (s *Store) checkLayout(ctx context.Context) error {
	fk, ck := s.keys.format(), s.keys.shardCount()
	for range maxLayoutAttempts {
		resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(fk), clientv3.OpGet(ck)).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: reading %q and %q: %w", fk, ck, err)
		}
		format, count := rangeKV(resp, 0), rangeKV(resp, 1)
		w, err := decideLayout(s.keys, format, count, s.storeFormat(), s.cfg.shards)
		if err != nil {
			return err
		}
		var ops []clientv3.Op
		if w.format > 0 {
			ops = append(ops, clientv3.OpPut(fk, strconv.Itoa(w.format)))
		}
		if w.count {
			ops = append(ops, clientv3.OpPut(ck, strconv.Itoa(s.cfg.shards)))
		}
		if len(ops) == 0 {
			return nil
		}
		cmps := append(slices.Clip(s.cfg.guard),
			clientv3.Compare(clientv3.ModRevision(fk), "=", modRevision(format)),
			clientv3.Compare(clientv3.ModRevision(ck), "=", modRevision(count)))
		tr, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(fk), clientv3.OpGet(ck)).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: writing %q and %q: %w", fk, ck, err)
		}
		if tr.Succeeded {
			w.log(s.cfg.log, s.cfg.prefix, s.cfg.shards)
			return nil
		}
		if modRevision(rangeKV(tr, 0)) == modRevision(format) && modRevision(rangeKV(tr, 1)) == modRevision(count) {
			return ErrGuardFailed
		}
		// Another store wrote them meanwhile: read again.
	}
	return fmt.Errorf("etcdstore: %q and %q keep changing", fk, ck)
}

// storeFormat is the format New gives a new prefix and raises an older
// one to.
func (s *Store) storeFormat() int { return openFormat }

// layoutWrites is what a store writes to the layout keys before it opens
// the prefix.
type layoutWrites struct {
	format int  // put the format key at this version; 0: leave it
	from   int  // the version read; 0: none, a new prefix
	count  bool // record the store's shard count
}

// decideLayout decides, from the format and shard count keys as read (nil:
// absent), whether a store of format want and shards shards may open the
// prefix of k, and what it must write first.
func decideLayout(k keys, format, count *mvccpb.KeyValue, want, shards int) (layoutWrites, error) {
	if format == nil && count == nil {
		return layoutWrites{format: want, count: true}, nil // a new prefix
	}
	v := 0
	if format != nil {
		var err error
		v, err = strconv.Atoi(string(format.Value))
		switch {
		case err != nil || v < 1:
			return layoutWrites{}, fmt.Errorf("etcdstore: key %q holds %q, not a format version", k.format(), format.Value)
		case v > FormatVersion:
			return layoutWrites{}, fmt.Errorf("%w: prefix %q has format %d, this tenure knows up to %d", ErrNewerFormat, k.prefix, v, FormatVersion)
		}
	}
	// A count without a format: the HA set recorded it when its first
	// node joined (package ha, which checks it at Join), before any
	// store opened the prefix.
	recorded := 1
	if count != nil {
		n, err := strconv.Atoi(string(count.Value))
		if err != nil || n < 1 || strconv.Itoa(n) != string(count.Value) {
			return layoutWrites{}, fmt.Errorf("etcdstore: key %q holds %q, not a shard count", k.shardCount(), count.Value)
		}
		recorded = n
	}
	if recorded != shards {
		return layoutWrites{}, fmt.Errorf("%w: prefix %q holds the layout of %s, this store was opened for %s; "+
			"the count is fixed once a prefix is used (%q)", ErrShardCount, k.prefix, shardsName(recorded), shardsName(shards), k.shardCount())
	}
	w := layoutWrites{from: v, count: count == nil}
	if format == nil {
		return layoutWrites{format: want}, nil
	}
	if v < want {
		// Every older format is a subset of this one: raising the
		// version is the whole upgrade.
		w.format = want
	}
	return w, nil
}

func shardsName(n int) string {
	if n == 1 {
		return "1 shard (unsharded)"
	}
	return strconv.Itoa(n) + " shards"
}

func (w layoutWrites) log(log *zap.Logger, prefix string, shards int) {
	switch {
	case w.from == 0:
		log.Info("etcd store: new prefix", zap.String("prefix", prefix), zap.Int("format", w.format), zap.Int("shards", shards))
	case w.format > 0:
		log.Info("etcd store: format upgraded", zap.String("prefix", prefix), zap.Int("from", w.from), zap.Int("to", w.format))
	}
	if w.from != 0 && w.count {
		log.Info("etcd store: shard count recorded", zap.String("prefix", prefix), zap.Int("shards", shards))
	}
}

// rangeKV returns the key read by the i-th operation of a transaction's
// branch, or nil if it is absent.
func rangeKV(resp *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	if i >= len(resp.Responses) {
		return nil
	}
	rr := resp.Responses[i].GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		return nil
	}
	return rr.Kvs[0]
}

// modRevision is kv's ModRevision, 0 for an absent key, as etcd compares it.
func modRevision(kv *mvccpb.KeyValue) int64 {
	if kv == nil {
		return 0
	}
	return kv.ModRevision
}
