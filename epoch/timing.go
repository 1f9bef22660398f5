package epoch

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnsafeTiming is wrapped by every violation [Timing.Validate] reports.
// Test with errors.Is.
var ErrUnsafeTiming = errors.New("epoch: unsafe timing")

// Timing is the set of durations that decide ownership, shared by the
// coordinator (which expires sessions and rebalances) and its members (which
// heartbeat and compute their safe-ownership deadline). [Timing.Validate]
// holds the rules that keep ownership safe.
type Timing struct {
	// HeartbeatInterval is how often a member heartbeats.
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the coordinator waits, from the last
	// heartbeat it received, before it expires a member's session and gives
	// its partitions to others.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the coordinator waits for members to
	// rejoin (and, cooperatively, to revoke) during a rebalance.
	RebalanceTimeout time.Duration
	// MaxDrift bounds the clock-rate difference between a member and the
	// coordinator; see [Window.MaxDrift] for the precise definition.
	MaxDrift float64
	// Margin is subtracted from the member's deadline on top of the drift
	// allowance; see [Window.Margin].
	Margin time.Duration
}

// DefaultTiming returns the timing of the Kafka Java and franz-go clients'
// defaults (heartbeat 3 s, session 45 s, rebalance 60 s) with
// [DefaultMaxDrift] and a margin of 500 ms. Members become Suspect 44.05 s
// after the send time of their last acknowledged heartbeat.
func DefaultTiming() Timing {
	return Timing{
		HeartbeatInterval: 3 * time.Second,
		SessionTimeout:    45 * time.Second,
		RebalanceTimeout:  60 * time.Second,
		MaxDrift:          DefaultMaxDrift,
		Margin:            500 * time.Millisecond,
	}
}

// Window returns the member's safe-ownership window for this timing.
func (t Timing) Window() Window {
	return Window{SessionTimeout: t.SessionTimeout, MaxDrift: t.MaxDrift, Margin: t.Margin}
}

// SuspectAfter returns how long after the send time of its last
// acknowledged heartbeat a member must become Suspect:
// SessionTimeout×(1−MaxDrift) − Margin. See [Window.SuspectAfter].
func (t Timing) SuspectAfter() time.Duration { return t.Window().SuspectAfter() }

// Validate checks the rules that keep ownership safe and returns every
// violation, joined with errors.Join, each wrapping [ErrUnsafeTiming] and
// naming the values involved; nil if t is safe.
//
// Each field on its own:
//   - HeartbeatInterval, SessionTimeout and RebalanceTimeout are positive.
//   - MaxDrift is in [0, 0.5).
//   - Margin is positive, not merely non-negative. The drift bound is
//     inclusive, so with a zero margin a member whose clock runs exactly
//     MaxDrift slower than the coordinator's would reach its deadline at
//     the very instant the coordinator may expire its session; and a member
//     needs time after its deadline to actually stop. A positive margin
//     also makes the suspect deadline strictly shorter than SessionTimeout
//     even when MaxDrift is 0.
//
// Between fields (checked only when the fields involved pass their own
// rules, so that every message is about a real problem):
//   - HeartbeatInterval × 3 ≤ SessionTimeout, so that a session survives
//     the loss of two consecutive heartbeats (Kafka's own advice).
//   - SuspectAfter > 2 × HeartbeatInterval. A member counts from the send
//     time of its last acknowledged heartbeat; if the next heartbeat or its
//     acknowledgement is lost, the one after it is sent 2 intervals after
//     that send time. Below this bound a single lost heartbeat would make
//     members Suspect and stop work while their sessions are healthy. The
//     round trip of that later heartbeat must also fit in what is left, so
//     leave room above the bound.
//   - RebalanceTimeout ≥ HeartbeatInterval: members learn that a rebalance
//     started from a heartbeat response, so a shorter rebalance timeout
//     could drop members before they could even hear of the rebalance.
//
// These play the part of Kubernetes leader election's rule
// LeaseDuration > RenewDeadline > RetryPeriod × 1.2: the holder must give up
// (here: become Suspect) strictly before anyone else may take over (the
// session expires), and renewals (heartbeats) must be frequent enough that
// one failure does not cost the lease.
func (t Timing) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrUnsafeTiming}, args...)...))
	}

	hbOK := t.HeartbeatInterval > 0
	if !hbOK {
		bad("heartbeat interval %v must be positive", t.HeartbeatInterval)
	}
	sessionOK := t.SessionTimeout > 0
	if !sessionOK {
		bad("session timeout %v must be positive", t.SessionTimeout)
	}
	rebalanceOK := t.RebalanceTimeout > 0
	if !rebalanceOK {
		bad("rebalance timeout %v must be positive", t.RebalanceTimeout)
	}
	driftOK := t.MaxDrift >= 0 && t.MaxDrift < 0.5 // false for NaN
	if !driftOK {
		bad("max drift %v must be in [0, 0.5)", t.MaxDrift)
	}
	marginOK := t.Margin > 0
	if !marginOK {
		bad("margin %v must be positive: it keeps the suspect deadline strictly before the session's expiry", t.Margin)
	}

	// 3h ≤ s is h ≤ ⌊s/3⌋ for positive integers, without overflow.
	if hbOK && sessionOK && t.HeartbeatInterval > t.SessionTimeout/3 {
		bad("heartbeat interval %v × 3 exceeds session timeout %v: a session must survive two lost heartbeats",
			t.HeartbeatInterval, t.SessionTimeout)
	}
	if hbOK && sessionOK && driftOK && marginOK {
		x, h := t.SuspectAfter(), t.HeartbeatInterval
		// x > 2h, written so that it cannot overflow.
		if x <= h || x-h <= h {
			bad("suspect deadline %v (session timeout %v × (1 − %v) − margin %v) must exceed 2 × heartbeat interval %v: one lost heartbeat must not make members Suspect",
				x, t.SessionTimeout, t.MaxDrift, t.Margin, h)
		}
	}
	if hbOK && rebalanceOK && t.RebalanceTimeout < t.HeartbeatInterval {
		bad("rebalance timeout %v is shorter than heartbeat interval %v: members hear of a rebalance only through a heartbeat",
			t.RebalanceTimeout, t.HeartbeatInterval)
	}
	return errors.Join(errs...)
}
