package workload

import (
	"context"
	"errors"
	"strings"
	"sync"
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
	// WriteTimeout bounds one append or admit (to every resource of a
	// [Fanout] together), and one commit or offset read, so that a
	// black-holed resource or coordinator costs a retry, not a hang.
	// Default 5 s.
	WriteTimeout time.Duration
	// Pause, if not nil, holds the writes during a pause (see [Pause]).
	Pause *Pause
	// Logger receives claim starts and stops and rejected writes.
	// Default: none.
	Logger *zap.Logger
	// Observe, if not nil, is called after every append with its outcome,
	// from the claim's goroutine.
	Observe func(Write)
	// Unverified, if not nil, is called when a resource refuses a claim's
	// token as unverified (epoch.ErrUnverified): the resource's keys may
	// be behind a rotation, and the caller refreshes them. The write is
	// retried.
	Unverified func(err error)
	// Attempts, if not nil, receives the claim lines and the commit and
	// fetch attempts. The admit and append attempts are logged by the
	// resource: wrap it (each resource of a [Fanout]) with [LogAttempts]
	// on the same log.
	Attempts *AttemptLog
}

// Stats counts a worker's appends since it was created.
type Stats struct {
	Written    int64 // accepted by the resource
	Rejected   int64 // rejected for a stale token
	Unverified int64 // refused as not issued for the partition (retried)
	Held       int64 // held by a pause (accepted or not)
}

// Worker does the fake work on claims; its Handle method is the
// member.Handler to give member.Join.
type Worker struct {
	cfg                                 Config
	log                                 *zap.Logger
	written, rejected, unverified, held atomic.Int64

	// The failures of each kind of operation, over all claims: see
	// failureLog.
	admitFails, fetchFails, writeFails, commitFails *failureLog

	mu sync.Mutex
	// suspect holds the token of each partition whose last claim stopped
	// Suspect: a claim that starts with that token resumes it.
	suspect map[claimKey]epoch.Token
}

type claimKey struct {
	topic     string
	partition int32
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
	return &Worker{
		cfg: cfg, log: cfg.Logger, suspect: make(map[claimKey]epoch.Token),
		admitFails:  newFailureLog("admitting the token", nil),
		fetchFails:  newFailureLog("reading the committed offset", nil),
		writeFails:  newFailureLog("write", nil),
		commitFails: newFailureLog("commit", nil),
	}, nil
}

// Stats returns the worker's counts so far.
func (w *Worker) Stats() Stats {
	return Stats{Written: w.written.Load(), Rejected: w.rejected.Load(), Unverified: w.unverified.Load(), Held: w.held.Load()}
}

// retryDelay spaces the retries of a failed admit, offset read or append.
const retryDelay = 200 * time.Millisecond

// Handle works on one claim until its context ends or the resource rejects
// its token; see the package documentation.
func (w *Worker) Handle(c *member.Claim) {
	ctx := c.Context()
	log := w.log.With(zap.String("topic", c.Topic()), zap.Int32("partition", c.Partition()),
		zap.Int64("token", int64(c.Token().Token)), zap.String("member", c.MemberID()))
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
	fencedCause string // the same, as a claim line's cause
}

// The causes of the claim lines that the worker decides itself, next to
// those of the member library (member.ClaimChange.Cause).
const (
	causeStarted        = "started"
	causeConfirmed      = "confirmed"
	causeResourceStale  = "resource-stale"
	causeCommitRejected = "commit-rejected"
)

func (r *claimRun) run() {
	r.claimLine(r.w.resumed(r.c), epoch.Owned)
	if r.start() {
		r.log.Info("claim started", zap.Int64("offset", r.next))
		r.work()
	}
	cause := "handler returned"
	// Work ends only with the claim's context or a rejection, so the
	// claim line's "to" is always set below; Owned is the library's view
	// of a handler that returns on its own.
	to, lineCause := epoch.Owned, cause
	if r.fenced != "" {
		cause = r.fenced
		to, lineCause = epoch.Lost, r.fencedCause
	} else if err := context.Cause(r.ctx); err != nil {
		cause = err.Error()
		to, lineCause = stopState(err)
		if errors.Is(err, member.ErrRevoked) && r.sinceCommit > 0 {
			// A graceful hand-off: the token is still valid, so the next
			// owner resumes where this one stopped.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.w.cfg.WriteTimeout)
			err := r.commitOnce(cctx)
			cancel()
			if err != nil {
				r.log.Warn("final commit failed: the next owner redoes the records since the last commit", zap.Int64("offset", r.next), zap.Error(err))
			} else {
				r.sinceCommit = 0
			}
		}
	}
	r.w.stopped(r.c, to)
	r.claimLine(transition{from: epoch.Owned, cause: lineCause}, to)
	r.log.Info("claim stopped", zap.String("cause", cause), zap.Int64("offset", r.next), zap.Int("written", r.written))
}

// transition is where a claim line comes from, and why.
type transition struct {
	from  epoch.State
	cause string
}

// resumed tells how c's work starts: a claim that follows a Suspect one
// under the same token was confirmed by the coordinator (Suspect ->
// Owned); any other was assigned (Pending -> Owned).
func (w *Worker) resumed(c *member.Claim) transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := claimKey{c.Topic(), c.Partition()}
	tok, ok := w.suspect[k]
	delete(w.suspect, k)
	if ok && tok == c.Token().Token {
		return transition{epoch.Suspect, causeConfirmed}
	}
	return transition{epoch.Pending, causeStarted}
}

// stopped remembers a claim that stopped Suspect, for resumed.
func (w *Worker) stopped(c *member.Claim, to epoch.State) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := claimKey{c.Topic(), c.Partition()}
	if to == epoch.Suspect {
		w.suspect[k] = c.Token().Token
	} else {
		delete(w.suspect, k)
	}
}

// stopState maps a claim's cancellation cause to the state the member
// library moved the claim to, and the library's reason.
func stopState(cause error) (epoch.State, string) {
	for _, s := range []struct {
		sentinel error
		state    epoch.State
	}{
		{member.ErrRevoked, epoch.Revoking},
		{member.ErrSuspect, epoch.Suspect},
		{member.ErrLost, epoch.Lost},
	} {
		if errors.Is(cause, s.sentinel) {
			return s.state, reason(cause, s.sentinel)
		}
	}
	return epoch.Lost, cause.Error()
}

// reason extracts the library's reason from a cause it formats as
// "<sentinel> (<reason>)"; any other text is returned whole, so that
// nothing is lost if the format changes.
func reason(cause, sentinel error) string {
	msg := cause.Error()
	if r, ok := strings.CutPrefix(msg, sentinel.Error()+" ("); ok {
		if r, ok := strings.CutSuffix(r, ")"); ok {
			return r
		}
	}
	if msg == sentinel.Error() {
		return ""
	}
	return msg
}

// claimLine logs the claim's start or stop to the attempt log.
func (r *claimRun) claimLine(from transition, to epoch.State) {
	r.w.cfg.Attempts.Log(Attempt{
		Op: OpClaim, T: time.Now(), Worker: r.w.cfg.Name, Member: r.c.MemberID(),
		Partition: epoch.Partition(r.c.Partition()), Token: r.c.Token().Token,
		From: from.from.String(), To: to.String(), Cause: from.cause,
	})
}

// coordinator logs an attempt on the coordinator.
func (r *claimRun) coordinator(op Op, t0 time.Time, offset int64, err error) {
	a := Attempt{
		Op: op, T0: t0, T1: time.Now(), Worker: r.w.cfg.Name, Member: r.c.MemberID(),
		Partition: epoch.Partition(r.c.Partition()), Token: r.c.Token().Token,
		Offset: offset, Resource: Coordinator,
	}
	a.Outcome, a.Err = outcome(err)
	r.w.cfg.Attempts.Log(a)
}

// call annotates ctx for the resource's attempt lines.
func (r *claimRun) call(ctx context.Context, held bool) context.Context {
	if r.w.cfg.Attempts == nil {
		return ctx
	}
	return withCall(ctx, call{worker: r.w.cfg.Name, member: r.c.MemberID(), held: held})
}

// start fences the partition's former owners and reads where to resume;
// false if the claim ended first.
func (r *claimRun) start() bool {
	for r.ctx.Err() == nil {
		actx, cancel := context.WithTimeout(r.call(r.ctx, false), r.w.cfg.WriteTimeout)
		err := r.w.cfg.Resource.Admit(actx, epoch.Partition(r.c.Partition()), r.c.Token())
		cancel()
		if err == nil {
			r.w.admitFails.succeeded(r.log)
			break
		}
		if r.rejected(err, "admit", -1, false) {
			return false
		}
		if r.ctx.Err() == nil {
			r.w.admitFails.failed(r.log, err)
		}
		r.sleep(retryDelay)
	}
	for r.ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(r.ctx, r.w.cfg.WriteTimeout)
		t0 := time.Now()
		next, err := r.c.Committed(fctx)
		cancel()
		r.coordinator(OpFetch, t0, next, err)
		if err == nil {
			r.w.fetchFails.succeeded(r.log)
			r.next = max(next, 0)
			return true
		}
		if r.ctx.Err() == nil {
			r.w.fetchFails.failed(r.log, err)
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
		// The record's work, one unit that does not look at the claim, as
		// a computation or a call does not: it ends with the write the
		// check allowed. A process frozen in it (a long garbage
		// collection, SIGSTOP) writes when it wakes, under the token it
		// checked, however long ago: the write the fence must reject. A
		// revoked claim finishes its record, at most Interval late.
		t.Reset(r.w.cfg.Interval)
		<-t.C
		// A simulated pause freezes the goroutine here, between the check
		// and the write; what it decided above stands when it wakes.
		held := r.w.cfg.Pause.Hold()
		if !r.append(held) {
			return
		}
	}
}

// append writes the next record; false if the claim must stop.
func (r *claimRun) append(held bool) bool {
	st := r.c.Token()
	rec := Record{Partition: epoch.Partition(r.c.Partition()), Seq: r.next, Token: st.Token, Worker: r.w.cfg.Name, Member: r.c.MemberID()}
	// Not the claim's context: a write decided before the claim was
	// revoked may still be on its way. The resource decides.
	wctx, cancel := context.WithTimeout(r.call(context.WithoutCancel(r.ctx), held), r.w.cfg.WriteTimeout)
	err := r.w.cfg.Resource.Append(wctx, rec, st)
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
		r.w.writeFails.failed(r.log, err, zap.Int64("seq", rec.Seq))
		return true
	}
	r.w.writeFails.succeeded(r.log)
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
	cctx, cancel := context.WithTimeout(r.ctx, r.w.cfg.WriteTimeout)
	err := r.commitOnce(cctx)
	cancel()
	if err == nil {
		r.w.commitFails.succeeded(r.log)
		r.sinceCommit = 0
		return true
	}
	if ce, ok := errors.AsType[*member.CommitError](err); ok {
		r.log.Warn("commit rejected: the coordinator no longer holds this token valid", zap.Int64("offset", r.next), zap.String("code", ce.Code.Message))
		r.fenced = "commit rejected by the coordinator (" + ce.Code.Message + ")"
		r.fencedCause = causeCommitRejected
		return false
	}
	if r.ctx.Err() != nil {
		return false
	}
	r.w.commitFails.failed(r.log, err, zap.Int64("offset", r.next))
	return true
}

// commitOnce commits the offset, logging the attempt.
func (r *claimRun) commitOnce(ctx context.Context) error {
	t0 := time.Now()
	if r.w.cfg.Attempts != nil {
		r.w.cfg.Attempts.Log(Attempt{
			Op: OpCommit, T0: t0, Worker: r.w.cfg.Name, Member: r.c.MemberID(),
			Partition: epoch.Partition(r.c.Partition()), Token: r.c.Token().Token,
			Offset: r.next, Resource: Coordinator, Outcome: OutcomePending,
		})
	}
	err := r.c.Commit(ctx, r.next, "")
	r.coordinator(OpCommit, t0, r.next, err)
	return err
}

// rejected logs err and reports true if it is a stale-token rejection,
// which ends the claim's work: its token is dead. A token refused as
// unverified is not dead (the resource's keys may be behind a rotation):
// the caller is told, and the write is retried.
func (r *claimRun) rejected(err error, op string, seq int64, held bool) bool {
	if errors.Is(err, epoch.ErrUnverified) {
		r.w.unverified.Add(1)
		if r.w.cfg.Unverified != nil {
			r.w.cfg.Unverified(err)
		}
		return false
	}
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
	r.fenced = "token " + r.c.Token().Token.String() + " fenced by the resource (current " + se.Current.String() + ")"
	r.fencedCause = causeResourceStale
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
