package sim

import (
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/member"
)

// partMetric follows one partition's working owners over time.
type partMetric struct {
	// believers counts the live processes whose claim on the partition
	// is Owned: they believe they own it and work on it, paused or not.
	// active counts those of them that are not paused.
	believers int32
	active    int32
	everOwned bool
	// downSince is when believers fell to zero; stallSince when the last
	// active owner paused; doubleSince when believers rose to two.
	downSince   vtime
	stallSince  vtime
	doubleSince vtime
}

// crashTrack follows the partitions a crash left without a working owner
// until all have one again.
type crashTrack struct {
	at      vtime
	waiting map[int32]bool
}

// expulsion is a member the coordinator removed while its process lived.
type expulsion struct {
	at     vtime
	member string
	reason string
}

// metrics gathers the figures of a run as it goes.
type metrics struct {
	parts []partMetric

	unownedNs  int64
	stalledNs  int64
	doubleNs   int64
	incidents  []time.Duration
	openAtEnd  int
	everOwned  int
	firstFull  vtime
	crashes    []*crashTrack
	reassign   []time.Duration
	unassigned int // crashes whose partitions were not all reassigned by the end
	// departures, leaveReassign and leftUnassigned do the same for
	// graceful leaves, from the moment the process was asked to leave.
	departures     []*crashTrack
	leaveReassign  []time.Duration
	leftUnassigned int
	// takeovers, pauseReassign and pausedUnassigned do the same for a
	// scripted pause (pause member=): from its start until another member
	// works on every partition the paused one worked on alone. A paused
	// owner still believes it owns them, so this is not the end of an
	// incident but a takeover.
	takeovers        []*takeover
	pauseReassign    []time.Duration
	pausedUnassigned int

	heartbeats     int64 // delivered to the coordinator
	heartbeatsSent int64

	epoch      int32
	epochBumps int64
	rebalances int64
	moves      int64
	viewMoves  int64
	minMoves   int64
	prevOwners []memberRef // the coordinator's owners at the last completed rebalance

	joins, leaves, expirations, removals int64
	connDrops, connLossExpulsions        int64
	falseExpulsions                      []expulsion
	fatal                                int64

	pauses   int64
	pausedNs int64

	timelinePart int32
	timeline     []TimelineEntry
}

func (m *metrics) init(w *world, n int, timeline int) {
	m.parts = make([]partMetric, n)
	m.firstFull = -1
	m.prevOwners = make([]memberRef, n)
	m.timelinePart = -1
	if timeline >= 0 && timeline < n {
		m.timelinePart = int32(timeline)
	}
}

// setWorking changes the number of processes that believe they own p (in
// the Owned state) by believe, and of those that are not paused by act.
//
// Availability follows the believers, as the Owned state is what a member
// works in: a partition without one has no owner. A partition whose only
// owners are paused has owners that do no work: it is stalled, counted
// apart. Double ownership follows the believers too: a paused owner that
// still believes it owns a partition someone else now owns is the zombie
// that fencing is for.
func (m *metrics) setWorking(w *world, p int32, believe, act int32) {
	pm := &m.parts[p]
	now := w.clock.now
	oldB, oldA := pm.believers, pm.active
	pm.believers += believe
	pm.active += act
	if pm.believers < 0 || pm.active < 0 || pm.active > pm.believers {
		panic("sim: inconsistent owner counts for partition " + w.layout.name(p))
	}
	switch {
	case oldB == 0 && pm.believers > 0:
		if pm.everOwned {
			d := since(pm.downSince, now)
			m.unownedNs += int64(d)
			m.incidents = append(m.incidents, d)
		} else {
			pm.everOwned = true
			m.everOwned++
			if m.everOwned == len(m.parts) {
				m.firstFull = now
			}
		}
		m.reassigned(w, p)
	case oldB > 0 && pm.believers == 0:
		pm.downSince = now
	}
	wasStalled, stalled := oldB > 0 && oldA == 0, pm.believers > 0 && pm.active == 0
	switch {
	case !wasStalled && stalled:
		pm.stallSince = now
	case wasStalled && !stalled:
		m.stalledNs += int64(since(pm.stallSince, now))
	}
	switch {
	case oldB < 2 && pm.believers >= 2:
		pm.doubleSince = now
	case oldB >= 2 && pm.believers < 2:
		m.doubleNs += int64(since(pm.doubleSince, now))
	}
}

// crashed starts following the partitions a crash left without an owner.
func (m *metrics) crashed(w *world, lost []int32) {
	t := &crashTrack{at: w.clock.now, waiting: make(map[int32]bool, len(lost))}
	for _, p := range lost {
		t.waiting[p] = true
	}
	if len(lost) == 0 {
		m.reassign = append(m.reassign, 0)
		return
	}
	m.crashes = append(m.crashes, t)
}

// departing starts following the partitions n works on alone as it is
// asked to leave gracefully, until each has a working owner again: what a
// graceful leave costs, comparable with a crash's reassignment.
func (m *metrics) departing(w *world, n *memberNode) {
	t := &crashTrack{at: w.clock.now, waiting: m.workedAlone(n)}
	if len(t.waiting) == 0 {
		m.leaveReassign = append(m.leaveReassign, 0)
		return
	}
	m.departures = append(m.departures, t)
}

// takeover follows the partitions of a paused member until others own
// them.
type takeover struct {
	at      vtime
	node    int32
	waiting map[int32]bool
}

// pausing starts following the partitions n works on alone as a scripted
// pause stops it.
func (m *metrics) pausing(w *world, n *memberNode) {
	t := &takeover{at: w.clock.now, node: n.id, waiting: m.workedAlone(n)}
	if len(t.waiting) == 0 {
		m.pauseReassign = append(m.pauseReassign, 0)
		return
	}
	m.takeovers = append(m.takeovers, t)
}

// workedAlone returns the partitions n works on that no other member
// believes it owns: those a leave or a pause of n leaves unworked.
func (m *metrics) workedAlone(n *memberNode) map[int32]bool {
	alone := make(map[int32]bool, len(n.working))
	for _, p := range n.working {
		if m.parts[p].believers == 1 {
			alone[p] = true
		}
	}
	return alone
}

// ownedBy notes that node now works on p.
func (m *metrics) ownedBy(w *world, node, p int32) {
	kept := m.takeovers[:0]
	for _, t := range m.takeovers {
		if node != t.node {
			delete(t.waiting, p)
		}
		if len(t.waiting) == 0 {
			m.pauseReassign = append(m.pauseReassign, since(t.at, w.clock.now))
			continue
		}
		kept = append(kept, t)
	}
	clear(m.takeovers[len(kept):])
	m.takeovers = kept
}

// reassigned notes that p has a working owner again.
func (m *metrics) reassigned(w *world, p int32) {
	m.crashes, m.reassign = settle(w, p, m.crashes, m.reassign)
	if len(m.departures) > 0 {
		m.departures, m.leaveReassign = settle(w, p, m.departures, m.leaveReassign)
	}
}

// settle removes p from the tracks that wait for it and adds the time of
// each that it completes to done.
func settle(w *world, p int32, tracks []*crashTrack, done []time.Duration) ([]*crashTrack, []time.Duration) {
	kept := tracks[:0]
	for _, t := range tracks {
		delete(t.waiting, p)
		if len(t.waiting) == 0 {
			done = append(done, since(t.at, w.clock.now))
			continue
		}
		kept = append(kept, t)
	}
	clear(tracks[len(kept):])
	return kept, done
}

// finish closes what is still open at the end of the run.
func (m *metrics) finish(now vtime) {
	for p := range m.parts {
		pm := &m.parts[p]
		if pm.believers > 0 && pm.active == 0 {
			m.stalledNs += int64(since(pm.stallSince, now))
		}
		if pm.everOwned && pm.believers == 0 {
			d := since(pm.downSince, now)
			m.unownedNs += int64(d)
			m.incidents = append(m.incidents, d)
			m.openAtEnd++
		}
		if pm.believers >= 2 {
			m.doubleNs += int64(since(pm.doubleSince, now))
		}
	}
	m.unassigned = len(m.crashes)
	m.leftUnassigned = len(m.departures)
	m.pausedUnassigned = len(m.takeovers)
}

// identity is what counts as "the same member" for moves: with static
// membership the slot (its instance ID), else the process incarnation (its
// member ID).
func (w *world) identity(r memberRef) memberRef {
	if w.sc.Static {
		return memberRef{node: r.node}
	}
	return r
}

// coordEvent counts one event of the coordinator.
func (m *metrics) coordEvent(w *world, ev coordinator.Event) {
	w.tr.record(128+uint8(noteCoord), w.clock.now, 0, int64(ev.Kind), int64(ev.Epoch))
	if w.tr.text() {
		s := ev.Kind.String() + " epoch=" + itoa(int(ev.Epoch))
		if ev.MemberID != "" {
			s += " member=" + ev.MemberID
		}
		if ev.Reason != "" {
			s += " reason=" + ev.Reason
		}
		if ev.Kind == coordinator.EventRebalanceCompleted {
			s += " moves=" + itoa(ev.Moves)
		}
		w.traceLine("coord", "%s", s)
	}
	switch ev.Kind {
	case coordinator.EventMemberJoined:
		m.joins++
	case coordinator.EventMemberLeft:
		m.leaves++
	case coordinator.EventMemberExpired, coordinator.EventMemberRemoved:
		if ev.Kind == coordinator.EventMemberExpired {
			m.expirations++
			if ev.Reason == connLossReason {
				m.connLossExpulsions++
			}
		} else {
			m.removals++
		}
		if ref, ok := w.byID[ev.MemberID]; ok {
			n := w.nodes[ref.node]
			if n.alive && n.inc == ref.inc && !n.leaving {
				m.falseExpulsions = append(m.falseExpulsions, expulsion{w.clock.now, ev.MemberID, ev.Reason})
			}
		}
	case coordinator.EventRebalanceStarted:
		m.epochBumps++
	case coordinator.EventRebalanceCompleted:
		m.rebalances++
		m.moves += int64(ev.Moves)
		m.minMoves += int64(m.fewestMoves(w))
	}
}

// connLossReason is the reason the coordinator gives an expulsion after a
// member's connection closed (coordinator.Config.ConnLossGrace).
const connLossReason = "connection-closed"

// fewestMoves returns the fewest partition moves that could have taken the
// group from the owners it had at the previous completed rebalance to a
// balanced assignment (sizes within one) of its current members, and
// remembers the current owners for next time. Partitions of members that
// left must move; a remaining member can keep at most its new share.
func (m *metrics) fewestMoves(w *world) int {
	c := w.coord
	members := make(map[memberRef]int, len(c.members))
	for id := range c.members {
		if ref, ok := w.byID[id]; ok {
			members[w.identity(ref)] = 0
		}
	}
	prevOwned := 0
	for _, r := range m.prevOwners {
		if r == (memberRef{}) {
			continue
		}
		prevOwned++
		if k, ok := members[r]; ok {
			members[r] = k + 1
		}
	}
	kept := 0
	if n := len(members); n > 0 {
		floor, extra := len(m.parts)/n, len(m.parts)%n
		bigger := 0
		for _, k := range members {
			kept += min(k, floor)
			if k > floor {
				bigger++
			}
		}
		kept += min(extra, bigger)
	}
	for p := range m.prevOwners {
		if v := c.view[p]; v.set {
			m.prevOwners[p] = w.identity(v.ref)
		} else {
			m.prevOwners[p] = memberRef{}
		}
	}
	return prevOwned - kept
}

// groupEpoch notes the group epoch a GroupRecord carries.
func (m *metrics) groupEpoch(e int32) { m.epoch = max(m.epoch, e) }

// claimChange records a claim change in the timeline of the chosen
// partition.
func (m *metrics) claimChange(w *world, n *memberNode, p int32, ch member.ClaimChange) {
	if p != m.timelinePart {
		return
	}
	m.timeline = append(m.timeline, TimelineEntry{
		At: since(0, w.clock.now), Who: n.name + "#" + itoa(int(n.inc)),
		From: ch.From.String(), To: ch.To.String(), Token: int64(ch.Token), Cause: ch.Cause,
	})
}

// claimGone records that a process holding a claim on p ended.
func (m *metrics) claimGone(w *world, n *memberNode, p int32) {
	if p != m.timelinePart {
		return
	}
	c := n.claims[p]
	if c.state == epoch.Unowned || c.state == epoch.Lost {
		return
	}
	m.timeline = append(m.timeline, TimelineEntry{
		At: since(0, w.clock.now), Who: n.name + "#" + itoa(int(n.inc)),
		From: c.state.String(), To: "gone", Token: int64(c.token), Cause: "process-ended",
	})
}

// viewChanged records a change of p's owner in the coordinator's view.
func (m *metrics) viewChanged(w *world, p int32) {
	if p != m.timelinePart {
		return
	}
	e := TimelineEntry{At: since(0, w.clock.now), Who: "coord", Cause: "persisted"}
	if v := w.coord.view[p]; v.set {
		e.To = "owner " + w.nodes[v.ref.node].name + "#" + itoa(int(v.ref.inc))
		e.Token = int64(v.token)
	} else {
		e.To = "no owner"
	}
	m.timeline = append(m.timeline, e)
}
