package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// AttemptLog writes [Attempt]s to a writer, one JSON object per line. It
// keeps no buffer: each line goes out in one Write, so with an *os.File a
// line is in the kernel once Log returns, and a process killed at any
// moment leaves every line it logged (and at most one torn line, which
// [ReadAttempts] drops). A nil *AttemptLog logs nothing. An AttemptLog is
// safe for concurrent use.
type AttemptLog struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

// NewAttemptLog returns a log writing to w. Open a file for it with
// O_APPEND, so that restarts of a worker add to what it wrote before.
func NewAttemptLog(w io.Writer) *AttemptLog {
	return &AttemptLog{w: w}
}

// Log writes one line. After a write error it writes nothing more (a
// short write would run the next line into a torn one); [AttemptLog.Err]
// returns the error.
func (l *AttemptLog) Log(a Attempt) {
	if l == nil {
		return
	}
	b, err := a.MarshalJSON()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if err != nil {
		l.err = fmt.Errorf("workload: attempt log: %w", err)
		return
	}
	l.buf = append(append(l.buf[:0], b...), '\n')
	if _, err := l.w.Write(l.buf); err != nil {
		l.err = fmt.Errorf("workload: attempt log: %w", err)
	}
}

// Err returns the first error the log met, if any: the lines after it
// are missing.
func (l *AttemptLog) Err() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// outcome classifies an attempt's error.
func outcome(err error) (Outcome, string) {
	switch {
	case err == nil:
		return OutcomeOK, ""
	case errors.Is(err, epoch.ErrStale):
		return OutcomeStale, err.Error()
	case errors.Is(err, epoch.ErrUnverified):
		return OutcomeUnverified, err.Error()
	default:
		return OutcomeError, err.Error()
	}
}

// call is what a resource's attempt line needs from the [Worker] and a
// Resource method's arguments lack. It travels in the context, so that the
// Resource interface, and a [Fanout] between the worker and the logged
// resources, need not know about the log.
type call struct {
	worker, member string
	held           bool
	// forgery names the kind of a Forger's append (OpForge).
	forgery string
}

type callKey struct{}

func withCall(ctx context.Context, c call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callOf(ctx context.Context) call {
	c, _ := ctx.Value(callKey{}).(call)
	return c
}

// LogAttempts returns r, logging every Admit and Append to log as an
// attempt on the resource called name ("postgres", "etcd"). Wrap each
// resource of a [Fanout] on its own, so that the log has one line per
// resource. An append's line names the record's worker and member; an
// admit's names those of the [Worker] making the call, and whether a pause
// held an append comes from it too. Records is not logged.
func LogAttempts(name string, r Resource, log *AttemptLog) Resource {
	return &loggedResource{name: name, r: r, log: log}
}

type loggedResource struct {
	name string
	r    Resource
	log  *AttemptLog
}

func (l *loggedResource) Admit(ctx context.Context, p epoch.Partition, t epoch.SignedToken) error {
	t0 := time.Now()
	err := l.r.Admit(ctx, p, t)
	c := callOf(ctx)
	a := Attempt{
		Op: OpAdmit, T0: t0, T1: time.Now(), Worker: c.worker, Member: c.member,
		Partition: p, Token: t.Token, Resource: l.name,
	}
	a.Outcome, a.Err = outcome(err)
	l.log.Log(a)
	return err
}

func (l *loggedResource) Append(ctx context.Context, r Record, t epoch.SignedToken) error {
	t0 := time.Now()
	err := l.r.Append(ctx, r, t)
	c := callOf(ctx)
	a := Attempt{
		Op: OpAppend, T0: t0, T1: time.Now(), Worker: r.Worker, Member: r.Member,
		Partition: r.Partition, Token: r.Token, Seq: r.Seq, Resource: l.name, Held: c.held,
	}
	if c.forgery != "" {
		a.Op, a.Cause = OpForge, c.forgery
	}
	a.Outcome, a.Err = outcome(err)
	l.log.Log(a)
	return err
}

func (l *loggedResource) Records(ctx context.Context) ([]Stored, error) {
	return l.r.Records(ctx)
}
