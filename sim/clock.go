package sim

import (
	"fmt"
	"time"
)

// origin is the instant virtual time starts from: every simulated run begins
// there, whatever the seed. It is a plain wall-clock value with no monotonic
// reading, so times derived from it compare and subtract by their
// wall-clock fields only, the same on every machine.
var origin = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// Origin returns the instant at which every simulated run starts
// (2030-01-01 00:00 UTC). The times the simulator hands to the coordinator
// and member cores are Origin plus the elapsed virtual time; they carry no
// monotonic clock reading.
func Origin() time.Time { return origin }

// vtime is a virtual instant: nanoseconds since Origin. The engine works in
// vtime and converts to time.Time only at the seams of the real cores.
type vtime int64

// vnever is a vtime later than any the engine reaches.
const vnever = vtime(1<<63 - 1)

// Time converts v to a time.Time. The result carries no monotonic reading.
func (v vtime) Time() time.Time { return origin.Add(time.Duration(v)) }

// Duration returns v as the time elapsed since Origin.
func (v vtime) Duration() time.Duration { return time.Duration(v) }

// String renders v as the time since the start, as in "1m30.5s".
func (v vtime) String() string { return time.Duration(v).String() }

// vtimeOf converts t to a vtime; t must not be before Origin.
func vtimeOf(t time.Time) vtime {
	if t.IsZero() {
		return vnever
	}
	return vtime(t.Sub(origin))
}

// clock is the simulation's virtual clock. It only moves forward: an
// attempt to move it back is a bug in the engine and panics, as asim's
// clock does.
type clock struct {
	now vtime
}

// advance moves the clock to t.
func (c *clock) advance(t vtime) {
	if t < c.now {
		panic(fmt.Sprintf("sim: virtual time would go back from %v to %v", c.now, t))
	}
	c.now = t
}

// skewedClock converts between the simulation's time and the clock of one
// process whose clock runs at rate (1 + skew) relative to it: over d of
// simulated time, the process's clock advances by d×(1+skew). Both
// conversions are monotonic, and toSim is the least simulated instant at
// which the process's clock reads at least the given value, so a timer set
// on the process's clock never fires early by the process's own reading.
type skewedClock struct {
	skew float64
}

// toLocal returns what the process's clock reads at simulated instant t.
func (c skewedClock) toLocal(t vtime) vtime {
	if c.skew == 0 || t == vnever {
		return t
	}
	return vtime(float64(t) * (1 + c.skew))
}

// toSim returns the earliest simulated instant at which the process's clock
// reads at least l.
func (c skewedClock) toSim(l vtime) vtime {
	if c.skew == 0 || l == vnever {
		return l
	}
	t := vtime(float64(l) / (1 + c.skew))
	for c.toLocal(t) < l {
		t++
	}
	for t > 0 && c.toLocal(t-1) >= l {
		t--
	}
	return t
}
