package member

import (
	"bytes"
	"cmp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// reconcile applies an assignment the coordinator sent at token (the
// response's member epoch), KIP-848 style: partitions no longer assigned
// are revoked first; new ones become Pending only once every revoked
// partition is released and that is acknowledged. within says whether the
// response's heartbeat was sent less than a window ago, so that the
// response may confirm Suspect claims.
//
// A partition's token is the member epoch of the first heartbeat that
// reports it as the member's own, which is what tenure's coordinator
// records: a new partition is reported in the very next heartbeat, whose
// epoch is token, and so is one the member cannot name yet; one that waits
// for revocations is not reported, and takes the member epoch at which it
// stops waiting (applyDeferred).
func (m *Machine) reconcile(now time.Time, a *kmsg.ConsumerGroupHeartbeatResponseAssignment, token epoch.Token, within bool, sent time.Time) {
	target := make(map[key]bool)
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			if p >= 0 {
				target[key{t.TopicID, p}] = true
			}
		}
	}

	for _, c := range m.order {
		in := target[c.key]
		switch from := c.own.State(); from {
		case epoch.Pending, epoch.Owned:
			if !in {
				c.own.Revoke()
				c.revoked = true
				m.armRevoke(sent)
				m.change(c, from, causeRevoked)
			}
		case epoch.Suspect:
			if !in && !c.revoked {
				c.revoked = true
				m.armRevoke(sent)
			}
			if within {
				cause := causeConfirmed
				if !in {
					cause = causeRevoked
				}
				m.confirm(c, cause)
			}
		}
	}

	// What stays waiting stays so: a deferred grant has no token yet, an
	// unresolved one keeps the token it was reported under.
	m.deferred = keepGrants(m.deferred, target)
	if n := len(m.unresolved); n > 0 {
		m.unresolved = keepGrants(m.unresolved, target)
		if len(m.unresolved) != n {
			m.dirty = true // they were reported as owned
		}
	}
	waiting := make(map[key]bool, len(m.deferred)+len(m.unresolved))
	for _, g := range m.deferred {
		waiting[g.key] = true
	}
	for _, g := range m.unresolved {
		waiting[g.key] = true
	}

	var fresh []grant
	for k := range target {
		if waiting[k] {
			continue
		}
		if c := m.claims[k]; c != nil {
			if st := c.own.State(); st == epoch.Pending || st == epoch.Owned || st == epoch.Suspect {
				continue // kept, at its token
			}
		}
		fresh = append(fresh, grant{k, token})
	}
	m.sortGrants(fresh)
	m.recount()
	for _, g := range fresh {
		switch {
		case m.names[g.id] == "":
			m.unresolved = append(m.unresolved, g)
			m.dirty = true
		case m.counts.revocable > 0 || m.revoking(g.key):
			// Not reported until accepted: its token is decided then.
			m.deferred = append(m.deferred, grant{g.key, epoch.None})
		default:
			if !m.assign(now, g) {
				return
			}
		}
	}
	if len(m.unresolved) > 0 {
		// New memory: the shell may hold the last list until Advance.
		m.rd.Resolve = make([][16]byte, 0, len(m.unresolved))
		for _, g := range m.unresolved {
			if !slices.Contains(m.rd.Resolve, g.id) {
				m.rd.Resolve = append(m.rd.Resolve, g.id)
			}
		}
		slices.SortFunc(m.rd.Resolve, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	}
}

// revoking reports whether the partition's current ownership is still
// being released: a new one must wait for that.
func (m *Machine) revoking(k key) bool {
	c := m.claims[k]
	return c != nil && c.own.State() == epoch.Revoking
}

// confirm resumes a Suspect claim after the coordinator confirmed the
// session and the partition in time. A claim that was revoked meanwhile
// resumes as Revoking, and is released at once if its work has stopped.
func (m *Machine) confirm(c *claim, cause string) {
	c.own.Confirm()
	if c.revoked && c.own.State() != epoch.Revoking {
		c.own.Revoke()
	}
	if c.revoked && !c.active {
		c.own.Release()
		c.revoked = false
		m.change(c, epoch.Suspect, causeReleased)
		m.dirty = true
		return
	}
	if !c.revoked {
		// Work resumes (or, for a Pending claim, starts) again.
		c.active = true
	}
	m.change(c, epoch.Suspect, cause)
}

// confirmAll confirms every Suspect claim: the coordinator answered in
// time and changed nothing.
func (m *Machine) confirmAll() {
	m.recount()
	if m.counts.held == m.counts.live {
		return // nothing Suspect
	}
	for _, c := range m.order {
		if c.own.State() == epoch.Suspect {
			m.confirm(c, causeConfirmed)
		}
	}
}

// armRevoke starts the revocation deadline, counted from the send time of
// the heartbeat whose response revoked: the coordinator cannot have
// started its rebalance timer earlier.
func (m *Machine) armRevoke(sent time.Time) {
	if m.revokeAt.IsZero() {
		m.revokeAt = sent.Add(m.revokeAfter)
	}
}

// assign makes a grant a Pending claim. A token that does not exceed every
// token the member held for the partition cannot be a new ownership: the
// coordinator still has the member at an epoch whose tokens it declared
// dead. The member then leaves and rejoins, for a new epoch and fresh
// tokens, and assign returns false.
//
// A grant accepted past the deadline (from a late response) goes straight
// to Suspect without ever being handed to the shell: work must not start,
// not even for an instant.
func (m *Machine) assign(now time.Time, g grant) bool {
	c := m.claims[g.key]
	if c == nil {
		c = &claim{key: g.key, topic: m.names[g.id], own: epoch.NewOwnership(epoch.Partition(g.partition))}
		m.insert(c)
	}
	from := c.own.State()
	if !c.own.Can(epoch.EventAssign) {
		panic("member: assign to a claim in state " + from.String())
	}
	if err := c.own.Assign(g.token); err != nil {
		m.loseAll(causeStaleAssignment)
		m.resetLeave = true
		return false
	}
	c.revoked = false
	m.dirty = true
	if m.lastAck.IsZero() || m.window.Lapsed(m.lastAck, now) {
		c.own.Suspect()
		c.active = false
		m.change(c, from, causeDeadline)
		return true
	}
	c.active = true
	m.change(c, from, causeAssigned)
	return true
}

// applyDeferred accepts the partitions that waited for revocations, just
// before the heartbeat that reports them: a grant without a token takes
// the member epoch, which that heartbeat carries (one the member reported
// before, while it could not name it, keeps its token).
func (m *Machine) applyDeferred(now time.Time) {
	grants := m.deferred
	m.deferred = nil
	for _, g := range grants {
		if g.token.IsNone() {
			g.token = epoch.Token(m.memberEpoch)
		}
		if m.names[g.id] == "" {
			m.unresolved = append(m.unresolved, g)
			m.dirty = true // reported from now on
			continue
		}
		if !m.assign(now, g) {
			return
		}
	}
}

// keepGrants drops the grants no longer in target, in place.
func keepGrants(gs []grant, target map[key]bool) []grant {
	return slices.DeleteFunc(gs, func(g grant) bool { return !target[g.key] })
}

// sortGrants orders grants by topic name (unnamed ones last, by ID), then
// partition, so that changes come out in a stable order.
func (m *Machine) sortGrants(gs []grant) {
	slices.SortFunc(gs, func(a, b grant) int {
		na, nb := m.names[a.id], m.names[b.id]
		if na != nb {
			if na == "" {
				return 1
			}
			if nb == "" {
				return -1
			}
			return cmp.Compare(na, nb)
		}
		if c := bytes.Compare(a.id[:], b.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
}

// sortKeys orders keys by topic ID, then partition.
func sortKeys(ks []key) {
	slices.SortFunc(ks, func(a, b key) int {
		if c := bytes.Compare(a.id[:], b.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
}
