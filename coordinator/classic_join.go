package coordinator

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicJoin handles JoinGroup, following Kafka's GroupMetadataManager
// (classicGroupJoinToClassicGroup and the functions it calls).
func (g *Group) classicJoin(now time.Time, req Request, m *kmsg.JoinGroupRequest) {
	fail := func(code int16) {
		g.classicReplyJoinError(&classicParked{ref: req.Ref, resp: req.Resp, version: m.Version}, code, m.MemberID)
	}
	if g.deleted {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	session := time.Duration(m.SessionTimeoutMillis) * time.Millisecond
	if session < g.cfg.MinSessionTimeout || session > g.cfg.MaxSessionTimeout {
		fail(kerr.InvalidSessionTimeout.Code)
		return
	}
	// JoinGroup v0 has no rebalance timeout; Kafka uses the session
	// timeout. Kafka does not check the field; tenure refuses a timeout
	// that is not positive, which would end every join phase at once.
	rebalance := session
	if m.Version >= 1 {
		rebalance = time.Duration(m.RebalanceTimeoutMillis) * time.Millisecond
		if rebalance <= 0 {
			fail(kerr.InvalidRequest.Code)
			return
		}
	}
	if g.typ != Classic {
		// Kafka (GroupMetadataManager.classicGroupJoin) admits a classic
		// member into a non-empty consumer group only through KIP-848's
		// online migration, which tenure does not implement, and answers
		// INCONSISTENT_GROUP_PROTOCOL when the group cannot take it. An
		// empty consumer group becomes classic (classicAdopt) once a
		// member is added.
		if !g.Empty() {
			fail(kerr.InconsistentGroupProtocol.Code)
			return
		}
		g.classic.init()
	}
	c := &g.classic
	if !c.supportsProtocols(m.ProtocolType, m.Protocols) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	if m.MemberID == "" {
		g.classicJoinNew(now, req, m, session, rebalance)
	} else {
		g.classicJoinExisting(now, req, m, session, rebalance)
	}
}

// classicJoinNew handles a JoinGroup without a member ID.
func (g *Group) classicJoinNew(now time.Time, req Request, m *kmsg.JoinGroupRequest, session, rebalance time.Duration) {
	c := &g.classic
	if m.InstanceID != nil {
		if old, ok := c.static[*m.InstanceID]; ok {
			g.classicReplaceStatic(now, req, m, c.members[old], session, rebalance)
			return
		}
	}
	// Pending members count towards the limit so that a flood of first
	// joins cannot grow the group's memory without bound.
	if len(c.members)+len(c.pending) >= g.cfg.MaxGroupSize {
		g.classicReplyJoinError(&classicParked{ref: req.Ref, resp: req.Resp, version: m.Version}, kerr.GroupMaxSizeReached.Code, "")
		return
	}
	if m.InstanceID != nil {
		// Static members join at once (Kafka's requiresKnownMemberId
		// applies to dynamic members only); Kafka prefixes their member
		// IDs with the instance ID, which kgo relies on.
		g.classicAddMember(now, req, m, g.newMemberID(*m.InstanceID), session, rebalance)
		return
	}
	id := g.newMemberID(req.ClientID)
	if m.Version < 4 {
		g.classicAddMember(now, req, m, id, session, rebalance)
		return
	}
	// KIP-394: the member must rejoin with this ID; until then it is
	// pending, and it is forgotten after its session timeout.
	g.classicAdopt()
	p := &classicPending{deadline: now.Add(session)}
	c.pending[id] = p
	if c.pendingNext.IsZero() || p.deadline.Before(c.pendingNext) {
		c.pendingNext = p.deadline
	}
	resp := classicJoinResponse(req.Resp, m.Version)
	resp.ErrorCode = kerr.MemberIDRequired.Code
	resp.MemberID = id
	g.reply(req, resp)
}

// classicJoinExisting handles a JoinGroup with a member ID.
func (g *Group) classicJoinExisting(now time.Time, req Request, m *kmsg.JoinGroupRequest, session, rebalance time.Duration) {
	c := &g.classic
	if m.InstanceID == nil {
		if _, ok := c.pending[m.MemberID]; ok {
			c.dropPending(m.MemberID)
			g.classicAddMember(now, req, m, m.MemberID, session, rebalance)
			return
		}
	}
	mem, code := c.validateMember(m.MemberID, m.InstanceID)
	if code != 0 {
		g.classicReplyJoinError(&classicParked{ref: req.Ref, resp: req.Resp, version: m.Version}, code, m.MemberID)
		return
	}
	same := mem.sameProtocols(m.Protocols)
	switch c.phase {
	case classicPreparing:
		g.classicUpdateMember(mem, req, m, session, rebalance)
		g.classicParkJoin(mem, req, m.Version)
		g.classicMaybeCompleteJoin(now)
	case classicCompleting, classicStable:
		// A follower that rejoins with unchanged protocols is told the
		// current generation again. The leader rejoining in Stable asks
		// for a rebalance (kgo does so when topics change).
		if same && (c.phase == classicCompleting || c.leader != mem.id) {
			g.classicUpdateMember(mem, req, m, session, rebalance)
			var members []kmsg.JoinGroupResponseMember
			if c.leader == mem.id {
				members = g.classicLeaderMembers(c.sortedMembers())
			}
			g.classicJoinSuccess(&classicParked{ref: req.Ref, resp: req.Resp, version: m.Version}, mem, members)
			c.setDeadline(mem, now.Add(mem.session))
			return
		}
		reason := "metadata-changed"
		if same {
			reason = "leader-rejoined"
		}
		g.classicUpdateMember(mem, req, m, session, rebalance)
		g.classicParkJoin(mem, req, m.Version)
		g.classicPrepareRebalance(now, reason)
	default:
		// A group with members is never Empty.
		panic("coordinator: classic member " + mem.id + " in a group in state " + c.phase.String())
	}
}

// classicAddMember adds a member whose JoinGroup is parked until the join
// phase ends, and starts or continues a rebalance.
func (g *Group) classicAddMember(now time.Time, req Request, m *kmsg.JoinGroupRequest, id string, session, rebalance time.Duration) {
	g.classicAdopt()
	c := &g.classic
	c.seq++
	mem := &classicMember{
		id:         id,
		clientID:   req.ClientID,
		clientHost: req.ClientHost,
		seq:        c.seq,
		session:    session,
		rebalance:  rebalance,
		protocols:  copyProtocols(m.Protocols),
	}
	if m.InstanceID != nil {
		mem.static, mem.instanceID = true, *m.InstanceID
		c.static[mem.instanceID] = id
	}
	c.members[id] = mem
	c.countProtocols(mem, 1)
	if len(c.members) == 1 {
		c.protocolType = m.ProtocolType
	}
	g.classicParkJoin(mem, req, m.Version)
	g.persist(g.classicMemberRecord(mem))
	if c.leader == "" {
		c.leader = id
		if c.phase == classicPreparing {
			// Otherwise the rebalance below records the group.
			g.persistGroup()
		}
	}
	g.classicEvent(EventMemberJoined, id, "")
	if c.phase == classicPreparing && c.initial {
		c.newMemberAdded = true
	}
	g.classicMaybeRebalance(now, "member-joined")
}

// classicUpdateMember takes a rejoining member's protocols, timeouts and
// connection, and records them if they changed.
func (g *Group) classicUpdateMember(mem *classicMember, req Request, m *kmsg.JoinGroupRequest, session, rebalance time.Duration) {
	c := &g.classic
	changed := false
	if !mem.sameProtocols(m.Protocols) {
		c.countProtocols(mem, -1)
		mem.protocols = copyProtocols(m.Protocols)
		c.countProtocols(mem, 1)
		changed = true
	}
	if mem.session != session || mem.rebalance != rebalance || mem.clientID != req.ClientID || mem.clientHost != req.ClientHost {
		mem.session, mem.rebalance, mem.clientID, mem.clientHost = session, rebalance, req.ClientID, req.ClientHost
		changed = true
	}
	if changed {
		g.persist(g.classicMemberRecord(mem))
	}
}

// classicParkJoin parks mem's JoinGroup until the join phase ends. A
// JoinGroup it parked before (a client retrying on a new connection) is
// answered REBALANCE_IN_PROGRESS, so that it does not wait forever; Kafka
// drops it.
func (g *Group) classicParkJoin(mem *classicMember, req Request, version int16) {
	if mem.join != nil {
		g.classicReplyJoinError(mem.join, kerr.RebalanceInProgress.Code, mem.id)
	} else {
		g.classic.joined++
	}
	mem.join = &classicParked{ref: req.Ref, resp: req.Resp, version: version}
}

// classicReplaceStatic handles a JoinGroup without member ID from a static
// member whose instance ID is known (KIP-345): the new incarnation gets a
// new member ID and takes the old one's place and assignment, and the old
// member ID is fenced: what it parked is answered FENCED_INSTANCE_ID, and
// since the instance now maps to the new ID, so is whatever it sends next.
//
// Without a rebalance, the new member keeps its predecessor's partitions
// under their tokens: the classic generation cannot move without making
// every member rejoin. Commits checked by the coordinator are safe (the old
// member ID is fenced), but a resource fenced only by tokens cannot tell
// the two incarnations apart; a rebalance (any membership change) gives
// the partitions that move new tokens.
func (g *Group) classicReplaceStatic(now time.Time, req Request, m *kmsg.JoinGroupRequest, old *classicMember, session, rebalance time.Duration) {
	c := &g.classic
	id := g.newMemberID(old.instanceID)
	same := old.sameProtocols(m.Protocols)
	oldLeader := c.leader

	if old.join != nil {
		g.classicReplyJoinError(old.join, kerr.FencedInstanceID.Code, old.id)
		old.join = nil
		c.joined--
	}
	if old.sync != nil {
		g.classicReplySyncError(old.sync, kerr.FencedInstanceID.Code)
		old.sync = nil
	}
	mem := &classicMember{
		id:          id,
		instanceID:  old.instanceID,
		static:      true,
		clientID:    req.ClientID,
		clientHost:  req.ClientHost,
		seq:         old.seq,
		session:     session,
		rebalance:   rebalance,
		protocols:   copyProtocols(m.Protocols),
		assignment:  old.assignment,
		owned:       old.owned,
		pendingSync: old.pendingSync,
	}
	c.countProtocols(old, -1)
	delete(c.members, old.id)
	c.members[id] = mem
	c.countProtocols(mem, 1)
	c.static[mem.instanceID] = id
	for _, tp := range mem.owned {
		o, _ := g.owners.owner(tp)
		g.owners.release(tp, old.id)
		g.owners.assign(tp, id, o.token)
	}
	if c.leader == old.id {
		c.leader = id
	}
	c.setDeadline(mem, now.Add(session))

	g.persist(&MemberRecord{Group: g.name, MemberID: old.id, InstanceID: old.instanceID, Deleted: true})
	g.persist(g.classicMemberRecord(mem))
	if old.assignedAt != 0 {
		// The old member's record went with it.
		g.persistClassicAssignment(mem)
	}
	if c.leader != oldLeader {
		g.persistGroup()
	}
	g.classicEvent(EventMemberRemoved, old.id, "static-member-replaced")
	g.classicEvent(EventMemberJoined, id, "")

	switch {
	case c.phase == classicStable && same:
		p := &classicParked{ref: req.Ref, resp: req.Resp, version: m.Version}
		resp := classicJoinResponse(p.resp, p.version)
		resp.Generation = g.epoch
		resp.ProtocolType = kmsg.StringPtr(c.protocolType)
		resp.Protocol = kmsg.StringPtr(c.protocol)
		resp.MemberID = id
		if m.Version >= 9 {
			// KIP-814: a new leader is told it leads but must not
			// compute a plan (the Stable group would ignore it).
			resp.LeaderID = c.leader
			if c.leader == id {
				resp.SkipAssignment = true
				resp.Members = g.classicLeaderMembers(c.sortedMembers())
			}
		} else {
			// Before KIP-814, Kafka names the previous leader so that
			// a restarted leader does not believe it leads.
			resp.LeaderID = oldLeader
		}
		g.reply(req, resp)
	case c.phase == classicPreparing:
		g.classicParkJoin(mem, req, m.Version)
		g.classicMaybeCompleteJoin(now)
	default:
		// Changed protocols need a new plan; in CompletingRebalance the
		// leader may have planned for the old member ID, whose
		// assignment would go nowhere (Kafka rebalances too).
		reason := "static-member-replaced"
		if !same {
			reason = "metadata-changed"
		}
		g.classicParkJoin(mem, req, m.Version)
		g.classicPrepareRebalance(now, reason)
	}
}

// classicMaybeRebalance starts a rebalance, or, if one is preparing, checks
// whether its join phase is over.
func (g *Group) classicMaybeRebalance(now time.Time, reason string) {
	if g.classic.phase == classicPreparing {
		g.log.reasons = append(g.log.reasons, reason)
		g.classicMaybeCompleteJoin(now)
		return
	}
	g.classicPrepareRebalance(now, reason)
}

// classicPrepareRebalance enters PreparingRebalance (Kafka's
// prepareRebalance): parked SyncGroups are answered REBALANCE_IN_PROGRESS
// so their members rejoin, and the join phase gets its deadline: the
// initial delay for a group that was empty, else the largest rebalance
// timeout of the members.
func (g *Group) classicPrepareRebalance(now time.Time, reason string) {
	c := &g.classic
	if c.phase == classicCompleting || c.pendingSyncs > 0 {
		for _, mem := range c.sortedMembers() {
			if mem.sync != nil {
				g.classicReplySyncError(mem.sync, kerr.RebalanceInProgress.Code)
				mem.sync = nil
				c.setDeadline(mem, now.Add(mem.session))
			}
			c.clearPendingSync(mem)
		}
	}
	c.syncDeadline = time.Time{}
	g.log.reasons = append(g.log.reasons, reason)
	initial := c.phase == classicEmpty
	c.phase = classicPreparing
	// A restored group must know it was rebalancing: its members then
	// rejoin rather than carry on with a generation that was ending.
	g.persistGroup()
	g.classicEvent(EventRebalanceStarted, "", reason)
	r := c.maxRebalance()
	if initial && g.cfg.InitialRebalanceDelay > 0 {
		// Kafka waits the delay even if it is longer than the
		// rebalance timeout; extensions are capped by it.
		c.initial, c.newMemberAdded = true, false
		c.initDelay = g.cfg.InitialRebalanceDelay
		c.initRemaining = max(r-c.initDelay, 0)
		c.joinDeadline = now.Add(c.initDelay)
		return
	}
	c.initial = false
	c.joinDeadline = now.Add(r)
	g.classicMaybeCompleteJoin(now)
}

// classicMaybeCompleteJoin ends the join phase early when every member has
// joined and no pending member may still join (Kafka's
// hasAllMembersJoined), except during the initial delay, which always
// runs its course unless the group has emptied.
func (g *Group) classicMaybeCompleteJoin(now time.Time) {
	c := &g.classic
	if c.phase != classicPreparing {
		return
	}
	if len(c.members) == 0 || !c.initial && c.joined == len(c.members) && len(c.pending) == 0 {
		g.classicCompleteJoin(now)
	}
}

// classicJoinDeadline fires at the end of the join phase, or extends the
// initial delay if a member joined during it and the rebalance timeout
// allows (Kafka's tryCompleteInitialRebalanceElseSchedule).
func (g *Group) classicJoinDeadline(now time.Time) {
	c := &g.classic
	if c.initial && c.newMemberAdded && c.initRemaining > 0 {
		c.newMemberAdded = false
		d := min(c.initDelay, c.initRemaining)
		c.initRemaining = max(c.initRemaining-c.initDelay, 0)
		c.initDelay = d
		c.joinDeadline = now.Add(d)
		return
	}
	g.classicCompleteJoin(now)
}

// classicCompleteJoin ends the join phase (Kafka's completeClassicGroupJoin):
// dynamic members that did not rejoin are removed, the generation is
// bumped, a protocol and a leader are chosen and every parked JoinGroup is
// answered; the members then have the largest rebalance timeout to sync.
//
// Static members that did not rejoin stay, as in Kafka, so that a
// restarting static member keeps its place; their session or the sync
// deadline removes them if they do not come back.
func (g *Group) classicCompleteJoin(now time.Time) {
	c := &g.classic
	c.joinDeadline = time.Time{}
	c.initial, c.newMemberAdded = false, false

	var late []*classicMember
	for _, mem := range c.members {
		if mem.join == nil && !mem.static {
			late = append(late, mem)
		}
	}
	slices.SortFunc(late, func(a, b *classicMember) int { return strings.Compare(a.id, b.id) })
	for _, mem := range late {
		g.classicRemove(mem, kerr.UnknownMemberID.Code, EventMemberRemoved, "rebalance-timeout")
	}
	if len(c.members) > 0 && c.joined == 0 {
		// Only static members that have not rejoined are left: wait
		// for them (Kafka does the same).
		c.joinDeadline = now.Add(c.maxRebalance())
		return
	}

	g.epoch++
	if len(c.members) == 0 {
		c.phase = classicEmpty
		c.protocolType, c.protocol, c.leader = "", "", ""
		g.persistGroup()
		g.classicGeneration(now)
		g.classicEvent(EventRebalanceCompleted, "", "")
		return
	}
	c.phase = classicCompleting
	c.protocol = c.selectProtocol()
	if l, ok := c.members[c.leader]; !ok || l.join == nil {
		var best *classicMember
		for _, mem := range c.members {
			if mem.join != nil && (best == nil || mem.seq < best.seq) {
				best = mem
			}
		}
		c.leader = best.id
	}
	g.persistGroup()
	g.classicGeneration(now)

	ms := c.sortedMembers()
	for _, mem := range ms {
		mem.pendingSync = true
		if mem.join == nil {
			continue
		}
		var members []kmsg.JoinGroupResponseMember
		if mem.id == c.leader {
			members = g.classicLeaderMembers(ms)
		}
		p := mem.join
		mem.join = nil
		c.joined--
		g.classicJoinSuccess(p, mem, members)
		c.setDeadline(mem, now.Add(mem.session))
	}
	c.pendingSyncs = len(ms)
	c.syncDeadline = now.Add(c.maxRebalance())
}
