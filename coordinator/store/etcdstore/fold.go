package etcdstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A fold moves a group's offset batches (offset_batch.go) back into its
// partition keys, so that a load reads a bounded number of batches. A
// store folds a group after it wrote (or loaded) FoldEvery of its
// batches, in the background, one fold of a group at a time:
//
//  1. It reads the group key, the group's batches and its partition keys
//     in one transaction, at revision R.
//  2. For each partition, the write of the highest order among the
//     batches read wins, unless the partition key's own order is higher.
//  3. It deletes the batches in the order of their revisions, each after
//     the partition writes it won (a put with "fr", the batch's revision,
//     or the key's deletion), in transactions of at most MaxTxnOps
//     operations, each comparing the guard, the fence and the group
//     key's ModRevision as read.
//
// Why it is safe:
//   - A batch written after R has a higher revision than any "fr" the
//     fold writes, so it keeps winning; the fold never compares it, so
//     commits go on while a fold runs.
//   - When a batch is deleted, every older batch is gone and its winning
//     writes are made, so a deleted partition key cannot be revived by an
//     older batch's entry, and a fold cut short leaves every partition as
//     it read: the winner of a partition not yet written is a batch not
//     yet deleted, and a partition key written from a batch not yet
//     deleted holds that batch's value at that batch's order.
//   - A group deleted or re-created after R has a new group key revision:
//     the fold writes nothing (its offsets do not come back).
//   - Only folds write partition keys, one at a time per group; a fold's
//     write of unknown outcome moves the fence as any write does, so it
//     cannot land after the next one read.

// ErrFoldRaced is returned by Fold when the group changed (its group key
// was written) since the fold read it: the fold stopped, leaving the rest
// of the batches to the next.
var ErrFoldRaced = errors.New("etcdstore: the group changed during the fold")

// foldState counts each group's batches not yet folded.
type foldState struct {
	mu      sync.Mutex
	pending map[string]int
	running map[string]bool
	// every holds, for a group whose last fold wrote many partition
	// keys, how many batches its next fold waits for (foldInterval).
	every map[string]int
}

// A fold costs etcd a put of every partition its batches won, so a group
// committing many partitions a batch would pay for each batch folded
// far more than its own put: at FoldEvery 64, a group of 1,000
// partitions committed 137 a batch wrote 16 partition keys a batch. So a
// group's folds wait until the last one's partition writes come to at
// most foldWritesPerBatch a batch folded, up to maxFoldStretch times
// FoldEvery batches; a group of a few partitions a batch (most) still
// folds every FoldEvery, and keeps the few batches that a load reads.
const (
	foldWritesPerBatch = 4
	maxFoldStretch     = 4
)

// foldInterval is how many batches a group's next fold waits for, after
// a fold that wrote writes partition keys.
func foldInterval(foldEvery, writes int) int {
	return min(max(foldEvery, writes/foldWritesPerBatch), maxFoldStretch*foldEvery)
}

// wroteBatches counts the batches of a transaction written, and starts
// the folds due.
func (s *Store) wroteBatches(t *plannedTxn) {
	for g := range t.batches {
		s.countBatches(g, 1, false)
	}
}

// loadedBatches counts the batches a load read of a group (a crash may
// have left them), and starts its fold if it is due.
func (s *Store) loadedBatches(group string, n int) { s.countBatches(group, n, true) }

func (s *Store) countBatches(group string, n int, loaded bool) {
	if n == 0 || s.cfg.foldEvery == 0 {
		return
	}
	f := &s.folds
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == nil {
		f.pending, f.running, f.every = map[string]int{}, map[string]bool{}, map[string]int{}
	}
	if loaded {
		f.pending[group] = max(f.pending[group], n)
	} else {
		f.pending[group] += n
	}
	if f.pending[group] < max(s.cfg.foldEvery, f.every[group]) || f.running[group] {
		return
	}
	f.running[group] = true
	counted := f.pending[group]
	ctx, end, err := s.begin(context.Background())
	if err != nil {
		f.running[group] = false
		return
	}
	go func() {
		defer end()
		n, writes, err := s.fold(ctx, group)
		f.mu.Lock()
		// Counted batches are folded, or left for the next fold after
		// FoldEvery more (a failed fold is not retried at once).
		f.pending[group] -= counted
		if f.pending[group] <= 0 {
			delete(f.pending, group)
		}
		delete(f.running, group)
		if every := foldInterval(s.cfg.foldEvery, writes); err == nil && every > s.cfg.foldEvery {
			f.every[group] = every
		} else {
			delete(f.every, group)
		}
		f.mu.Unlock()
		switch {
		case err == nil:
			s.cfg.log.Debug("etcd store: offsets folded", zap.String("group", group), zap.Int("batches", n))
		case foldGaveWay(ctx, err):
			s.cfg.log.Debug("etcd store: offset fold gave way", zap.String("group", group), zap.Error(err))
		default:
			s.cfg.log.Warn("etcd store: offset fold failed", zap.String("group", group), zap.Error(err))
		}
	}()
}

// forgetFolds drops what the store keeps for folding group, deleted.
func (s *Store) forgetFolds(group string) {
	f := &s.folds
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running[group] {
		delete(f.pending, group)
	}
	delete(f.every, group)
}

// foldGaveWay reports whether err ended a fold that gave way, to a change
// of its group, to the end of the node's term or to ctx, rather than
// failed: such a fold is retried by the next, and counting it would make
// tenure_store_errors_total{op="fold"} (and the alert on it) fire on
// groups that merely rebalance.
func foldGaveWay(ctx context.Context, err error) bool {
	return errors.Is(err, ErrFoldRaced) || ctx.Err() != nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrGuardFailed)
}

// Fold folds group's offset batches into its partition keys now, and
// returns how many it folded. Loads read the same records before and
// after, whatever else is written meanwhile; a fold that finds the group
// changed (ErrFoldRaced) leaves the rest for the next.
func (s *Store) Fold(ctx context.Context, group string) (n int, err error) {
	n, _, err = s.fold(ctx, group)
	return n, err
}

// fold is Fold, and also returns how many partition keys it wrote.
func (s *Store) fold(ctx context.Context, group string) (n, writes int, err error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer end()
	defer func() {
		if !foldGaveWay(ctx, err) {
			s.metrics.failed(opFold, err)
		}
	}()
	gk, bdir, odir := s.keys.group(group), s.keys.offsetBatchDir(group), s.keys.offsetDir(group)
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(gk),
		clientv3.OpGet(bdir, clientv3.WithRange(prefixEnd(bdir))),
		clientv3.OpGet(odir, clientv3.WithRange(prefixEnd(odir))),
	).Commit()
	if err != nil {
		return 0, 0, fmt.Errorf("etcdstore: reading the offsets of group %q: %w", group, err)
	}
	plan, err := s.planFold(group, rangeKV(resp, 0), resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs)
	if err != nil || len(plan) == 0 {
		return 0, 0, err
	}
	for i, t := range plan {
		if s.foldHook != nil {
			s.foldHook(i)
		}
		if err := s.commit(ctx, t); err != nil {
			return n, writes, fmt.Errorf("etcdstore: folding the offsets of group %q: %w", group, err)
		}
		n += t.records
		writes += t.live - t.records
	}
	return n, writes, nil
}

// planFold returns the fold's transactions, in order, from the group key,
// batches and partition keys read; each transaction's records count the
// batches it deletes.
func (s *Store) planFold(group string, gkv *mvccpb.KeyValue, batchKVs, offsetKVs []*mvccpb.KeyValue) ([]*plannedTxn, error) {
	if len(batchKVs) == 0 {
		return nil, nil
	}
	type keyState struct {
		order int64
		key   string
	}
	keyOf := map[tp]keyState{}
	for _, kv := range offsetKVs {
		pk, err := s.keys.parse(string(kv.Key))
		if err != nil || pk.kind != kindOffset {
			return nil, fmt.Errorf("etcdstore: key %q: not an offset key", kv.Key)
		}
		_, fr, err := decodeOffset(group, pk.name, pk.partition, kv.Value)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: key %q: %w", kv.Key, err)
		}
		if fr == 0 {
			fr = kv.ModRevision
		}
		keyOf[tp{pk.name, pk.partition}] = keyState{fr, string(kv.Key)}
	}
	batches := slices.Clone(batchKVs)
	slices.SortFunc(batches, func(a, b *mvccpb.KeyValue) int {
		return cmp.Or(cmp.Compare(a.ModRevision, b.ModRevision), slices.Compare(a.Key, b.Key))
	})
	// Each entry of every batch is read, but only a winner's value is
	// decoded (below, as it is folded): a loser's value is never
	// written again, and a load checks it (decodeBatch) as long as its
	// batch exists.
	type winner struct {
		seen  int    // 1 + the last batch that named the partition
		batch int    // -1: the partition key's write wins
		val   []byte // nil: deleted
	}
	won := make(map[tp]winner, len(keyOf))
	var sc batchScanner
	for i, kv := range batches {
		err := sc.scan(kv.Value, func(p tp, val []byte) error {
			w, ok := won[p]
			if ok && w.seen == i+1 {
				return fmt.Errorf("%w: %s/%d twice", errBadBatch, p.topic, p.partition)
			}
			w.seen = i + 1
			if k, ok := keyOf[p]; ok && k.order > kv.ModRevision {
				w.batch, w.val = -1, nil
			} else {
				w.batch, w.val = i, val
			}
			won[p] = w
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("etcdstore: key %q: %w", kv.Key, err)
		}
	}
	byBatch := make([][]tp, len(batches))
	for p, w := range won {
		if w.batch >= 0 {
			byBatch[w.batch] = append(byBatch[w.batch], p)
		}
	}
	for _, ps := range byBatch {
		// In a fixed order, so that a fold's transactions are too.
		slices.SortFunc(ps, func(a, b tp) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition)) })
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.group(group)), "=", modRevision(gkv))}
	maxOps := s.cfg.maxTxnOps
	if s.cfg.combiner != nil {
		maxOps = max(MinTxnOps, maxOps-combineRoom(maxOps))
	}
	var out []*plannedTxn
	var cur *plannedTxn
	add := func(o writeOp, batches int) {
		if cur == nil || cur.live+1 > maxOps || cur.live > 0 && cur.bytes+o.size() > s.cfg.maxTxnBytes {
			cur = newPlannedTxn(min(maxOps, 64))
			cur.cmps = cmps
			out = append(out, cur)
		}
		cur.add(o)
		cur.records += batches
	}
	for i, kv := range batches {
		// The batch's partition writes first, then its deletion: a
		// transaction boundary between them leaves the batch beside
		// keys of its own order and values, which read alike.
		for _, p := range byBatch[i] {
			w := won[p]
			if w.val == nil {
				if k, ok := keyOf[p]; ok {
					add(writeOp{key: k.key}, 0)
				}
				continue
			}
			r, fr, err := decodeOffset(group, p.topic, p.partition, w.val)
			switch {
			case err != nil:
				return nil, fmt.Errorf("etcdstore: key %q: %w: %s/%d: %w", kv.Key, errBadBatch, p.topic, p.partition, err)
			case fr != 0:
				return nil, fmt.Errorf("etcdstore: key %q: %w: %s/%d: a fold order in a batch", kv.Key, errBadBatch, p.topic, p.partition)
			}
			add(writeOp{key: s.keys.offset(group, p.topic, p.partition), val: foldedValue(r, kv.ModRevision), put: true}, 0)
		}
		add(writeOp{key: string(kv.Key)}, 1)
	}
	return out, nil
}
