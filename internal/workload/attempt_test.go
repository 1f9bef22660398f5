package workload_test

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/workload"
)

var (
	t0 = time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	t1 = t0.Add(1500 * time.Microsecond)
)

// The lines of the format as the package documentation gives it: what a
// checker parses. Changing them breaks the checker.
var attemptLines = []struct {
	name string
	a    workload.Attempt
	line string
}{
	{"append", workload.Attempt{
		Op: workload.OpAppend, T0: t0, T1: t1, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		Seq: 40, Resource: "postgres", Outcome: workload.OutcomeOK,
	}, `{"t0":"2026-03-01T10:00:00.123456789Z","t1":"2026-03-01T10:00:00.124956789Z","op":"append","worker":"w3","member":"m1","partition":5,"token":12,"seq":40,"resource":"postgres","outcome":"ok","held":false}`},
	{"first append, held and stale", workload.Attempt{
		Op: workload.OpAppend, T0: t0, T1: t1, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		Seq: 0, Resource: "etcd", Outcome: workload.OutcomeStale, Err: "epoch: stale token", Held: true,
	}, `{"t0":"2026-03-01T10:00:00.123456789Z","t1":"2026-03-01T10:00:00.124956789Z","op":"append","worker":"w3","member":"m1","partition":5,"token":12,"seq":0,"resource":"etcd","outcome":"stale","err":"epoch: stale token","held":true}`},
	{"admit", workload.Attempt{
		Op: workload.OpAdmit, T0: t0, T1: t1, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		Resource: "etcd", Outcome: workload.OutcomeError, Err: "context deadline exceeded",
	}, `{"t0":"2026-03-01T10:00:00.123456789Z","t1":"2026-03-01T10:00:00.124956789Z","op":"admit","worker":"w3","member":"m1","partition":5,"token":12,"resource":"etcd","outcome":"error","err":"context deadline exceeded","held":false}`},
	{"commit", workload.Attempt{
		Op: workload.OpCommit, T0: t0, T1: t1, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		Offset: 41, Resource: workload.Coordinator, Outcome: workload.OutcomeOK,
	}, `{"t0":"2026-03-01T10:00:00.123456789Z","t1":"2026-03-01T10:00:00.124956789Z","op":"commit","worker":"w3","member":"m1","partition":5,"token":12,"offset":41,"resource":"coordinator","outcome":"ok","held":false}`},
	{"fetch of no offset", workload.Attempt{
		Op: workload.OpFetch, T0: t0, T1: t1, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		Offset: -1, Resource: workload.Coordinator, Outcome: workload.OutcomeOK,
	}, `{"t0":"2026-03-01T10:00:00.123456789Z","t1":"2026-03-01T10:00:00.124956789Z","op":"fetch","worker":"w3","member":"m1","partition":5,"token":12,"offset":-1,"resource":"coordinator","outcome":"ok","held":false}`},
	{"failed fetch", workload.Attempt{
		Op: workload.OpFetch, T0: t0, T1: t1, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		Resource: workload.Coordinator, Outcome: workload.OutcomeError, Err: "i/o timeout",
	}, `{"t0":"2026-03-01T10:00:00.123456789Z","t1":"2026-03-01T10:00:00.124956789Z","op":"fetch","worker":"w3","member":"m1","partition":5,"token":12,"resource":"coordinator","outcome":"error","err":"i/o timeout","held":false}`},
	{"claim start", workload.Attempt{
		Op: workload.OpClaim, T: t0, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		From: "Pending", To: "Owned", Cause: "started",
	}, `{"t":"2026-03-01T10:00:00.123456789Z","op":"claim","worker":"w3","member":"m1","partition":5,"token":12,"from":"Pending","to":"Owned","cause":"started"}`},
	{"claim stop", workload.Attempt{
		Op: workload.OpClaim, T: t1, Worker: "w3", Member: "m1", Partition: 5, Token: 12,
		From: "Owned", To: "Lost", Cause: "session-expired",
	}, `{"t":"2026-03-01T10:00:00.124956789Z","op":"claim","worker":"w3","member":"m1","partition":5,"token":12,"from":"Owned","to":"Lost","cause":"session-expired"}`},
}

// TestAttemptFormat pins each kind of line to the documented format, and
// reads it back through ReadAttempts.
func TestAttemptFormat(t *testing.T) {
	for _, tc := range attemptLines {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			workload.NewAttemptLog(&buf).Log(tc.a)
			if got := buf.String(); got != tc.line+"\n" {
				t.Errorf("line\n%s\nwant\n%s", got, tc.line)
			}
			got, err := workload.ReadAttempts(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !sameAttempt(got[0], tc.a) {
				t.Errorf("read back %+v, want %+v", got, tc.a)
			}
		})
	}
}

// sameAttempt compares attempts with their times as instants.
func sameAttempt(a, b workload.Attempt) bool {
	if !a.T.Equal(b.T) || !a.T0.Equal(b.T0) || !a.T1.Equal(b.T1) {
		return false
	}
	a.T, a.T0, a.T1 = b.T, b.T0, b.T1
	return a == b
}

// TestAttemptLogRoundTrip has many goroutines log at once, as the claims
// of a worker do, in a zone other than UTC: every line comes back whole,
// with its instants.
func TestAttemptLogRoundTrip(t *testing.T) {
	const writers, each = 8, 50
	zone := time.FixedZone("east", 5*3600)
	var buf syncBuffer
	log := workload.NewAttemptLog(&buf)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				start := time.Now().In(zone)
				log.Log(workload.Attempt{
					Op: workload.OpAppend, T0: start, T1: start.Add(time.Millisecond), Worker: "w",
					Partition: 1, Token: 2, Seq: int64(w*each + i), Resource: "etcd", Outcome: workload.OutcomeOK,
				})
			}
		})
	}
	wg.Wait()
	if err := log.Err(); err != nil {
		t.Fatal(err)
	}
	got, err := workload.ReadAttempts(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]bool)
	for _, a := range got {
		seen[a.Seq] = true
		if a.T1.Sub(a.T0) != time.Millisecond || a.T0.Location() != time.UTC {
			t.Errorf("line %+v: times not read back as written", a)
		}
	}
	if len(got) != writers*each || len(seen) != writers*each {
		t.Errorf("%d lines, %d distinct, want %d", len(got), len(seen), writers*each)
	}
}

func TestReadAttempts(t *testing.T) {
	start, stop := attemptLines[6].line, attemptLines[7].line
	long := strings.Replace(attemptLines[2].line, "context deadline exceeded", strings.Repeat("x", 100<<10), 1)
	for _, tc := range []struct {
		name  string
		in    string
		lines int
		err   string
	}{
		{"empty", "", 0, ""},
		{"blank lines", "\n" + start + "\n\n  \n" + stop + "\n", 2, ""},
		{"torn last line", start + "\n" + stop[:40], 1, ""},
		{"whole last line without newline", start + "\n" + stop, 2, ""},
		{"line longer than the buffer", long + "\n" + start + "\n", 2, ""},
		{"malformed line", start + "\n" + stop[:40] + "\n" + stop + "\n", 1, "line 2"},
		{"no op", start + "\n" + `{"worker":"w"}` + "\n", 1, "line 2: no op"},
		{"bad time", strings.Replace(start, "2026-03-01T", "2026-03-01 ", 1) + "\n", 0, "line 1: t:"},
		{"unknown fields", `{"op":"claim","new":1}` + "\n", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := workload.ReadAttempts(strings.NewReader(tc.in))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			if len(got) != tc.lines {
				t.Errorf("%d lines, want %d", len(got), tc.lines)
			}
		})
	}
}

// TestAttemptLogStopsAtWriteError: after a failed write nothing more is
// written, since the next line could join a torn one, and Err says why.
func TestAttemptLogStopsAtWriteError(t *testing.T) {
	w := &failingWriter{failAt: 2}
	log := workload.NewAttemptLog(w)
	for range 4 {
		log.Log(attemptLines[0].a)
	}
	if err := log.Err(); !errors.Is(err, errDiskFull) {
		t.Errorf("Err %v, want the write error", err)
	}
	if w.calls != 2 {
		t.Errorf("%d writes, want 2: none after the failure", w.calls)
	}
	var none *workload.AttemptLog
	none.Log(attemptLines[0].a) // a nil log logs nothing
	if err := none.Err(); err != nil {
		t.Errorf("nil log: %v", err)
	}
	bad := workload.NewAttemptLog(&bytes.Buffer{})
	bad.Log(workload.Attempt{})
	if bad.Err() == nil {
		t.Error("an attempt without an op was logged")
	}
}

var errDiskFull = errors.New("disk full")

type failingWriter struct {
	calls, failAt int
}

func (w *failingWriter) Write(b []byte) (int, error) {
	w.calls++
	if w.calls >= w.failAt {
		return 0, errDiskFull
	}
	return len(b), nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
