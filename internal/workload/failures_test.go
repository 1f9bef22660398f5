package workload

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestFailureLog drives a failureLog through a coordinator outage as a
// worker of 64 claims sees it: every claim's commit fails five times a
// second for 35 s, then they succeed again. The log gets one line when
// the failures start, one reminder with a count every 10 s, and one line
// when they stop, not a line per failure.
func TestFailureLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	now := time.Unix(1000, 0)
	f := newFailureLog("commit", func() time.Time { return now })
	down := errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")

	const claims, perSecond = 64, 5
	step := time.Second / (claims * perSecond)
	f.succeeded(log) // no failure yet: nothing to say
	var failures int64
	for end := now.Add(35 * time.Second); now.Before(end); now = now.Add(step) {
		f.failed(log, down, zap.Int64("offset", 7))
		failures++
	}
	for range claims {
		f.succeeded(log)
	}

	var got []string
	var counted int64
	for _, e := range logs.All() {
		got = append(got, e.Message)
		fields := e.ContextMap()
		if n, ok := fields["failures"].(int64); ok && strings.Contains(e.Message, "still failing") {
			counted += n
		}
		if e.Message == "commit succeeds again" && fields["failures"].(int64) != failures {
			t.Errorf("recovery line counts %v failures, want %d", fields["failures"], failures)
		}
	}
	want := []string{
		"commit failed; retrying (further failures are counted, reported every 10s)",
		"commit still failing; retrying", // at 10 s
		"commit still failing; retrying", // 20 s
		"commit still failing; retrying", // 30 s
		"commit succeeds again",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The reminders count every failure between the lines: all but the
	// first and those after the last reminder.
	if counted < failures-1-int64(10*time.Second/step) || counted >= failures {
		t.Errorf("reminders count %d failures of %d", counted, failures)
	}
	if first := logs.All()[0]; first.Level != zapcore.WarnLevel || first.ContextMap()["error"] != down.Error() || first.ContextMap()["offset"] != int64(7) {
		t.Errorf("first line %v %v: want a warning with the error and the attempt's fields", first.Level, first.ContextMap())
	}
}

// TestFailureLogFlapping: failures and successes in turn (some claims'
// resource down, others' up) give at most two lines per reminder period.
func TestFailureLogFlapping(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	now := time.Unix(1000, 0)
	f := newFailureLog("write", func() time.Time { return now })
	for end := now.Add(60 * time.Second); now.Before(end); now = now.Add(10 * time.Millisecond) {
		f.failed(log, errors.New("timeout"))
		f.succeeded(log)
	}
	if n := logs.Len(); n > 2*6+2 || n < 2 {
		for _, e := range logs.All() {
			t.Log(e.Time, e.Message, e.ContextMap())
		}
		t.Fatalf("%d lines in 60 s of flapping, want at least one and at most 2 per 10 s", n)
	}
}
