package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// Op is what a line of the attempt log reports: an operation a worker
// attempted, or (OpClaim) a claim's start or stop.
type Op string

// The operations of the attempt log; see the package documentation.
const (
	OpAppend Op = "append" // one record appended to one resource
	OpAdmit  Op = "admit"  // a claim's token admitted at one resource
	OpCommit Op = "commit" // an offset committed to the coordinator
	OpFetch  Op = "fetch"  // the committed offset read at the claim's start
	OpClaim  Op = "claim"  // a claim's start or stop, not an attempt
	OpForge  Op = "forge"  // a Forger's append of a forged token to one resource
)

// Outcome is how an attempt ended.
type Outcome string

// The outcomes of an attempt.
const (
	// OutcomeOK: accepted. An append or admit is in the resource, a
	// commit at the coordinator.
	OutcomeOK Outcome = "ok"
	// OutcomeStale: rejected for a stale token (epoch.ErrStale): by the
	// resource's fence, or by the coordinator (a *member.CommitError).
	// Nothing was written.
	OutcomeStale Outcome = "stale"
	// OutcomeUnverified: refused because the resource's verifier could
	// not verify the token as issued for the partition
	// (epoch.ErrUnverified). Nothing was written.
	OutcomeUnverified Outcome = "unverified"
	// OutcomeError: any other error, a timeout included. The effect may
	// or may not have happened.
	OutcomeError Outcome = "error"
	// OutcomePending: a commit's line logged before the commit is sent
	// (T0 only); the line with its outcome follows. A worker killed in
	// between leaves only this one: the commit may have landed.
	OutcomePending Outcome = "pending"
)

// Coordinator is the Resource of commit and fetch attempts.
const Coordinator = "coordinator"

// Attempt is one line of the attempt log. Which fields a line carries
// depends on its Op; the package documentation gives the format.
type Attempt struct {
	Op Op
	// T0 and T1 bracket an attempt: T0 before the request was sent, T1
	// after its outcome was known. Zero in claim lines.
	T0, T1 time.Time
	// T is the instant of a claim line. Zero in attempt lines.
	T time.Time

	Worker    string // the worker's name, as in Record.Worker
	Member    string // the claim's member ID, as in Record.Member
	Partition epoch.Partition
	Token     epoch.Token

	// Seq is the record's sequence number (append).
	Seq int64
	// Offset is the offset committed (commit), or the committed offset
	// read, -1 if none (fetch with OutcomeOK).
	Offset int64
	// Resource names where the attempt went: "postgres", "etcd" (the
	// names given to [LogAttempts]), or [Coordinator].
	Resource string
	Outcome  Outcome
	// Err is the error's text, unless the outcome is OutcomeOK.
	Err string
	// Held reports an append that a [Pause] held between the claim check
	// that allowed it and the write.
	Held bool

	// From, To and Cause describe a claim line's transition: the names of
	// epoch.State values and why (see the package documentation).
	From, To, Cause string
}

// attemptJSON is an Attempt on the wire: pointers for the fields that only
// some lines carry, so that a zero value (sequence number 0) is not
// mistaken for an absent one.
type attemptJSON struct {
	T         string          `json:"t,omitempty"`
	T0        string          `json:"t0,omitempty"`
	T1        string          `json:"t1,omitempty"`
	Op        Op              `json:"op"`
	Worker    string          `json:"worker"`
	Member    string          `json:"member"`
	Partition epoch.Partition `json:"partition"`
	Token     epoch.Token     `json:"token"`
	Seq       *int64          `json:"seq,omitempty"`
	Offset    *int64          `json:"offset,omitempty"`
	Resource  string          `json:"resource,omitempty"`
	Outcome   Outcome         `json:"outcome,omitempty"`
	Err       string          `json:"err,omitempty"`
	Held      *bool           `json:"held,omitempty"`
	From      string          `json:"from,omitempty"`
	To        string          `json:"to,omitempty"`
	Cause     string          `json:"cause,omitempty"`
}

// MarshalJSON writes a as one attempt-log object, with the fields its Op
// carries.
func (a Attempt) MarshalJSON() ([]byte, error) {
	if a.Op == "" {
		return nil, errors.New("workload: attempt without an op")
	}
	w := attemptJSON{
		Op: a.Op, Worker: a.Worker, Member: a.Member,
		Partition: a.Partition, Token: a.Token,
	}
	if a.Op == OpClaim {
		w.T, w.From, w.To, w.Cause = formatTime(a.T), a.From, a.To, a.Cause
		return json.Marshal(w)
	}
	w.T0, w.T1 = formatTime(a.T0), formatTime(a.T1)
	w.Resource, w.Outcome, w.Held = a.Resource, a.Outcome, &a.Held
	if a.Outcome != OutcomeOK {
		w.Err = a.Err
	}
	switch {
	case a.Op == OpAppend:
		w.Seq = &a.Seq
	case a.Op == OpForge:
		w.Seq, w.Cause = &a.Seq, a.Cause
	case a.Op == OpCommit, a.Op == OpFetch && a.Outcome == OutcomeOK:
		w.Offset = &a.Offset
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads one attempt-log object. Unknown fields are ignored,
// so that a reader keeps working when lines gain fields.
func (a *Attempt) UnmarshalJSON(b []byte) error {
	var w attemptJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Op == "" {
		return errors.New("no op")
	}
	var out Attempt
	var err error
	if out.T, err = parseTime("t", w.T); err != nil {
		return err
	}
	if out.T0, err = parseTime("t0", w.T0); err != nil {
		return err
	}
	if out.T1, err = parseTime("t1", w.T1); err != nil {
		return err
	}
	out.Op, out.Worker, out.Member = w.Op, w.Worker, w.Member
	out.Partition, out.Token = w.Partition, w.Token
	if w.Seq != nil {
		out.Seq = *w.Seq
	}
	if w.Offset != nil {
		out.Offset = *w.Offset
	}
	if w.Held != nil {
		out.Held = *w.Held
	}
	out.Resource, out.Outcome, out.Err = w.Resource, w.Outcome, w.Err
	out.From, out.To, out.Cause = w.From, w.To, w.Cause
	*a = out
	return nil
}

// formatTime renders t in UTC, RFC 3339 with nanoseconds ("" for the zero
// time). RFC3339Nano drops trailing zeros, so the strings do not sort as
// the times do: parse them.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", field, err)
	}
	return t, nil
}

// maxAttemptLine bounds one line of the attempt log; the longest real ones
// (an error from a database driver) are well under it.
const maxAttemptLine = 1 << 20

// ReadAttempts decodes an attempt log: one JSON object per line, blank
// lines skipped, in file order (which, per worker, is the order in which
// the attempts ended). A malformed line is an error naming its number,
// except a last line without its newline: a worker killed while writing
// it leaves it torn, so it is dropped.
func ReadAttempts(r io.Reader) ([]Attempt, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Attempt
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = readLongLine(br, line)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("workload: attempt log line %d: %w", n, err)
		}
		terminated := err == nil
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			var a Attempt
			if derr := json.Unmarshal(trimmed, &a); derr != nil {
				if !terminated {
					return out, nil // torn by a kill
				}
				return out, fmt.Errorf("workload: attempt log line %d: %w", n, derr)
			}
			out = append(out, a)
		}
		if !terminated {
			return out, nil
		}
	}
}

// readLongLine reads the rest of a line longer than br's buffer.
func readLongLine(br *bufio.Reader, first []byte) ([]byte, error) {
	line := append([]byte(nil), first...)
	for {
		more, err := br.ReadSlice('\n')
		line = append(line, more...)
		if len(line) > maxAttemptLine {
			return nil, fmt.Errorf("longer than %d bytes", maxAttemptLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
