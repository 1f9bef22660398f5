package epoch

import (
	"math"
	"time"
)

// DefaultMaxDrift is the clock-rate drift [DefaultTiming] assumes between a
// member and its coordinator: 1 %. Crystal oscillators drift by tens of
// parts per million and NTP slews a clock's rate by at most 500 ppm
// (0.05 %), so 1 % leaves a wide berth. A clock that stops outright (a
// suspended virtual machine) breaks any bound; that is what fences are for.
const DefaultMaxDrift = 0.01

// Window is the safe-ownership arithmetic of a member: how long after the
// send time of its last acknowledged heartbeat it may still trust that the
// coordinator has not expired its session, and so that nobody else has been
// given its partitions.
//
// The coordinator expires a session SessionTimeout after it last received a
// heartbeat, measured on its own clock. The member cannot see that clock, nor
// when the heartbeat arrived, so it counts from the moment it read its own
// (monotonic) clock just before sending that heartbeat, shortens the timeout
// by the drift its clock may have against the coordinator's, and subtracts a
// margin:
//
//	deadline = sent + SessionTimeout×(1−MaxDrift) − Margin
//
// At that deadline the member must be [Suspect]: stop work, and wait for the
// coordinator to confirm the session. Counting from the send time is what
// makes this safe whatever the network delay: the coordinator cannot have
// received the heartbeat before it was sent. Counting from when the
// acknowledgement arrived would add the round trip to the member's trust,
// and a slow response would let the member work on past the coordinator's
// expiry.
//
// A heartbeat whose acknowledgement is lost is harmless: the member keeps
// counting from an older heartbeat, while the coordinator, if it received
// the newer one, only expires the session later.
//
// The fields are used as given: the zero MaxDrift means perfectly matched
// clocks, which is never quite true. [DefaultTiming] supplies safe values,
// [Timing.Validate] checks others, and [Timing.Window] makes the Window. A
// Window is a plain value; it reads no clock.
type Window struct {
	// SessionTimeout is the session timeout the coordinator applies.
	SessionTimeout time.Duration
	// MaxDrift bounds the rate difference of the two clocks. Over any
	// stretch of real time in which the coordinator's clock advances by d,
	// the member's clock advances by at least d×(1−MaxDrift) and at most
	// d×(1+MaxDrift); equivalently the ratio of the member's clock rate to
	// the coordinator's lies in [1−MaxDrift, 1+MaxDrift]. Only the lower
	// bound matters for safety: a member clock that runs slow is what makes
	// it trust too long.
	MaxDrift float64
	// Margin is subtracted on top of the drift allowance. It covers what the
	// rate bound does not: the time the member needs to notice the deadline
	// and stop its work, and it makes the guarantee strict even at the
	// extreme drift. It should be positive (see [Timing.Validate]).
	Margin time.Duration
}

// SuspectAfter returns how long after the send time of the last
// acknowledged heartbeat the member must become Suspect:
// SessionTimeout×(1−MaxDrift) − Margin. The drift allowance
// SessionTimeout×MaxDrift is rounded up to a whole nanosecond, not down, so
// that rounding shortens the member's trust rather than lengthens it. The
// result may be zero or negative for an unsafe Window; [Timing.Validate]
// rejects those.
func (w Window) SuspectAfter() time.Duration {
	allowance := time.Duration(math.Ceil(float64(w.SessionTimeout) * w.MaxDrift))
	return w.SessionTimeout - allowance - w.Margin
}

// Deadline returns the instant at which a member whose last acknowledged
// heartbeat was sent at sent must become Suspect:
// sent + [Window.SuspectAfter].
//
// sent must be a reading of the member's monotonic clock (time.Now in the
// shell, the virtual clock in a simulator) taken before the heartbeat was
// written to the network. When acknowledgements arrive out of order, use
// the latest send time among the acknowledged heartbeats.
func (w Window) Deadline(sent time.Time) time.Time {
	return sent.Add(w.SuspectAfter())
}

// Lapsed reports whether, at now, a member whose last acknowledged
// heartbeat was sent at sent must be Suspect: now is at or past
// [Window.Deadline]. now must come from the same monotonic clock as sent.
func (w Window) Lapsed(sent, now time.Time) bool {
	return !now.Before(w.Deadline(sent))
}
