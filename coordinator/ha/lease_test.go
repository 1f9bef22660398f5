package ha

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
)

// testLease returns a lease of TTL 1 s, drift 1 % and margin 100 ms
// whose last renewal was sent at base, with a term started under it.
func testLease(t *testing.T) (*lease, *Term, time.Time) {
	base := time.Now()
	n := &Node{met: &metrics{}}
	n.logp.Store(zap.NewNop())
	w := epoch.Window{SessionTimeout: time.Second, MaxDrift: 0.01, Margin: 100 * time.Millisecond}
	l := &lease{id: 1, ttl: time.Second, window: w, base: base, over: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	t.Cleanup(l.cancel)
	l.deadline.Store(int64(w.Deadline(base).Sub(base)))
	term := newTerm(n, l, "k", 7)
	if !l.start(term, base) {
		t.Fatal("start refused a fresh lease")
	}
	return l, term, base
}

const ms = time.Millisecond

// TestValidArithmetic: a term is valid until sent + TTL×(1−drift) −
// margin (here 890 ms) after the send time of the last acknowledged
// renewal, whenever the acknowledgement came.
func TestValidArithmetic(t *testing.T) {
	_, term, base := testLease(t)
	if !term.Valid(base.Add(889 * ms)) {
		t.Fatal("invalid 889 ms after the renewal was sent")
	}
	if term.Valid(base.Add(890 * ms)) {
		t.Fatal("valid 890 ms after the renewal was sent (1 s − 10 ms drift − 100 ms margin)")
	}
}

// TestRenewalMovesTheDeadline: an acknowledgement moves the deadline to
// its renewal's send time + 890 ms, not its arrival's; an older renewal
// acknowledged late never moves it back.
func TestRenewalMovesTheDeadline(t *testing.T) {
	l, term, base := testLease(t)
	if !l.acked(base.Add(500*ms), base.Add(800*ms)) {
		t.Fatal("an acknowledgement before the deadline was refused")
	}
	if got := l.deadlineTime().Sub(base); got != 1390*ms {
		t.Fatalf("deadline %v after base, want 1.39 s (send time + 890 ms)", got)
	}
	if !l.acked(base.Add(200*ms), base.Add(900*ms)) {
		t.Fatal("a late acknowledgement before the deadline was refused")
	}
	if got := l.deadlineTime().Sub(base); got != 1390*ms {
		t.Fatalf("an older renewal moved the deadline to %v", got)
	}
	if !term.Valid(base.Add(1389*ms)) || term.Valid(base.Add(1390*ms)) {
		t.Fatal("the term does not end at the moved deadline")
	}
}

// TestPauseLongerThanTTL: a node paused for longer than the TTL after
// its last acknowledged renewal finds its term invalid at its first check
// on waking, and no acknowledgement of a renewal sent before the pause
// (delivered after it) revives the term or the lease.
func TestPauseLongerThanTTL(t *testing.T) {
	l, term, base := testLease(t)
	// The node sends a renewal at 100 ms and is paused until 1.2 s; etcd,
	// which received the 0 ms renewal, may have expired the lease at 1 s.
	wake := base.Add(1200 * ms)
	if term.Valid(wake) {
		t.Fatal("valid on waking after a pause longer than the TTL")
	}
	if l.acked(base.Add(100*ms), wake) {
		t.Fatal("the acknowledgement of a renewal sent before the pause was accepted after the deadline")
	}
	if term.Valid(base.Add(500 * ms)) {
		t.Fatal("valid again after having been invalid")
	}
	if !l.expire(wake) {
		t.Fatal("the watchdog does not end a lease past its deadline")
	}
	select {
	case <-term.Done():
	default:
		t.Fatal("the term is not done once its lease ended in doubt")
	}
	if l.endedFor() != reasonInDoubt {
		t.Fatalf("ended for %v, want in_doubt", l.endedFor())
	}
	if l.acked(base.Add(1300*ms), base.Add(1301*ms)) || term.Valid(base.Add(1301*ms)) {
		t.Fatal("an ended lease came back")
	}
}

// TestValidNeverComesBack: once Valid has said false, a renewal
// acknowledged concurrently (it read its time before Valid did) cannot
// make it say true.
func TestValidNeverComesBack(t *testing.T) {
	l, term, base := testLease(t)
	if term.Valid(base.Add(890 * ms)) {
		t.Fatal("valid at the deadline")
	}
	// The acknowledgement raced Valid: it arrived, by its clock, just
	// before the deadline.
	if !l.acked(base.Add(800*ms), base.Add(889*ms)) {
		t.Fatal("acknowledgement refused")
	}
	if term.Valid(base.Add(891 * ms)) {
		t.Fatal("the term is valid again")
	}
	// The lease goes on, but the term is over: the node resigns it and
	// campaigns again.
	select {
	case <-term.Done():
	default:
		t.Fatal("the term found invalid is not done")
	}
	if l.current() != term || l.expire(base.Add(891*ms)) {
		t.Fatal("the lease, renewed in time, ended")
	}
}

// TestStartNeedsAFreshLease: a term is never started on a lease whose
// deadline has passed, nor on one that ended.
func TestStartNeedsAFreshLease(t *testing.T) {
	l, term, base := testLease(t)
	l.release(term)
	if l.start(newTerm(term.n, l, "k", 8), base.Add(890*ms)) {
		t.Fatal("a term started at the deadline")
	}
	l.end(reasonClosed)
	if l.start(newTerm(term.n, l, "k", 9), base) {
		t.Fatal("a term started on an ended lease")
	}
}

// TestDefaultWindow: at the defaults a term ends 4.45 s after the send
// time of the last acknowledged renewal (5 s − 50 ms drift − 500 ms
// margin), which spans five renewal intervals.
func TestDefaultWindow(t *testing.T) {
	c := defaultCfg()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.window().SuspectAfter(); got != 4450*ms {
		t.Fatalf("window %v, want 4.45 s", got)
	}
	if got := keepaliveInterval(c.ttl); c.window().SuspectAfter()/got != 5 {
		t.Fatalf("interval %v: the window spans %d of them", got, c.window().SuspectAfter()/got)
	}
}
