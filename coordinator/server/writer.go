package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// writer persists the records of every group's Readies through the Store
// (raft's asynchronous storage writes, with group commit): stepping a group
// only queues its records, and the writer writes everything queued since
// its last write in one Store.Persist call, while the groups keep
// stepping. Each queued write is acknowledged when its batch is durable (or
// failed); the group then releases the replies that waited for it.
//
// Up to maxBatches batches are written at once (a pipeline: etcd shares
// its fsyncs and apply between them, and a batch's round trip no longer
// holds up what queued behind it). A batch starts beside others only once
// minPipelined records wait: every transaction costs etcd as much as
// hundreds of records, so a trickle of writes is better served by one
// batch at a time, each growing while the one before is written.
// Concurrent batches are independent, so that the order in which they
// land does not matter:
//
//   - a write that touches a group's state beyond its offsets (members,
//     assignments, epochs, the generation log) goes into a batch only when
//     no write of its group is in flight in another batch, and while it
//     is in flight no other write of the group starts;
//   - writes of offsets only may overlap with other such writes of their
//     group, provided they touch different partitions: two commits of one
//     partition land in the order they were made.
//
// Within one batch a group may have any number of writes: the store
// applies a batch's records in order, and one that fails leaves a prefix
// of them written. So every write a group queued while its last batch was
// in flight goes out in the next batch together (a group of members
// joining at once costs one round trip per batch, not one per join).
//
// A write that must wait stays queued, and so does every later write of
// its group, so a group's writes start in the order it made them; the
// group acknowledges them in that order too (durability.go, written).
type writer struct {
	s     *Server
	store store.Store

	mu      sync.Mutex
	queue   []*write
	queued  int                     // records in queue
	batches int                     // being written
	flying  map[string]*groupWrites // the groups with writes in flight, by name
	closed  bool
	kick    chan struct{}
	drained chan struct{} // closed and replaced when the queue empties and no batch is in flight

	done chan struct{} // closed when the writer has stopped
	wg   sync.WaitGroup

	// maxWrites, if positive, caps the writes of one batch; benchmarks
	// set 1 to measure one store transaction per write against group
	// commit.
	maxWrites int
	// maxBatches caps the batches written at once, and minPipelined is
	// what must wait before a batch starts beside another.
	maxBatches, minPipelined int
}

// maxBatchesInFlight is the writer's default pipeline depth, and
// minPipelinedRecords the records that must wait before a batch starts
// while another is in flight. A transaction costs the embedded etcd
// about as much as 240 offset commits in it beyond that
// (BenchmarkTxnShape, store-nofold against store-nofold-x4: its raft
// entry, the WAL's fdatasync, the apply), so fewer records are better
// served by the batch that starts when one in flight lands.
const (
	maxBatchesInFlight  = 4
	minPipelinedRecords = 256
)

// groupWrites is what one group has in flight.
type groupWrites struct {
	writes  int
	general bool                               // a write beyond offsets is among them
	offsets map[coordinator.TopicPartition]int // the partitions of the offset-only writes
}

// write is one queued write: the records of one Ready, and what to do
// once they are durable.
type write struct {
	recs []coordinator.Record
	// group is the group the records are of.
	group *groupEntry
	// alone: no other write of the group may be in flight with this one,
	// whatever its records.
	alone bool
	// offsetsOnly: every record is an OffsetRecord, and the write is not
	// alone (set by submit).
	offsetsOnly bool
	// live reports, when the batch is built, whether the write is still
	// wanted; a write of a group that went offline since is skipped.
	live func() bool
	// done is called exactly once, from a writer goroutine: with nil
	// when the records are durable, errSkipped when live said no, or the
	// store's error.
	done func(err error)
}

// classify sets w.offsetsOnly from its records.
func (w *write) classify() {
	w.offsetsOnly = len(w.recs) > 0 && !w.alone
	for _, r := range w.recs {
		if _, ok := r.(*coordinator.OffsetRecord); !ok {
			w.offsetsOnly = false
			return
		}
	}
}

// errSkipped is the outcome of a write that was dropped unwritten because
// its group went offline before its turn.
var errSkipped = errors.New("server: write skipped: its group went offline")

// maxBatchRecords bounds one batch, so that one write stays within what a
// store accepts in reasonable time; the rest waits for the next batch.
const maxBatchRecords = 20000

func newWriter(s *Server, st store.Store) *writer {
	return &writer{
		s:            s,
		store:        st,
		flying:       make(map[string]*groupWrites),
		kick:         make(chan struct{}, 1),
		drained:      make(chan struct{}),
		done:         make(chan struct{}),
		maxBatches:   maxBatchesInFlight,
		minPipelined: minPipelinedRecords,
	}
}

// submit queues w. It never blocks on the store.
func (wr *writer) submit(w *write) {
	wr.mu.Lock()
	if wr.closed {
		wr.mu.Unlock()
		w.done(errWriterClosed)
		return
	}
	w.classify()
	wr.queue = append(wr.queue, w)
	wr.queued += len(w.recs)
	wr.mu.Unlock()
	wr.wake()
}

func (wr *writer) wake() {
	select {
	case wr.kick <- struct{}{}:
	default:
	}
}

var errWriterClosed = errors.New("server: the store writer is closed")

// run is the writer goroutine: it starts the batches, each written by a
// goroutine of its own. It returns once close has been called, the queue
// is empty and every batch is done.
func (wr *writer) run() {
	defer close(wr.done)
	defer wr.wg.Wait()
	for {
		wr.mu.Lock()
		var batch []*write
		for {
			if len(wr.queue) == 0 && wr.batches == 0 {
				close(wr.drained)
				wr.drained = make(chan struct{})
				if wr.closed {
					wr.mu.Unlock()
					return
				}
			}
			if wr.batches == 0 || wr.batches < wr.maxBatches && wr.queued >= wr.minPipelined {
				if batch = wr.take(); len(batch) > 0 {
					break
				}
			}
			wr.mu.Unlock()
			<-wr.kick
			wr.mu.Lock()
		}
		wr.batches++
		wr.mu.Unlock()
		wr.wg.Add(1)
		go wr.write(batch)
	}
}

// take moves the next batch out of the queue and records it in flight:
// the writes, in order, that may run beside the batches in flight (see
// writer), within maxBatchRecords and maxWrites. wr.mu must be held.
func (wr *writer) take() []*write {
	var batch []*write
	var held map[string]bool // groups with a write left queued: their later writes stay too
	size, n := 0, 0
	for _, w := range wr.queue {
		full := size > 0 && size+len(w.recs) > maxBatchRecords || wr.maxWrites > 0 && len(batch) == wr.maxWrites
		if full || held[w.group.name] || !wr.admit(w) {
			if held == nil {
				held = make(map[string]bool)
			}
			held[w.group.name] = true
			wr.queue[n] = w
			n++
			continue
		}
		batch = append(batch, w)
		size += len(w.recs)
		wr.queued -= len(w.recs)
	}
	// In flight only now: admit weighs a write against the other
	// batches, not against the writes of its group before it in this
	// one, which the store applies first (and a batch that fails
	// leaves a prefix of them written). A group's writes queued while
	// one of its writes was in flight so share the next batch, where
	// they would otherwise take a batch each.
	for _, w := range batch {
		wr.fly(w)
	}
	clear(wr.queue[n:])
	wr.queue = wr.queue[:n]
	return batch
}

// admit reports whether w may be written beside what its group has in
// flight. wr.mu must be held.
func (wr *writer) admit(w *write) bool {
	gw := wr.flying[w.group.name]
	if gw == nil {
		return true
	}
	if gw.general || !w.offsetsOnly {
		return false
	}
	for _, r := range w.recs {
		o := r.(*coordinator.OffsetRecord)
		if gw.offsets[coordinator.TopicPartition{Topic: o.Topic, Partition: o.Partition}] > 0 {
			return false
		}
	}
	return true
}

// fly records w in flight. wr.mu must be held.
func (wr *writer) fly(w *write) {
	gw := wr.flying[w.group.name]
	if gw == nil {
		gw = &groupWrites{}
		wr.flying[w.group.name] = gw
	}
	gw.writes++
	if !w.offsetsOnly {
		gw.general = true
		return
	}
	if gw.offsets == nil {
		gw.offsets = make(map[coordinator.TopicPartition]int)
	}
	for _, r := range w.recs {
		o := r.(*coordinator.OffsetRecord)
		gw.offsets[coordinator.TopicPartition{Topic: o.Topic, Partition: o.Partition}]++
	}
}

// land ends w's flight. wr.mu must be held.
func (wr *writer) land(w *write) {
	gw := wr.flying[w.group.name]
	if gw.writes--; gw.writes == 0 {
		delete(wr.flying, w.group.name)
		return
	}
	if !w.offsetsOnly {
		// The general writes of a group in flight are all in one batch
		// (admit), which lands whole: none is left flying.
		gw.general = false
		return
	}
	for _, r := range w.recs {
		o := r.(*coordinator.OffsetRecord)
		tp := coordinator.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if gw.offsets[tp]--; gw.offsets[tp] == 0 {
			delete(gw.offsets, tp)
		}
	}
}

// write writes one batch and acknowledges its writes.
func (wr *writer) write(batch []*write) {
	defer wr.wg.Done()
	var recs []coordinator.Record
	var skipped []*write
	live := make([]*write, 0, len(batch))
	for _, w := range batch {
		if !w.live() {
			skipped = append(skipped, w)
			continue
		}
		recs = append(recs, w.recs...)
		live = append(live, w)
	}
	var err error
	if len(live) > 0 {
		err = wr.persist(recs, len(live))
	}
	for _, w := range skipped {
		w.done(errSkipped)
	}
	for _, w := range live {
		w.done(err)
	}
	// Out of flight only once acknowledged: a failed write takes its
	// group offline in done, so that no later write of the group, made
	// by the core that failed, starts before its live check says no.
	wr.mu.Lock()
	for _, w := range batch {
		wr.land(w)
	}
	wr.batches--
	wr.mu.Unlock()
	wr.wake()
}

// persist writes one batch.
func (wr *writer) persist(recs []coordinator.Record, writes int) error {
	s := wr.s
	ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
	defer cancel()
	start := time.Now()
	err := wr.store.Persist(ctx, recs)
	s.m.persistSeconds.Observe(time.Since(start).Seconds())
	s.m.batchRecords.Observe(float64(len(recs)))
	s.m.batchWrites.Observe(float64(writes))
	if err != nil {
		s.m.storeFailures.Inc()
		s.log.Error("store write failed", zap.Int("records", len(recs)), zap.Int("writes", writes), zap.Error(err))
	}
	return err
}

// drain waits until every write queued so far is done, or ctx ends.
func (wr *writer) drain(ctx context.Context) bool {
	wr.mu.Lock()
	if len(wr.queue) == 0 && wr.batches == 0 {
		wr.mu.Unlock()
		return true
	}
	ch := wr.drained
	wr.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// close stops the writer once the queue is empty; writes submitted after
// close fail with errWriterClosed. It waits for the goroutine to exit.
func (wr *writer) close() {
	wr.mu.Lock()
	wr.closed = true
	wr.mu.Unlock()
	wr.wake()
	<-wr.done
}
