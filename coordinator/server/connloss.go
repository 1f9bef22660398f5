package server

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// Connection-aware expiry (coordinator.ConnectionClosed): the server
// remembers, per group, the connection that carried each member's latest
// request, and when a connection ends it tells the groups of the members
// for which it was that connection. A member's other connections say
// nothing: kgo sends JoinGroup and SyncGroup on one connection and its
// heartbeats and commits on another, and closes a connection idle for
// 20 s, so after a rebalance its join connection closes under a healthy
// member. A member whose ID a request does not carry yet (a first
// JoinGroup, a KIP-848 v0 join) is tracked from its next request.
//
// While the set's view settles (Config.ViewSettle) a close starts no
// grace: clients then close connections of their own accord, to dial a
// broker ID at the address Metadata moved it to. Seen with kgo classic
// consumers after their coordinator froze: two survivors briefly pointed
// the frozen node's ID at different addresses, each client's heartbeat
// connection to the new coordinator under that ID closed as its metadata
// flipped, and a member whose next heartbeat first met a node that was
// not the coordinator was expelled before it was heard again.

// trackMember notes that c carries the latest request of the member req
// names in group e, right after e's core stepped it. e.mu must be held.
// It runs on c's reader, or for a request that waited for its group's
// install (takeoverwait.go) on another goroutine: c.members is c.mu's,
// and once connMembersLost has told c's members, c carries none more.
//
// The connection of a member is kept with the member, in the core
// (coordinator.Group.SetMemberConn), so that it goes when the member does
// and costs no lookup of its own: the core finds the member its request
// named without one. A request naming no known member tags nothing.
//
// It runs for each member's first request on c, so a new term runs it for
// every member of every group it takes over within a heartbeat interval:
// with 4,000 members on one connection, a set keyed by (group, member)
// per connection cost a hash of the member ID and a growing table per
// member (9-22% of a new leader's CPU in BenchmarkTakeover's profiles).
// c keeps the IDs by group instead, appended; an ID whose member moved to
// another connection or left since stays until the list would grow, and
// is dropped then (trackedIDs.add), so that a list holds at most about
// twice the members c carries.
func (s *Server) trackMember(e *groupEntry, c *conn, req kmsg.Request) {
	if s.cfg.Core.ConnLossGrace <= 0 {
		return
	}
	id := memberOf(req)
	if id == "" {
		return
	}
	prev, ok := e.g.SetMemberConn(id, c)
	if !ok || prev == any(c) {
		return
	}
	if prev != nil {
		e.connsLeft++ // prev's list holds id still
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.membersLost {
		// c is closed and its members told: the tag must not outlive it.
		e.g.SetMemberConn(id, prev)
		return
	}
	if c.members == nil {
		c.members = make(map[*groupEntry]*trackedIDs)
	}
	ids := c.members[e]
	if ids == nil {
		ids = new(trackedIDs)
		c.members[e] = ids
	}
	*ids = ids.add(e, c, id)
}

// trackedIDs are the IDs of the members of one group whose latest request
// a connection carried, possibly with IDs of members that moved to
// another connection or left since, or twice (a member that came back).
type trackedIDs []string

// add appends id to ids, c's list for e (e.mu and c.mu held). A full list
// first drops the IDs of members c no longer carries and the repeats,
// and grows if that left it more than half full: the next drop is then at
// least half a list of appends away, so that a drop costs O(1) per append.
func (ids trackedIDs) add(e *groupEntry, c *conn, id string) trackedIDs {
	if ids == nil {
		ids = make(trackedIDs, 0, 4)
	}
	if len(ids) == cap(ids) && e.connsLeft > 0 {
		slices.Sort(ids)
		ids = slices.Compact(ids)
		ids = slices.DeleteFunc(ids, func(m string) bool { return e.g.MemberConn(m) != any(c) })
		clear(ids[len(ids):cap(ids)])
		if len(ids) > cap(ids)/2 {
			ids = slices.Grow(ids, cap(ids))
		}
	}
	return append(ids, id)
}

// memberGone notes that a member left e's group (e.mu held): its ID may
// stay in a connection's list.
func (e *groupEntry) memberGone() { e.connsLeft++ }

// connMembersLost tells the groups that c, which just ended for reason,
// carried the latest request of some of their members. It runs on c's
// reader after c closed. A server that shuts down tells nobody: its
// groups go with it.
func (s *Server) connMembersLost(c *conn, reason string) {
	c.mu.Lock()
	members := c.members
	c.members, c.membersLost = nil, true
	c.mu.Unlock()
	if len(members) == 0 || reason == closeShutdown {
		return
	}
	now := time.Now()
	for e, tracked := range members {
		ids := []string(*tracked)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		e.mu.Lock()
		if e.gone || e.offline || e.g == nil || !e.tm.valid(now) {
			e.mu.Unlock()
			continue
		}
		lost := ids[:0]
		for _, id := range ids {
			if e.g.MemberConn(id) == any(c) {
				e.g.SetMemberConn(id, nil)
				lost = append(lost, id)
			}
		}
		if len(lost) > 0 && s.view != nil && s.view.settling(now, s.cfg.ViewSettle) {
			s.log.Debug("connection of members closed while the set's view settles: no connection-loss grace",
				zap.String("group", e.name), zap.Strings("members", lost), zap.String("remote", c.addr), zap.String("reason", reason))
			s.m.connLossSettling.Add(float64(len(lost)))
			lost = lost[:0]
		}
		if len(lost) > 0 {
			s.log.Debug("connection of members closed", zap.String("group", e.name),
				zap.Strings("members", lost), zap.String("remote", c.addr), zap.String("reason", reason))
			if s.useCore(e, func(g *coordinator.Group) {
				for _, id := range lost {
					g.Step(now, coordinator.ConnectionClosed{MemberID: id})
				}
			}) {
				s.performReady(e, nil)
			}
		}
		e.mu.Unlock()
	}
}
