package epoch_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
)

func TestWindowWorkedExample(t *testing.T) {
	w := epoch.Window{SessionTimeout: 10 * time.Second, MaxDrift: 0.01, Margin: 100 * time.Millisecond}
	if got, want := w.SuspectAfter(), 9800*time.Millisecond; got != want {
		t.Fatalf("SuspectAfter() = %v, want %v", got, want)
	}
	sent := time.Unix(1000, 0)
	if got, want := w.Deadline(sent), sent.Add(9800*time.Millisecond); !got.Equal(want) {
		t.Errorf("Deadline(sent) = %v, want %v", got, want)
	}
	if w.Lapsed(sent, sent.Add(9800*time.Millisecond-1)) {
		t.Errorf("Lapsed 1ns before the deadline")
	}
	if !w.Lapsed(sent, sent.Add(9800*time.Millisecond)) {
		t.Errorf("not Lapsed at the deadline")
	}
}

func TestWindowSuspectAfter(t *testing.T) {
	tests := []struct {
		name string
		w    epoch.Window
		want time.Duration
	}{
		{"no drift no margin", epoch.Window{SessionTimeout: 10 * time.Second}, 10 * time.Second},
		{"margin only", epoch.Window{SessionTimeout: 10 * time.Second, Margin: time.Second}, 9 * time.Second},
		{"drift only", epoch.Window{SessionTimeout: 45 * time.Second, MaxDrift: 0.01}, 44550 * time.Millisecond},
		// 150ns × 1 % = 1.5ns of allowance, rounded up to 2ns.
		{"allowance rounds up", epoch.Window{SessionTimeout: 150, MaxDrift: 0.01, Margin: 1}, 147},
		{"margin past the session", epoch.Window{SessionTimeout: time.Second, Margin: 2 * time.Second}, -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.SuspectAfter(); got != tt.want {
				t.Errorf("SuspectAfter() = %v, want %v", got, tt.want)
			}
		})
	}
}

// heartbeat is one acknowledged heartbeat in real time, with both clocks
// modelled explicitly. Real time is in nanoseconds from the instant the
// member read its clock to stamp the heartbeat; clocks advance at their
// rate (clock nanoseconds per real nanosecond). All arithmetic is exact.
type heartbeat struct {
	w epoch.Window
	// memberRate and coordRate are the clock rates; memberRate/coordRate
	// lies within [1−MaxDrift, 1+MaxDrift].
	memberRate, coordRate *big.Rat
	sendLag               int64 // real ns from reading the clock to sending
	requestDelay          int64 // real ns from sending to the coordinator's receipt
	responseDelay         int64 // real ns from the coordinator's reply to the member's receipt
	later                 int64 // real ns by which a later heartbeat, whose ack was lost, reset the session; 0 if none
}

func (h heartbeat) String() string {
	return fmt.Sprintf("session %v drift %v margin %v, rates member %v coordinator %v, lag %dns, delays %dns/%dns, later heartbeat +%dns",
		h.w.SessionTimeout, h.w.MaxDrift, h.w.Margin, h.memberRate.FloatString(6), h.coordRate.FloatString(6),
		h.sendLag, h.requestDelay, h.responseDelay, h.later)
}

func ratInt(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

// coordinatorExpiry returns the earliest real instant at which the
// coordinator may expire the session: SessionTimeout on its own clock after
// the last heartbeat it received.
func (h heartbeat) coordinatorExpiry() *big.Rat {
	received := ratInt(h.sendLag + h.requestDelay + h.later)
	wait := new(big.Rat).Quo(ratInt(int64(h.w.SessionTimeout)), h.coordRate)
	return received.Add(received, wait)
}

// memberDeadline returns the real instant at which the member becomes
// Suspect. The member's clock reads memberStart at real time 0; if
// fromReceive, the member (wrongly) counts from the instant the ack arrived
// instead of the heartbeat's send time.
func (h heartbeat) memberDeadline(fromReceive bool) *big.Rat {
	memberStart := time.Unix(7200, 0) // any reading of the member's monotonic clock
	base, baseReal := memberStart, new(big.Rat)
	if fromReceive {
		// The ack arrives at this real instant; the member's clock then
		// reads memberStart + arrival×memberRate.
		arrival := ratInt(h.sendLag + h.requestDelay + h.responseDelay)
		baseReal = arrival
		elapsed := new(big.Rat).Mul(arrival, h.memberRate)
		// Round the clock reading down: it only makes the wrong rule look
		// better, and the test shows it is unsafe all the same.
		ns := new(big.Int).Quo(elapsed.Num(), elapsed.Denom())
		base = memberStart.Add(time.Duration(ns.Int64()))
	}
	onMemberClock := h.w.Deadline(base).Sub(base)
	real := new(big.Rat).Quo(ratInt(int64(onMemberClock)), h.memberRate)
	return real.Add(real, baseReal)
}

// safe reports whether the member becomes Suspect strictly before the
// coordinator may expire its session, and explains a failure.
func (h heartbeat) safe(fromReceive bool) (bool, string) {
	d, e := h.memberDeadline(fromReceive), h.coordinatorExpiry()
	if d.Cmp(e) < 0 {
		return true, ""
	}
	return false, fmt.Sprintf("member suspects at real %sns, coordinator may expire at real %sns (%v)",
		d.FloatString(3), e.FloatString(3), h)
}

// drawHeartbeat draws any heartbeat the model allows: any session, drift
// below 0.5, positive margin, clock rates within the drift bound
// (including both ends), and any delays ≥ 0.
func drawHeartbeat(t *rapid.T) heartbeat {
	session := rapid.OneOf(
		rapid.Int64Range(1, 1000),
		rapid.Int64Range(int64(time.Millisecond), int64(10*time.Minute)),
	).Draw(t, "session")
	drift := rapid.OneOf(
		rapid.SampledFrom([]float64{0, 0.001, 0.01, 0.05, 0.125, 0.3, 0.49, 0.4999999}),
		rapid.Float64Range(0, 0.4999999),
	).Draw(t, "drift")
	margin := rapid.Int64Range(1, session).Draw(t, "margin")
	h := heartbeat{
		w: epoch.Window{
			SessionTimeout: time.Duration(session),
			MaxDrift:       drift,
			Margin:         time.Duration(margin),
		},
		sendLag:       rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, int64(time.Second))).Draw(t, "sendLag"),
		requestDelay:  rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 2*session)).Draw(t, "requestDelay"),
		responseDelay: rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 2*session)).Draw(t, "responseDelay"),
		later:         rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, session)).Draw(t, "later"),
	}
	coordRate, _ := new(big.Rat).SetString(rapid.SampledFrom([]string{"1", "1/4", "4", "999/1000", "1000001/1000000"}).Draw(t, "coordRate"))
	if rapid.Bool().Draw(t, "randomCoordRate") {
		coordRate.SetFloat64(rapid.Float64Range(0.25, 4).Draw(t, "coordRateValue"))
	}
	// ratio = memberRate/coordRate = 1 − drift + 2×drift×u, u in [0, 1].
	rho := new(big.Rat).SetFloat64(drift) // exact value of the float
	u := big.NewRat(int64(rapid.OneOf(rapid.Just(0), rapid.Just(1000), rapid.IntRange(0, 1000)).Draw(t, "u")), 1000)
	ratio := new(big.Rat).Mul(new(big.Rat).Mul(big.NewRat(2, 1), rho), u)
	ratio.Add(ratio, new(big.Rat).Sub(big.NewRat(1, 1), rho))
	h.coordRate = coordRate
	h.memberRate = new(big.Rat).Mul(coordRate, ratio)
	return h
}

// TestWindowDeadlineBeatsCoordinatorExpiry checks the window's promise: for
// any network delays and clock rates within the drift bound, the member
// becomes Suspect strictly before the earliest instant at which the
// coordinator may expire its session.
func TestWindowDeadlineBeatsCoordinatorExpiry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := drawHeartbeat(t)
		if ok, why := h.safe(false); !ok {
			t.Fatal(why)
		}
	})
}

// TestWindowCountingFromReceiveIsUnsafe shows that the model above catches
// the tempting mistake of counting from when the acknowledgement arrived:
// a slow response lets the member trust past the coordinator's expiry.
func TestWindowCountingFromReceiveIsUnsafe(t *testing.T) {
	one := big.NewRat(1, 1)
	base := heartbeat{
		w:          epoch.Window{SessionTimeout: 10 * time.Second, MaxDrift: 0.01, Margin: 100 * time.Millisecond},
		memberRate: one, coordRate: one,
	}
	tests := []struct {
		name                        string
		requestDelay, responseDelay time.Duration
		fromReceiveSafe             bool
	}{
		{"no delay", 0, 0, true},
		{"fast round trip", 20 * time.Millisecond, 20 * time.Millisecond, true},
		{"slow response", 0, 250 * time.Millisecond, false},
		// The request delay moves the coordinator's expiry too; only the
		// response delay beyond allowance + margin (200ms) hurts.
		{"slow request, fast response", time.Second, 0, true},
		{"response just within allowance and margin", 50 * time.Millisecond, 199 * time.Millisecond, true},
		{"response past allowance and margin", 50 * time.Millisecond, 201 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := base
			h.requestDelay, h.responseDelay = int64(tt.requestDelay), int64(tt.responseDelay)
			if ok, why := h.safe(false); !ok {
				t.Errorf("counting from the send time: %s", why)
			}
			if ok, _ := h.safe(true); ok != tt.fromReceiveSafe {
				t.Errorf("counting from the receive time: safe = %v, want %v", ok, tt.fromReceiveSafe)
			}
		})
	}
}

// TestWindowCountingFromReceiveViolates checks that random heartbeats, the
// same ones the safety property passes, catch the receive-time mistake.
func TestWindowCountingFromReceiveViolates(t *testing.T) {
	violations := 0
	rapid.Check(t, func(rt *rapid.T) {
		if ok, _ := drawHeartbeat(rt).safe(true); !ok {
			violations++
		}
	})
	if violations == 0 {
		t.Errorf("counting from the receive time never violated safety over random heartbeats")
	}
}

// TestWindowZeroMarginIsNotStrict shows why Timing.Validate requires a
// positive margin: at the extreme of the drift bound, with no delay, a
// zero margin makes the member's deadline coincide with the coordinator's
// expiry instead of preceding it.
func TestWindowZeroMarginIsNotStrict(t *testing.T) {
	h := heartbeat{
		// 0.125 is exact in binary, so the allowance is exactly 1s.
		w:          epoch.Window{SessionTimeout: 8 * time.Second, MaxDrift: 0.125},
		coordRate:  big.NewRat(1, 1),
		memberRate: big.NewRat(7, 8), // member clock 12.5 % slow: the bound
	}
	if ok, _ := h.safe(false); ok {
		t.Fatalf("zero margin at the drift bound was strictly safe; the model no longer tests the margin")
	}
	if d, e := h.memberDeadline(false), h.coordinatorExpiry(); d.Cmp(e) != 0 {
		t.Errorf("member deadline %s and coordinator expiry %s should coincide", d.FloatString(3), e.FloatString(3))
	}
	h.w.Margin = 1
	if ok, why := h.safe(false); !ok {
		t.Errorf("a 1ns margin should restore safety: %s", why)
	}
}

func BenchmarkWindowDeadline(b *testing.B) {
	w := epoch.Timing{SessionTimeout: 10 * time.Second, MaxDrift: 0.01, Margin: 100 * time.Millisecond}.Window()
	sent := time.Now()
	var d time.Time
	for b.Loop() {
		d = w.Deadline(sent)
	}
	if d.Before(sent) {
		b.Fatal("deadline before send time")
	}
}
