package coordinator

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// restoredDeadline is the session deadline of member, whose session is
// session, restored at now: with a TakeoverGrace, at least the grace,
// plus up to an eighth of it (whole milliseconds, by a hash of the
// member's ID), so that the members of a large group that never come
// back expire spread over that eighth rather than in one Tick. The
// member's next session-renewing request sets its deadline as usual,
// ending the grace.
//
// The grace exists for the clients of a coordinator that died: they
// reach the new one only once they notice, and stock clients notice
// slowly (Config.TakeoverGrace). It costs the partitions of a member
// that died with the old coordinator: they stay owned for the grace
// rather than the session.
func (c *Config) restoredDeadline(now time.Time, member string, session time.Duration) time.Time {
	if c.TakeoverGrace <= 0 {
		return now.Add(session)
	}
	d := max(session, c.TakeoverGrace)
	if ms := uint64(d / 8 / time.Millisecond); ms > 0 {
		d += time.Duration(xxhash.Sum64String(member)%ms) * time.Millisecond
	}
	return now.Add(d)
}
