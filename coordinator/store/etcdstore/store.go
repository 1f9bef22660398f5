package etcdstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// Store is a store.Store in etcd: one key per entity under a prefix, each
// overwritten in place (offsets in batches first, folded into their keys
// later: offset_batch.go), so it holds what a coordinator.RecordSet holds.
// It is safe for concurrent use; writes are serialized.
type Store struct {
	cli     *clientv3.Client
	cfg     cfg
	keys    keys
	self    fenceValue
	metrics *metrics

	// wmu guards fence; a write holds it to read the fence's revision
	// and to settle an unknown outcome, not over its transaction, so that
	// concurrent Persist calls (of distinct keys) are written at once.
	wmu   sync.Mutex
	fence fenceState
	// unsettled mirrors fence.unsettled for loads, which do not take wmu
	// unless it is set.
	unsettled atomic.Bool
	busy      busyState // etcd refusing proposals (busy.go)

	batchSeq atomic.Uint64 // of the offset batches' keys (batchKey)
	folds    foldState     // fold.go
	// foldHook, set by tests, runs before each of a fold's transactions
	// (0: the first, after the fold read).
	foldHook func(txn int)

	lifeMu      sync.RWMutex
	closed      bool
	inflight    sync.WaitGroup
	closeCtx    context.Context
	closeCancel context.CancelFunc
}

var _ store.Store = (*Store)(nil)

// New opens the store under the prefix (default "/tenure/") of cli's
// cluster, or of one shard of it (Shard). It creates the format and shard
// count keys if the prefix is new, refuses a prefix of a newer format
// (ErrNewerFormat) or of another shard count (ErrShardCount), and takes
// the fence over: from now on, a store opened earlier on the prefix (on
// the shard) writes nothing (see fence.go). cli stays the caller's: Close
// does not close it.
func New(ctx context.Context, cli *clientv3.Client, opts ...Opt) (*Store, error) {
	c := newCfg(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	self, err := newFenceValue()
	if err != nil {
		return nil, fmt.Errorf("etcdstore: store ID: %w", err)
	}
	s := &Store{cli: cli, cfg: c, keys: newKeys(c.prefix, c.shard, c.shards), self: self}
	if err := s.checkLayout(ctx); err != nil {
		return nil, err
	}
	resp, err := cli.Txn(ctx).If(c.guard...).Then(clientv3.OpPut(s.keys.fence(), self.encode())).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdstore: taking the fence %q: %w", s.keys.fence(), err)
	}
	if !resp.Succeeded {
		return nil, ErrGuardFailed
	}
	s.fence.rev = resp.Header.Revision
	if s.metrics, err = acquireMetrics(c.reg); err != nil {
		return nil, fmt.Errorf("etcdstore: metrics: %w", err)
	}
	s.closeCtx, s.closeCancel = context.WithCancel(context.Background())
	c.log.Info("etcd store opened", zap.Strings("endpoints", cli.Endpoints()), zap.String("prefix", c.prefix),
		zap.Int("shard", c.shard), zap.Int("shards", c.shards), zap.String("store_id", self.ID), zap.Int64("fence_revision", s.fence.rev),
		zap.Int("max_txn_ops", c.maxTxnOps), zap.Int("max_txn_bytes", c.maxTxnBytes))
	return s, nil
}

// begin starts an operation: it fails after Close, and ends the returned
// context when Close is called.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	s.lifeMu.RLock()
	if s.closed {
		s.lifeMu.RUnlock()
		return nil, nil, store.ErrClosed
	}
	s.inflight.Add(1)
	s.lifeMu.RUnlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.closeCtx, func() { cancel(store.ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
		s.inflight.Done()
	}, nil
}

// Persist implements store.Store: the records become write transactions
// (txn.go), each guarded and fenced (fence.go), applied one after the
// other. A batch with a record of an unknown type writes nothing.
// Concurrent calls run their transactions at once (etcd then shares its
// fsyncs between them); their records must be of distinct keys, since
// etcd orders concurrent requests as it pleases.
func (s *Store) Persist(ctx context.Context, recs []coordinator.Record) (err error) {
	if err := store.Check(recs); err != nil {
		return err
	}
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	if len(recs) == 0 {
		return nil
	}
	maxOps := s.cfg.maxTxnOps
	if s.cfg.combiner != nil {
		maxOps = max(MinTxnOps, maxOps-combineRoom(maxOps))
	}
	txns := s.keys.plan(recs, maxOps, s.cfg.maxTxnBytes, s.batchKey)
	defer func() {
		if err != nil {
			s.metrics.failed(opPersist, err)
		}
	}()
	for i, t := range txns {
		if err := s.commit(ctx, t); err != nil {
			s.cfg.log.Warn("etcd store: persist failed", zap.Int("txn", i+1), zap.Int("txns", len(txns)),
				zap.Int("records", len(recs)), zap.Error(err))
			return fmt.Errorf("etcdstore: transaction %d of %d (%d records): %w", i+1, len(txns), t.records, err)
		}
		for _, g := range t.deleted {
			s.forgetFolds(g) // its batches are gone
		}
		s.wroteBatches(t)
	}
	return nil
}

// batchKey returns the key of a new offset batch of group: the store's
// ID and a sequence number make it unique among every store's.
func (s *Store) batchKey(group string) string {
	var b [40]byte
	id := append(append(b[:0], s.self.ID...), '-')
	id = strconv.AppendUint(id, s.batchSeq.Add(1), 10)
	return s.keys.offsetBatch(group, string(id))
}

// writable returns the fence revision a write compares, after settling
// an unknown outcome if one is pending.
func (s *Store) writable(ctx context.Context) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.fence.fencedBy != nil {
		return 0, s.fencedErr()
	}
	if s.fence.unsettled {
		fctx, cancel := s.fenceCtx(ctx)
		err := s.settle(fctx)
		cancel()
		s.unsettled.Store(s.fence.unsettled)
		if err != nil {
			return 0, err
		}
	}
	return s.fence.rev, nil
}

// fenceCtx is the context of a fence move after a failed write: detached
// from ctx, whose deadline is often what failed, but bounded by
// FenceTimeout and ended by Close.
func (s *Store) fenceCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.fenceTimeout)
	stop := context.AfterFunc(s.closeCtx, cancel)
	return fctx, func() {
		stop()
		cancel()
	}
}

// maxFenceMoves bounds how often one write adopts a fence that its own
// late moves shifted, in case something keeps moving it.
const maxFenceMoves = 3

// commit writes one planned transaction, comparing the fence revision
// known when it starts.
func (s *Store) commit(ctx context.Context, t *plannedTxn) error {
	ops := t.clientOps()
	for range maxFenceMoves {
		rev, err := s.writable(ctx)
		if err != nil {
			return err
		}
		// A refusal as too many requests wrote nothing, so the same
		// comparison holds for the next attempt (busy.go).
		var resp *clientv3.TxnResponse
		err = s.whenAccepted(ctx, func() (err error) {
			start := time.Now()
			resp, err = s.txn(ctx, append(s.writeCmpsAt(rev), t.cmps...), ops, []clientv3.Op{clientv3.OpGet(s.keys.fence())}, t.bytes)
			s.metrics.txn(time.Since(start).Seconds(), t.records, t.bytes)
			return err
		})
		if err != nil {
			if knownRejection(err) {
				return fmt.Errorf("rejected by etcd, nothing written: %w", err)
			}
			return s.unknownOutcome(ctx, rev, err)
		}
		if resp.Succeeded {
			return nil
		}
		frev, v, ok := readFence(resp)
		switch {
		case !ok:
			return errors.New("etcdstore: unexpected response to a failed comparison")
		case frev == rev && len(t.cmps) > 0:
			return ErrFoldRaced // or the guard failed: the next Persist finds out
		case frev == rev:
			return ErrGuardFailed
		}
		s.wmu.Lock()
		err = s.movedSince(frev, v)
		s.wmu.Unlock()
		if err != nil {
			return err
		}
	}
	return errors.New("etcdstore: the fence keeps moving")
}

// txn sends one write transaction, through the Combiner if the store has
// one.
func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op, bytes int) (*clientv3.TxnResponse, error) {
	if c := s.cfg.combiner; c != nil {
		return c.txn(ctx, cmps, then, els, bytes)
	}
	return s.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
}

// unknownOutcome settles a write that compared fence revision rev and
// failed with err, its outcome unknown, and returns the error to report.
func (s *Store) unknownOutcome(ctx context.Context, rev int64, err error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.fence.rev != rev {
		// A concurrent write moved the fence (or adopted a move)
		// since this one was sent: it can no longer land.
		return fmt.Errorf("outcome unknown at first, fenced since, so final: %w", err)
	}
	s.fence.unsettled = true
	s.unsettled.Store(true)
	fctx, cancel := s.fenceCtx(ctx)
	serr := s.settle(fctx)
	cancel()
	s.unsettled.Store(s.fence.unsettled)
	switch {
	case errors.Is(serr, ErrUnsettled):
		return fmt.Errorf("outcome unknown: %w; %w", err, serr)
	case serr != nil:
		return fmt.Errorf("outcome unknown at first, final since: %w; %w", err, serr)
	}
	return fmt.Errorf("outcome unknown at first, fenced since, so final: %w", err)
}

// readable makes sure a load sees final outcomes: it settles a write of
// unknown outcome first.
func (s *Store) readable(ctx context.Context) error {
	if !s.unsettled.Load() {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.settle(ctx)
	s.unsettled.Store(s.fence.unsettled)
	if errors.Is(err, ErrGuardFailed) || errors.Is(err, ErrFenced) {
		return nil // settled all the same
	}
	return err
}

// maxLoadAttempts bounds the restarts of a load whose revision was
// compacted between its pages.
const maxLoadAttempts = 3

// Load implements store.Store. It reads the whole prefix but the
// generation logs, or for a shard's store the topics and the shard's
// groups only, at one revision, in pages.
func (s *Store) Load(ctx context.Context) ([]coordinator.Record, error) {
	recs, err := s.load(ctx, s.keys.loadRanges(), "", false)
	s.metrics.failed(opLoad, err)
	return recs, err
}

// LoadGroup implements store.Store.
func (s *Store) LoadGroup(ctx context.Context, group string) ([]coordinator.Record, error) {
	dir := s.keys.groupDir(group)
	recs, err := s.load(ctx, []keyRange{{dir, prefixEnd(dir)}}, group, true)
	s.metrics.failed(opLoadGroup, err)
	return recs, err
}

// load reads the ranges, all at one revision: the store's, or one group's
// directory (oneGroup).
func (s *Store) load(ctx context.Context, ranges []keyRange, group string, oneGroup bool) ([]coordinator.Record, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c := newCollected()
		var rev int64
		var err error
		for _, r := range ranges {
			if rev, err = s.scan(ctx, r.start, r.end, rev, c); err != nil {
				break
			}
		}
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < maxLoadAttempts {
			s.cfg.log.Warn("etcd store: load outran compaction; starting again", zap.String("from", ranges[0].start), zap.Error(err))
			continue
		}
		if err != nil {
			return nil, err
		}
		if oneGroup && (len(c.topics) > 0 || len(c.groups) > 1 || (len(c.groups) == 1 && c.groups[group] == nil)) {
			return nil, fmt.Errorf("etcdstore: a key under %q is not of group %q", ranges[0].start, group)
		}
		recs, err := c.records()
		if err != nil {
			return nil, err
		}
		for name, g := range c.groups {
			s.loadedBatches(name, g.batches)
		}
		return recs, nil
	}
}

// scan reads every key in [start, end) in pages, all at revision rev
// (0: the first page's), so that the result is one consistent state; it
// returns the revision read.
func (s *Store) scan(ctx context.Context, start, end string, rev int64, c *collected) (int64, error) {
	dir := start
	key := start
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(s.cfg.pageSize))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, key, opts...)
		if err != nil {
			return rev, fmt.Errorf("etcdstore: reading %q: %w", dir, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := c.add(s.keys, string(kv.Key), kv.Value, kv.ModRevision); err != nil {
				return rev, fmt.Errorf("etcdstore: key %q: %w", kv.Key, err)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// collected is what a scan found, by group.
type collected struct {
	topics []*coordinator.TopicRecord
	groups map[string]*groupRecords
}

type groupRecords struct {
	name        string
	group       *coordinator.GroupRecord
	members     []*coordinator.MemberRecord
	assignments []*coordinator.AssignmentRecord
	offsets     *offsetMerge
	batches     int
}

var errOtherShard = errors.New("a group key of another shard, or of another layout")

func newCollected() *collected { return &collected{groups: make(map[string]*groupRecords)} }

func (c *collected) add(k keys, key string, val []byte, modRev int64) error {
	pk, err := k.parse(key)
	if err != nil {
		return err
	}
	switch pk.kind {
	case kindMeta, kindLog, kindUser, kindACL:
		return nil // not group state
	case kindGroup, kindMember, kindAssignment, kindOffset, kindOffsetBatch:
		if !k.ownsGroup(pk) {
			return errOtherShard
		}
	}
	switch pk.kind {
	case kindOffset:
		return c.groupOf(pk.group).offsets.addKey(pk.group, tp{pk.name, pk.partition}, modRev, val)
	case kindOffsetBatch:
		g := c.groupOf(pk.group)
		g.batches++
		return g.offsets.addBatch(pk.group, modRev, val)
	}
	r, err := decodeValue(pk, val)
	if err != nil {
		return err
	}
	if t, ok := r.(*coordinator.TopicRecord); ok {
		c.topics = append(c.topics, t)
		return nil
	}
	c.groupOf(pk.group).add(r)
	return nil
}

func (c *collected) groupOf(name string) *groupRecords {
	g := c.groups[name]
	if g == nil {
		g = &groupRecords{name: name, offsets: newOffsetMerge(0)}
		c.groups[name] = g
	}
	return g
}

// add takes one of the group's records other than offsets.
func (g *groupRecords) add(r coordinator.Record) {
	switch r := r.(type) {
	case *coordinator.GroupRecord:
		g.group = r
	case *coordinator.MemberRecord:
		g.members = append(g.members, r)
	case *coordinator.AssignmentRecord:
		g.assignments = append(g.assignments, r)
	}
}

// records returns the records in RecordSet's load order. Escaped keys do
// not sort as the names do in general, nor decimal partitions as numbers,
// so everything is sorted here.
func (c *collected) records() ([]coordinator.Record, error) {
	var out []coordinator.Record
	slices.SortFunc(c.topics, func(a, b *coordinator.TopicRecord) int { return cmp.Compare(a.Name, b.Name) })
	for _, t := range c.topics {
		out = append(out, t)
	}
	for _, name := range slices.Sorted(maps.Keys(c.groups)) {
		var err error
		if out, err = c.groups[name].appendRecords(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendRecords appends the group's records in RecordSet's load order: a
// group whose keys hold nothing but offset deletions (batches whose every
// write was a deletion) has no records.
func (g *groupRecords) appendRecords(out []coordinator.Record) ([]coordinator.Record, error) {
	if g.group != nil {
		out = append(out, g.group)
	}
	slices.SortFunc(g.members, func(a, b *coordinator.MemberRecord) int { return cmp.Compare(a.MemberID, b.MemberID) })
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(g.assignments, func(a, b *coordinator.AssignmentRecord) int { return cmp.Compare(a.MemberID, b.MemberID) })
	for _, a := range g.assignments {
		out = append(out, a)
	}
	offsets, err := g.offsets.records(g.name, make([]*coordinator.OffsetRecord, 0, len(g.offsets.m)))
	if err != nil {
		return out, err
	}
	slices.SortFunc(offsets, func(a, b *coordinator.OffsetRecord) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, o := range offsets {
		out = append(out, o)
	}
	return out, nil
}

// Close implements store.Store: calls in flight end (a write among them
// with an unknown outcome; the next store opened on the prefix fences it),
// later calls fail with store.ErrClosed, and the metrics are unregistered
// unless another store still uses them.
// It does not close the client, which is the caller's.
func (s *Store) Close() error {
	s.lifeMu.Lock()
	if s.closed {
		s.lifeMu.Unlock()
		return nil
	}
	s.closed = true
	s.lifeMu.Unlock()
	s.closeCancel()
	s.inflight.Wait()
	s.metrics.release()
	s.cfg.log.Info("etcd store closed", zap.String("prefix", s.cfg.prefix), zap.Int("shard", s.cfg.shard),
		zap.String("store_id", s.self.ID))
	return nil
}
