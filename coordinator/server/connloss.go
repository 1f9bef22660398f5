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

// memberConn names a member of a group, as a connection remembers it.
type memberConn struct {
	e  *groupEntry
	id string
}

// trackMember notes that c carries the latest request of the member req
// names in group e. e.mu must be held. It runs on c's reader, or for a
// request that waited for its group's install (takeoverwait.go) on
// another goroutine: c.members is c.mu's, and once connMembersLost has
// told c's members, c carries none more.
func (s *Server) trackMember(e *groupEntry, c *conn, req kmsg.Request) {
	if s.cfg.Core.ConnLossGrace <= 0 {
		return
	}
	id := memberOf(req)
	if id == "" || e.conns[id] == c {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.membersLost {
		return
	}
	if e.conns == nil {
		e.conns = make(map[string]*conn)
	}
	e.conns[id] = c
	if c.members == nil {
		c.members = make(map[memberConn]struct{})
	}
	c.members[memberConn{e, id}] = struct{}{}
}

// forgetMember drops a member that left its group; e.mu must be held.
func (e *groupEntry) forgetMember(id string) {
	if e.conns != nil {
		delete(e.conns, id)
	}
}

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
	byGroup := make(map[*groupEntry][]string)
	for ref := range members {
		byGroup[ref.e] = append(byGroup[ref.e], ref.id)
	}
	now := time.Now()
	for e, ids := range byGroup {
		slices.Sort(ids)
		e.mu.Lock()
		if e.gone || e.offline || !e.tm.valid(now) {
			e.mu.Unlock()
			continue
		}
		lost := ids[:0]
		for _, id := range ids {
			if e.conns[id] == c {
				delete(e.conns, id)
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
