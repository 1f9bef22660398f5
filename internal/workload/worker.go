package workload

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/member"
)

// Config configures a [Worker]. Resource is required.
type Config struct {
	// Resource receives the records.
	Resource Resource
	// Name is written into every record, to tell who wrote it.
	Name string
	// Interval is the time one record takes to work on. Default 200 ms.
	Interval time.Duration
	// CommitEvery is how many records are written between two commits of
	// the offset. Zero commits only when a claim is revoked.
	CommitEvery int
	// WriteTimeout bounds one append or admit. Default 5 s.
	WriteTimeout time.Duration
	// Pause, if not nil, holds the writes during a pause (see [Pause]).
	Pause *Pause
	// Logger receives claim starts and stops and rejected writes.
	// Default: none.
	Logger *zap.Logger
	// Observe, if not nil, is called after every append with its outcome,
	// from the claim's goroutine.
	Observe func(Write)
}

// Stats counts a worker's appends since it was created.
type Stats struct {
	Written  int64 // accepted by the resource
	Rejected int64 // rejected for a stale token
	Held     int64 // held by a pause (accepted or not)
}

// Worker does the fake work on claims; its Handle method is the
// member.Handler to give member.Join.
type Worker struct {
	cfg                     Config
	log                     *zap.Logger
	written, rejected, held atomic.Int64
}

// New returns a worker configured by cfg.
func New(cfg Config) (*Worker, error) {
	if cfg.Resource == nil {
		return nil, errors.New("workload: no resource")
	}
	if cfg.Interval < 0 || cfg.CommitEvery < 0 || cfg.WriteTimeout < 0 {
		return nil, errors.New("workload: negative interval, commit count or write timeout")
	}
	if cfg.Interval == 0 {
		cfg.Interval = 200 * time.Millisecond
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Worker{cfg: cfg, log: cfg.Logger}, nil
}

// Stats returns the worker's counts so far.
func (w *Worker) Stats() Stats {
	return Stats{Written: w.written.Load(), Rejected: w.rejected.Load(), Held: w.held.Load()}
}

// retryDelay spaces the retries of a failed admit, offset read or append.
const retryDelay = 200 * time.Millisecond

// Handle works on one claim until its context ends or the resource rejects
// its token; see the package documentation.
func (w *Worker) Handle(c *member.Claim) {
	ctx := c.Context()
	log := w.log.With(zap.String("topic", c.Topic()), zap.Int32("partition", c.Partition()), zap.Int64("token", int64(c.Token())))
	r := &claimRun{w: w, c: c, ctx: ctx, log: log}
	r.run()
}

// claimRun is one run of Handle.
type claimRun struct {
	w           *Worker
	c           *member.Claim
	ctx         context.Context
	log         *zap.Logger
	next        int64  // sequence number of the next record: the offset
	sinceCommit int    // records written since the last commit
	written     int    // records written by this run
	fenced      string // why the resource or the coordinator ended the run, if it did
}

func (r *claimRun) run() {
	if r.start() {
		r.log.Info("claim started", zap.Int64("offset", r.next))
		r.work()
	}
	cause := "handler returned"
	if r.fenced != "" {
		cause = r.fenced
	} else if err := context.Cause(r.ctx); err != nil {
		cause = err.Error()
		if errors.Is(err, member.ErrRevoked) && r.sinceCommit > 0 {
			// A graceful hand-off: the token is still valid, so the next
			// owner resumes where this one stopped.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.w.cfg.WriteTimeout)
			err := r.c.Commit(cctx, r.next, "")
			cancel()
			if err != nil {
				r.log.Warn("final commit failed: the next owner redoes the records since the last commit", zap.Int64("offset", r.next), zap.Error(err))
			} else {
				r.sinceCommit = 0
			}
		}
	}
	r.log.Info("claim stopped", zap.String("cause", cause), zap.Int64("offset", r.next), zap.Int("written", r.written))
}

// start fences the partition's former owners and reads where to resume;
// false if the claim ended first.
func (r *claimRun) start() bool {
	for r.ctx.Err() == nil {
		actx, cancel := context.WithTimeout(r.ctx, r.w.cfg.WriteTimeout)
		err := r.w.cfg.Resource.Admit(actx, epoch.Partition(r.c.Partition()), r.c.Token())
		cancel()
		if err == nil {
			break
		}
		if r.rejected(err, "admit", -1, false) {
			return false
		}
		if r.ctx.Err() == nil {
			r.log.Warn("admitting the token failed; retrying", zap.Error(err))
		}
		r.sleep(retryDelay)
	}
	for r.ctx.Err() == nil {
		next, err := r.c.Committed(r.ctx)
		if err == nil {
			r.next = max(next, 0)
			return true
		}
		if r.ctx.Err() == nil {
			r.log.Warn("reading the committed offset failed; retrying", zap.Error(err))
		}
		r.sleep(retryDelay)
	}
	return false
}

// work appends records until the claim ends.
func (r *claimRun) work() {
	t := time.NewTimer(r.w.cfg.Interval)
	defer t.Stop()
	for {
		// The claim check: from here to the write below, the work goes on
		// under this token.
		if r.ctx.Err() != nil {
			return
		}
		t.Reset(r.w.cfg.Interval)
		stopped := false
		select {
		case <-t.C:
		case <-r.ctx.Done():
			stopped = true
		}
		// A pause freezes the goroutine here, between the check and the
		// write; what it decided above stands when it wakes.
		held := r.w.cfg.Pause.Hold()
		if stopped {
			return
		}
		if !r.append(held) {
			return
		}
	}
}

// append writes the next record; false if the claim must stop.
func (r *claimRun) append(held bool) bool {
	rec := Record{Partition: epoch.Partition(r.c.Partition()), Seq: r.next, Token: r.c.Token(), Worker: r.w.cfg.Name}
	// Not the claim's context: a write decided before the claim was
	// revoked may still be on its way. The resource decides.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.w.cfg.WriteTimeout)
	err := r.w.cfg.Resource.Append(wctx, rec)
	cancel()
	if held {
		r.w.held.Add(1)
	}
	if r.w.cfg.Observe != nil {
		r.w.cfg.Observe(Write{Record: rec, Err: err, Held: held, At: time.Now()})
	}
	if err != nil {
		if r.rejected(err, "append", rec.Seq, held) {
			return false
		}
		r.log.Warn("write failed; retrying", zap.Int64("seq", rec.Seq), zap.Error(err))
		return true
	}
	r.w.written.Add(1)
	r.next++
	r.written++
	r.sinceCommit++
	if r.w.cfg.CommitEvery > 0 && r.sinceCommit >= r.w.cfg.CommitEvery {
		return r.commit()
	}
	return true
}

// commit commits the offset; false if the claim must stop.
func (r *claimRun) commit() bool {
	err := r.c.Commit(r.ctx, r.next, "")
	if err == nil {
		r.sinceCommit = 0
		return true
	}
	if ce, ok := errors.AsType[*member.CommitError](err); ok {
		r.log.Warn("commit rejected: the coordinator no longer holds this token valid", zap.Int64("offset", r.next), zap.String("code", ce.Code.Message))
		r.fenced = fmt.Sprintf("commit rejected by the coordinator (%s)", ce.Code.Message)
		return false
	}
	if r.ctx.Err() != nil {
		return false
	}
	r.log.Warn("commit failed; retrying after the next record", zap.Int64("offset", r.next), zap.Error(err))
	return true
}

// rejected logs err and reports true if it is a stale-token rejection,
// which ends the claim's work: its token is dead.
func (r *claimRun) rejected(err error, op string, seq int64, held bool) bool {
	se, ok := errors.AsType[*epoch.StaleError](err)
	if !ok {
		return false
	}
	r.w.rejected.Add(1)
	fields := []zap.Field{zap.String("op", op), zap.Int64("current", int64(se.Current)), zap.Bool("held_by_pause", held)}
	if seq >= 0 {
		fields = append(fields, zap.Int64("seq", seq))
	}
	r.log.Warn("write rejected: stale token", fields...)
	r.fenced = "token " + r.c.Token().String() + " fenced by the resource (current " + se.Current.String() + ")"
	return true
}

// sleep waits d or until the claim ends.
func (r *claimRun) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.ctx.Done():
	}
}
