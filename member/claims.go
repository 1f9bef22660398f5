package member

import (
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// claim is the machine's record of one partition it has been assigned at
// least once. It stays after a release or a loss, so that a later
// ownership must carry a higher token.
type claim struct {
	key
	topic string
	own   epoch.Ownership
	// active: the shell may be running work on the claim. Set when the
	// machine hands the claim to the shell (Pending, or resumed after
	// Suspect); cleared by Released.
	active bool
	// revoked: the coordinator revoked the partition (or the member is
	// leaving); it is released as soon as its work has stopped.
	revoked bool
}

// token is the claim's live token, or the one it gave up or lost.
func (c *claim) token() epoch.Token {
	if t := c.own.Token(); !t.IsNone() {
		return t
	}
	return c.own.Highest()
}

// counts summarises the claims; recount keeps it current.
type counts struct {
	live      int // Pending, Owned, Revoking: subject to the deadline
	held      int // live or Suspect: a token that may be valid
	revocable int // held and revoked: the coordinator waits for their release
	busy      int // Revoking, or Suspect and active: work still stopping
}

func (m *Machine) recount() {
	if !m.stale {
		return
	}
	m.stale = false
	var n counts
	for _, c := range m.order {
		st := c.own.State()
		if !st.Held() {
			continue
		}
		n.held++
		if st != epoch.Suspect {
			n.live++
		}
		if c.revoked {
			n.revocable++
		}
		if st == epoch.Revoking || (st == epoch.Suspect && c.active) || st == epoch.Pending || st == epoch.Owned {
			n.busy++
		}
	}
	m.counts = n
}

// change records a transition that already happened to c.
func (m *Machine) change(c *claim, from epoch.State, cause string) {
	m.rd.Changes = append(m.rd.Changes, ClaimChange{
		Topic: c.topic, Partition: c.key.partition, Token: c.token(),
		From: from, To: c.own.State(), Cause: cause,
	})
	m.stale = true
}

// suspectAll makes every live claim Suspect: the member can no longer be
// sure the coordinator has not expired its session.
func (m *Machine) suspectAll() {
	for _, c := range m.order {
		switch from := c.own.State(); from {
		case epoch.Pending, epoch.Owned, epoch.Revoking:
			c.own.Suspect()
			m.change(c, from, causeDeadline)
		}
	}
}

// loseAll kills every token the member holds and starts it over at epoch 0
// with a fresh incarnation: whatever the heartbeat in flight brings back
// belongs to the old membership and is ignored.
func (m *Machine) loseAll(cause string) {
	for _, c := range m.order {
		if from := c.own.State(); from.Held() {
			c.own.Lose()
			c.revoked = false
			m.change(c, from, cause)
		}
	}
	m.deferred, m.unresolved = m.deferred[:0], m.unresolved[:0]
	m.memberEpoch = 0
	m.incarnation++
	m.lastAck, m.revokeAt = time.Time{}, time.Time{}
	m.full, m.dirty = true, true
	m.stale = true
	m.hbNow = true
}

// finishLeave ends the member: whatever it still holds is given up.
func (m *Machine) finishLeave() {
	for _, c := range m.order {
		if from := c.own.State(); from.Held() {
			c.own.Lose()
			m.change(c, from, causeLeft)
		}
	}
	m.left, m.rd.Left = true, true
	m.hbWanted, m.hbNow = false, false
	m.stale = true
}

// fail stops the member for good after an answer retrying cannot fix.
func (m *Machine) fail(err error) {
	for _, c := range m.order {
		if from := c.own.State(); from.Held() {
			c.own.Lose()
			m.change(c, from, causeFatal)
		}
	}
	m.left, m.rd.Left, m.rd.Err = true, true, err
	m.hbWanted, m.hbNow = false, false
	m.stale = true
}

// lookup finds the claim of a named partition.
func (m *Machine) lookup(topic string, partition int32) *claim {
	id, ok := m.ids[topic]
	if !ok {
		return nil
	}
	return m.claims[key{id, partition}]
}

func (m *Machine) onReleased(e Released) {
	c := m.lookup(e.Topic, e.Partition)
	if c == nil || c.token() != e.Token || c.own.State() == epoch.Unowned {
		return
	}
	c.active = false
	m.stale = true
	if c.own.State() == epoch.Revoking {
		c.own.Release()
		c.revoked = false
		m.change(c, epoch.Revoking, causeReleased)
		m.dirty = true
		if !m.leaving {
			// The coordinator waits for this acknowledgement before it
			// gives the partition to its next owner.
			m.hbNow = true
		}
	}
}

func (m *Machine) onStarted(e Started) {
	c := m.lookup(e.Topic, e.Partition)
	if c == nil || c.own.State() != epoch.Pending || c.own.Token() != e.Token {
		return
	}
	c.own.Start()
	m.change(c, epoch.Pending, causeStarted)
}

func (m *Machine) onCommitRejected(e CommitRejected) {
	c := m.lookup(e.Topic, e.Partition)
	if c == nil || c.own.Token() != e.Token || !c.own.State().Held() {
		return
	}
	from := c.own.State()
	c.own.Lose()
	c.revoked = false
	m.change(c, from, causeCommitRejected)
	// The coordinator and the member disagree about the partition: a full
	// heartbeat, now, makes the coordinator send the whole assignment.
	m.full, m.dirty = true, true
	m.hbNow = true
}

func (m *Machine) onTopicIDs(now time.Time, e TopicIDs) {
	m.learn(e.IDs)
	if len(m.unresolved) == 0 || m.leaving {
		return
	}
	var still []grant
	var named []grant
	for _, g := range m.unresolved {
		if _, ok := m.names[g.id]; ok {
			named = append(named, g)
		} else {
			still = append(still, g)
		}
	}
	m.unresolved = still
	m.sortGrants(named)
	m.recount()
	for _, g := range named {
		if m.counts.revocable > 0 {
			// It keeps the token it has been reported under.
			m.deferred = append(m.deferred, g)
			continue
		}
		if !m.assign(now, g) {
			return
		}
	}
}
