package sim

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// noteKind names a trace record that is not an event: something that
// happened while an event was handled (a message lost, a claim changed
// state, the coordinator reported a rebalance).
type noteKind uint8

const (
	_ noteKind = iota
	noteLoss
	noteCutDrop
	noteDropped  // an event of a dead process, or a stale timer
	noteDeferred // an event held back by a pause
	noteClaim    // a member's claim changed state (arg: partition, arg2: token<<8|state)
	noteCoord    // a coordinator event (arg: kind, arg2: epoch)
	noteWrite    // a stale write (arg: partition, arg2: token)
	noteRecord   // the coordinator persisted a record (arg: type)
	noteSettled  // a close passed over while the view settled (arg: node)
	noteKinds
)

var noteKindNames = [...]string{
	noteLoss:     "lost",
	noteCutDrop:  "cut-drop",
	noteDropped:  "dropped",
	noteDeferred: "deferred",
	noteClaim:    "claim",
	noteCoord:    "coord",
	noteWrite:    "stale-write",
	noteRecord:   "persist",
	noteSettled:  "settling",
}

func (k noteKind) String() string {
	if k > 0 && k < noteKinds {
		return noteKindNames[k]
	}
	return "noteKind(" + itoa(int(k)) + ")"
}

// tracer keeps the run's trace: a hash of every event and note in the order
// they happen, and optionally a readable line for each. Two runs of the same
// scenario and seed produce the same records, so the same hash and,
// when written, byte-identical text.
//
// The hash is taken over a fixed binary encoding of each record (time,
// kind, node, two arguments), not over the text, so that runs which write
// no text pay a few nanoseconds per record rather than a formatted line.
type tracer struct {
	h xxhash.Digest
	// buf collects encoded records; it is hashed when full (and at the
	// end), which costs far less than hashing each 33-byte record alone.
	buf [recordSize * 124]byte
	off int
	w   *bufio.Writer
	err error
	n   int64
}

// recordSize is the size of one encoded trace record.
const recordSize = 1 + 8*4

func newTracer(w io.Writer) *tracer {
	t := &tracer{}
	t.h.Reset()
	if w != nil {
		t.w = bufio.NewWriterSize(w, 64<<10)
	}
	return t
}

// record adds one record to the hash. tag distinguishes events (below 128)
// from notes (128 and up).
func (t *tracer) record(tag uint8, at vtime, node int32, a, b int64) {
	t.n++
	if t.off == len(t.buf) {
		_, _ = t.h.Write(t.buf[:])
		t.off = 0
	}
	b0 := t.buf[t.off : t.off+recordSize]
	b0[0] = tag
	binary.LittleEndian.PutUint64(b0[1:], uint64(at))
	binary.LittleEndian.PutUint64(b0[9:], uint64(node))
	binary.LittleEndian.PutUint64(b0[17:], uint64(a))
	binary.LittleEndian.PutUint64(b0[25:], uint64(b))
	t.off += recordSize
}

// text reports whether readable lines are wanted.
func (t *tracer) text() bool { return t.w != nil }

// line writes one readable line (only call it when text() is true).
func (t *tracer) line(at vtime, who, what string, args ...any) {
	if t.err != nil {
		return
	}
	_, err := fmt.Fprintf(t.w, "%-14s %-6s %s\n", fmtTime(at), who, fmt.Sprintf(what, args...))
	if err != nil {
		t.err = err
	}
}

func (t *tracer) flush() error {
	if t.w != nil && t.err == nil {
		t.err = t.w.Flush()
	}
	return t.err
}

// sum returns the hash of every record so far.
func (t *tracer) sum() uint64 {
	h := t.h // Sum64 does not change the digest, but keep buf pending
	_, _ = h.Write(t.buf[:t.off])
	return h.Sum64()
}

// fmtTime renders a virtual time with fixed millisecond precision, so that
// trace lines line up: "  90.000s", "3723.250s".
func fmtTime(at vtime) string {
	ms := int64(at) / 1e6
	return fmt.Sprintf("%d.%03ds", ms/1000, ms%1000)
}
