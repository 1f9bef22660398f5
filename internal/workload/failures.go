package workload

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// failureEvery is how often a worker reminds that an operation is still
// failing.
const failureEvery = 10 * time.Second

// failureLog reports the failures of one kind of operation (commits,
// writes, ...) over all of a worker's claims. While a coordinator or a
// resource is down, every claim retries every few hundred milliseconds:
// a line per retry is hundreds of lines a second that bury what happened.
// So it logs one line when the operation starts failing, a reminder with
// a count every failureEvery while it goes on, and one line when it
// succeeds again.
//
// A spell whose first line was suppressed (it began within failureEvery
// of the last line, as when a few claims fail and others succeed in
// turn) logs no recovery either: the lines stay at most two per
// failureEvery whatever the pattern of failures.
type failureLog struct {
	what  string // "commit", in "commit failed; retrying"
	every time.Duration
	now   func() time.Time

	mu       sync.Mutex
	failing  bool
	logged   bool      // a line of this spell was written
	since    time.Time // the spell's first failure
	lastLine time.Time // zero: never
	unlogged int64     // failures since the last line
	total    int64     // failures of this spell
}

func newFailureLog(what string, now func() time.Time) *failureLog {
	if now == nil {
		now = time.Now
	}
	return &failureLog{what: what, every: failureEvery, now: now}
}

// failed reports a failure of one attempt: log is the claim's logger,
// fields describe the attempt.
func (f *failureLog) failed(log *zap.Logger, err error, fields ...zap.Field) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.total++
	f.unlogged++
	due := f.lastLine.IsZero() || now.Sub(f.lastLine) >= f.every
	if !f.failing {
		f.failing, f.since, f.logged = true, now, false
		f.total, f.unlogged = 1, 1
		if due {
			f.line(now)
			log.Warn(f.what+" failed; retrying (further failures are counted, reported every "+f.every.String()+")",
				append(fields, zap.Error(err))...)
		}
		return
	}
	if due {
		n := f.unlogged
		f.line(now)
		log.Warn(f.what+" still failing; retrying",
			append(fields, zap.Int64("failures", n), zap.Duration("for", now.Sub(f.since).Round(time.Millisecond)), zap.Error(err))...)
	}
}

// succeeded reports a successful attempt, which ends a spell of failures.
func (f *failureLog) succeeded(log *zap.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failing {
		return
	}
	f.failing = false
	if !f.logged {
		return
	}
	now := f.now()
	f.lastLine = now
	log.Info(f.what+" succeeds again", zap.Int64("failures", f.total), zap.Duration("after", now.Sub(f.since).Round(time.Millisecond)))
}

// line records that a line of the spell is written now.
func (f *failureLog) line(now time.Time) {
	f.lastLine, f.logged, f.unlogged = now, true, 0
}
