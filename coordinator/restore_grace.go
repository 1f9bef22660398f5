package coordinator

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// restoredDeadline is the session deadline of member of group, whose
// session is session, restored at now: with a TakeoverGrace, at least the
// grace, plus up to an eighth of it (whole milliseconds, by a hash of the
// group and the member's ID), so that the members that never come back
// expire spread over that eighth rather than in one Tick: the sessions
// of 160,000 members taken over at once would otherwise all end in one
// instant. The member's next session-renewing request sets its deadline
// as usual, ending the grace. Ending a session later than its timeout is
// safe: a member trusts its ownership no longer than its own session
// (epoch.Window).
//
// The grace exists for the clients of a coordinator that died: they
// reach the new one only once they notice, and stock clients notice
// slowly (Config.TakeoverGrace). It costs the partitions of a member
// that died with the old coordinator: they stay owned for the grace
// rather than the session.
func (c *Config) restoredDeadline(now time.Time, group, member string, session time.Duration) time.Time {
	return now.Add(c.restoredSession(group, member, session))
}

// restoredSession is how long after its group resumes the session of
// member of group, whose session is session, ends (restoredDeadline).
func (c *Config) restoredSession(group, member string, session time.Duration) time.Duration {
	if c.TakeoverGrace <= 0 {
		return session
	}
	d := max(session, c.TakeoverGrace)
	if ms := uint64(d / 8 / time.Millisecond); ms > 0 {
		// The hash of group+"\x00"+member, without building it: this
		// runs for every member a group rebuilds.
		var h xxhash.Digest
		h.Reset()
		h.WriteString(group)
		h.WriteString("\x00")
		h.WriteString(member)
		d += time.Duration(h.Sum64()%ms) * time.Millisecond
	}
	return d
}
