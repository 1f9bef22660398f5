package coordinator

// Connection-aware expiry.
//
// A process that dies has its connections closed by its kernel; a process
// that is paused (GC, swapping, a slow disk, SIGSTOP) or cut off by the
// network keeps them open, or at least sends nothing that closes them.
// Kafka waits for the session timeout either way. The caller (the TCP
// server, the simulator) knows which connection carried each member's
// latest request, and tells the group through ConnectionClosed when that
// connection ends. The member is then expelled ConnLossGrace later, with
// the reason "connection-closed", unless it is heard from first: any
// request naming it (on any connection) clears the mark. A live client
// whose connection dropped under it (a proxy's idle close, a server-side
// close) reconnects on its next request, which for a heartbeating member
// comes within one heartbeat interval, and so keeps its place.
//
// Expelling early is as safe as a session expiry: the member's partitions
// are released and their next owners get higher tokens, so a commit or a
// fenced write of the expelled member carrying its old tokens is refused,
// by the coordinator and by every fence. What an early expulsion can cost
// is a false one: a member whose connection dropped while it was alive and
// that stays silent through the grace. That member stops its own work when
// its safe-ownership window ends (Suspect), finds itself fenced, and
// rejoins. docs/DESIGN.md ("Connection-aware expiry") has the argument.
//
// Static members (KIP-345 instance IDs) are exempt: their point is that a
// restarting process keeps its place for a session timeout, and a restart
// closes its connections. A group restored by another coordinator starts
// with no marks: its members' connections were to the old one.

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// connLossReason is the reason of an expulsion after a connection closed,
// in events (EventMemberExpired), epoch bumps and the generation log.
const connLossReason = "connection-closed"

// connLoss holds the members whose connection closed and who have not
// been heard from since.
type connLoss struct {
	// due maps a member ID to the instant it is expelled.
	due map[string]time.Time
	// next is at or before the earliest due instant (zero when there is
	// none); it is only recomputed when it passes.
	next time.Time
}

// connectionClosed (input ConnectionClosed) is told that the connection
// that carried the latest request of member memberID closed at now. Unless
// the member is heard from within Config.ConnLossGrace, the Tick at the end of the grace
// expels it as its session expiry would, with the reason
// "connection-closed". The caller must call it only for the connection
// that carried the member's latest request (a member may use several
// connections: kgo sends JoinGroup and SyncGroup on one and heartbeats and
// commits on another, and closes an idle one after a while), and only when
// that connection ends, not when a request fails.
//
// It does nothing when the grace is 0, for an unknown member, for a static
// member (see above), for a member under its takeover grace
// (Config.TakeoverGrace: restored and not heard on its heartbeat path
// since) or for a member already marked (the earlier mark stands). Like
// any input, it may leave something in Ready: a new NextTick.
func (g *Group) connectionClosed(now time.Time, memberID string) {
	grace := g.cfg.ConnLossGrace
	if grace <= 0 || g.deleted || !g.connLossApplies(memberID) {
		return
	}
	if _, marked := g.conn.due[memberID]; marked {
		return
	}
	if g.conn.due == nil {
		g.conn.due = make(map[string]time.Time)
	}
	at := now.Add(grace)
	g.conn.due[memberID] = at
	if g.conn.next.IsZero() || at.Before(g.conn.next) {
		g.conn.next = at
	}
}

// connLossApplies reports whether memberID is a dynamic member of the
// group that is not under its takeover grace. A member restored at a
// takeover and not yet heard on its heartbeat path here (a KIP-848
// heartbeat; a classic heartbeat, JoinGroup or SyncGroup) is still
// finding its new coordinator: its client moves its connections about
// (a commit that reached this node through the old coordinator's broker
// ID closes when Metadata moves that ID), and its takeover grace, not
// the connection-loss grace, bounds how long it may take.
func (g *Group) connLossApplies(memberID string) bool {
	switch g.typ {
	case Classic:
		m, ok := g.classic.members[memberID]
		return ok && m.instanceID == "" && !m.graced
	case Consumer:
		m, ok := g.consumer.members[memberID]
		return ok && m.instanceID == "" && !m.graced
	}
	return false
}

// SetMemberConn gives member id the tag conn, the caller's own (the TCP
// server's connection that carried the member's latest request, for its
// ConnectionClosed), and returns the tag it replaces; ok is false, and
// nothing is tagged, for an unknown member. The core never reads a tag:
// it keeps it with the member, so that it goes when the member does, and
// a shell that tags the member of each request right after stepping it
// finds the member the heartbeat just found (consumerState.heard) rather
// than looking it up again. Every member's first heartbeat at a new
// coordinator sets a tag, as many as the takeover's members within a
// heartbeat interval: a table of the shell's own, keyed by member, cost a
// cold lookup and an insert more each (10% of the winner's CPU in
// BenchmarkTakeover's profiles). A restored or reloaded group starts
// with no tags.
func (g *Group) SetMemberConn(id string, conn any) (prev any, ok bool) {
	p := g.memberConn(id)
	if p == nil {
		return nil, false
	}
	prev, *p = *p, conn
	return prev, true
}

// MemberConn returns member id's tag (SetMemberConn), nil if it has none
// or is not a member.
func (g *Group) MemberConn(id string) any {
	if p := g.memberConn(id); p != nil {
		return *p
	}
	return nil
}

// memberConn returns where member id's tag is kept, nil for an unknown
// member.
func (g *Group) memberConn(id string) *any {
	switch g.typ {
	case Consumer:
		c := &g.consumer
		if h := c.heard; h != nil && h.id == id {
			return &h.conn
		}
		if m := c.members[id]; m != nil {
			return &m.conn
		}
	case Classic:
		if m := g.classic.members[id]; m != nil {
			return &m.conn
		}
	}
	return nil
}

// connHeard clears the mark of the member a request names: it is alive and
// has a connection, whatever the group then answers it.
func (g *Group) connHeard(msg kmsg.Request) {
	if len(g.conn.due) == 0 {
		return
	}
	var id string
	switch m := msg.(type) {
	case *kmsg.ConsumerGroupHeartbeatRequest:
		id = m.MemberID
	case *kmsg.HeartbeatRequest:
		id = m.MemberID
	case *kmsg.JoinGroupRequest:
		id = m.MemberID
	case *kmsg.SyncGroupRequest:
		id = m.MemberID
	case *kmsg.OffsetCommitRequest:
		id = m.MemberID
	default:
		// LeaveGroup removes the member; OffsetDelete names none.
		return
	}
	delete(g.conn.due, id)
}

// connForget drops the mark of a member that left the group.
func (g *Group) connForget(id string) {
	if g.conn.due != nil {
		delete(g.conn.due, id)
	}
}

// connLossDue reports whether a mark may be due at now.
func (g *Group) connLossDue(now time.Time) bool {
	return !g.conn.next.IsZero() && !now.Before(g.conn.next)
}

// expireConnLost expels the marked members whose grace ended at or before
// now, in member ID order, recomputes next, and reports whether it expelled
// anyone. The caller moves the group on (an epoch bump, a rebalance) once
// for all of them.
func (g *Group) expireConnLost(now time.Time) bool {
	var gone []string
	var next time.Time
	for id, at := range g.conn.due {
		if !now.Before(at) {
			gone = append(gone, id)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	g.conn.next = next
	slices.SortFunc(gone, strings.Compare)
	expelled := false
	for _, id := range gone {
		delete(g.conn.due, id)
		switch g.typ {
		case Classic:
			// A member with a parked JoinGroup or SyncGroup is expelled
			// too: its answer has no connection to go to, and the
			// rebalance need not wait for its timeout.
			if m := g.classic.members[id]; m != nil {
				g.classicRemove(m, kerr.UnknownMemberID.Code, EventMemberExpired, connLossReason)
				expelled = true
			}
		case Consumer:
			if m := g.consumer.members[id]; m != nil {
				g.removeMember(m, EventMemberExpired, connLossReason)
				expelled = true
			}
		}
	}
	return expelled
}

// earliest returns the earlier of two instants, a zero one meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
