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
// only queues its records, and one goroutine writes everything queued
// since its last write in one Store.Persist call, while the groups keep
// stepping. Each queued write is acknowledged, in the order it was queued,
// when its batch is durable (or failed); the group then releases the
// replies that waited for it.
//
// One batch is in flight at a time, so a group's writes reach the store in
// the order the group produced them, and a later write of a group never
// lands before an earlier one.
type writer struct {
	s     *Server
	store store.Store

	mu      sync.Mutex
	queue   []*write
	busy    bool // a batch is being written
	closed  bool
	kick    chan struct{}
	drained chan struct{} // closed and replaced when the queue empties

	done chan struct{} // closed when the goroutine exits

	// maxWrites, if positive, caps the writes of one batch; benchmarks
	// set 1 to measure one store transaction per write against group
	// commit.
	maxWrites int
}

// write is one queued write: the records of one Ready, and what to do
// once they are durable.
type write struct {
	recs []coordinator.Record
	// live reports, when the batch is built, whether the write is still
	// wanted; a write of a group that went offline since is skipped.
	live func() bool
	// done is called exactly once, from the writer goroutine: with nil
	// when the records are durable, errSkipped when live said no, or the
	// store's error.
	done func(err error)
}

// errSkipped is the outcome of a write that was dropped unwritten because
// its group went offline before its turn.
var errSkipped = errors.New("server: write skipped: its group went offline")

// maxBatchRecords bounds one batch, so that one write stays within what a
// store accepts in reasonable time; the rest waits for the next batch.
const maxBatchRecords = 20000

func newWriter(s *Server, st store.Store) *writer {
	return &writer{
		s:       s,
		store:   st,
		kick:    make(chan struct{}, 1),
		drained: make(chan struct{}),
		done:    make(chan struct{}),
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
	wr.queue = append(wr.queue, w)
	wr.mu.Unlock()
	select {
	case wr.kick <- struct{}{}:
	default:
	}
}

var errWriterClosed = errors.New("server: the store writer is closed")

// run is the writer goroutine. It returns once close has been called and
// the queue is empty.
func (wr *writer) run() {
	defer close(wr.done)
	var batch []*write
	var recs []coordinator.Record
	for {
		wr.mu.Lock()
		for len(wr.queue) == 0 {
			wr.busy = false
			close(wr.drained)
			wr.drained = make(chan struct{})
			if wr.closed {
				wr.mu.Unlock()
				return
			}
			wr.mu.Unlock()
			<-wr.kick
			wr.mu.Lock()
		}
		wr.busy = true
		n, size := 0, 0
		for n < len(wr.queue) && (size == 0 || size+len(wr.queue[n].recs) <= maxBatchRecords) && (wr.maxWrites == 0 || n < wr.maxWrites) {
			size += len(wr.queue[n].recs)
			n++
		}
		batch = append(batch[:0], wr.queue[:n]...)
		rest := copy(wr.queue, wr.queue[n:])
		clear(wr.queue[rest:])
		wr.queue = wr.queue[:rest]
		wr.mu.Unlock()

		recs = recs[:0]
		var skipped []*write
		live := batch[:0]
		for _, w := range batch {
			if !w.live() {
				skipped = append(skipped, w)
				continue
			}
			recs = append(recs, w.recs...)
			live = append(live, w)
		}
		for _, w := range skipped {
			w.done(errSkipped)
		}
		if len(live) == 0 {
			continue
		}
		err := wr.persist(recs, len(live))
		for _, w := range live {
			w.done(err)
		}
		clear(batch)
		clear(recs)
	}
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
	if len(wr.queue) == 0 && !wr.busy {
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
	select {
	case wr.kick <- struct{}{}:
	default:
	}
	<-wr.done
}
