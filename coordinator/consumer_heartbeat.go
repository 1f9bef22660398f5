package coordinator

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerHeartbeat answers a ConsumerGroupHeartbeat: a join (epoch 0), a
// leave (-1, or -2 for a static member that will come back), or a regular
// heartbeat. A request that is refused changes nothing.
func (g *Group) consumerHeartbeat(now time.Time, req Request, m *kmsg.ConsumerGroupHeartbeatRequest) {
	resp := response[kmsg.ConsumerGroupHeartbeatResponse](req.Resp, m.Version)
	resp.HeartbeatIntervalMillis = int32(g.cfg.ConsumerHeartbeatInterval / time.Millisecond)
	switch {
	case !g.validHeartbeat(m, resp):
	case g.deleted:
		failHeartbeat(resp, kerr.GroupIDNotFound.Code, "The group was deleted.")
	case g.typ == Classic && !g.classic.empty():
		// Kafka (GroupMetadataManager.getOrMaybeCreateConsumerGroup, and
		// kfake) answers GROUP_ID_NOT_FOUND: "Group %s is not a consumer
		// group". Online migration of a classic group with members is
		// not supported.
		failHeartbeat(resp, kerr.GroupIDNotFound.Code, "The group is a classic group with members.")
	case g.typ == Classic && m.MemberEpoch != 0:
		failHeartbeat(resp, kerr.GroupIDNotFound.Code, "The group is not a consumer group.")
	case m.MemberEpoch == 0:
		g.consumerJoin(now, req, m, resp)
	case m.MemberEpoch < 0:
		g.consumerLeave(now, m, resp)
	default:
		if mem := g.consumerBeat(now, req, m, resp); mem != nil {
			g.removeIfDrained(mem)
		}
	}
	g.consumerCheckStable()
	gr := g.consumer.replyGrants
	g.consumer.replyGrants = nil
	g.replyGranting(req, resp, gr)
}

func failHeartbeat(resp *kmsg.ConsumerGroupHeartbeatResponse, code int16, msg string) {
	resp.ErrorCode = code
	resp.ErrorMessage = kmsg.StringPtr(msg)
	resp.MemberID = nil
	resp.MemberEpoch = 0
	resp.Assignment = nil
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// validHeartbeat applies Kafka's request checks
// (GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid),
// with its messages, plus tenure's own on the rebalance timeout.
func (g *Group) validHeartbeat(m *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) bool {
	invalid := func(msg string) bool {
		failHeartbeat(resp, kerr.InvalidRequest.Code, msg)
		return false
	}
	// v0 lets the coordinator name a joining member; v1 (KIP-1082)
	// requires the client to, in every request.
	if (m.Version >= 1 || m.MemberEpoch > 0 || m.MemberEpoch == -1) && blank(m.MemberID) {
		return invalid("MemberId can't be empty.")
	}
	if m.InstanceID != nil && blank(*m.InstanceID) {
		return invalid("InstanceId can't be empty.")
	}
	if m.RackID != nil && blank(*m.RackID) {
		return invalid("RackId can't be empty.")
	}
	switch {
	case m.MemberEpoch == 0:
		if m.RebalanceTimeoutMillis == -1 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if m.Topics == nil || len(m.Topics) > 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		if m.SubscribedTopicNames == nil && m.SubscribedTopicRegex == nil {
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case m.MemberEpoch == staticLeftEpoch:
		if m.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	case m.MemberEpoch < staticLeftEpoch:
		return invalid("MemberEpoch is invalid.")
	}
	if m.RebalanceTimeoutMillis < -1 {
		return invalid("RebalanceTimeoutMs must not be negative.")
	}
	if m.ServerAssignor != nil {
		if _, ok := g.cfg.assignor(*m.ServerAssignor); !ok || *m.ServerAssignor == "" {
			names := make([]string, len(g.cfg.Assignors))
			for i, a := range g.cfg.Assignors {
				names[i] = a.Name()
			}
			failHeartbeat(resp, kerr.UnsupportedAssignor.Code, "ServerAssignor "+*m.ServerAssignor+
				" is not supported. Supported assignors: "+strings.Join(names, ", ")+".")
			return false
		}
	}
	return true
}

// subscriptionUpdate is what a heartbeat changes in a member's
// subscription; nil fields are unchanged.
type subscriptionUpdate struct {
	topics []string
	regex  *string
	re     *regexp.Regexp
}

// parseSubscription validates the subscription fields of m against the
// member's current ones (mem may be nil for a new member).
func (g *Group) parseSubscription(mem *consumerMember, m *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) (subscriptionUpdate, bool) {
	var u subscriptionUpdate
	if m.SubscribedTopicNames != nil {
		u.topics = normalizeNames(m.SubscribedTopicNames)
		if u.topics == nil {
			u.topics = []string{}
		}
	}
	if m.SubscribedTopicRegex != nil && (mem == nil || mem.regex != *m.SubscribedTopicRegex) {
		u.regex = m.SubscribedTopicRegex
		if *u.regex != "" {
			if _, ok := g.cfg.Topics.(TopicLister); !ok {
				failHeartbeat(resp, kerr.InvalidRequest.Code, "SubscribedTopicRegex is not supported: the coordinator's topic resolver cannot list topics.")
				return u, false
			}
			re, err := CompileTopicRegex(*u.regex)
			if err != nil {
				failHeartbeat(resp, kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex "+*u.regex+" is invalid: "+err.Error())
				return u, false
			}
			u.re = re
		}
	}
	return u, true
}

// applySubscription applies u to mem and reports whether the subscription
// changed.
func applySubscription(mem *consumerMember, u subscriptionUpdate) bool {
	changed := false
	if u.topics != nil && !slices.Equal(u.topics, mem.topics) {
		mem.topics = slices.Clone(u.topics)
		changed = true
	}
	if u.regex != nil {
		mem.regex, mem.re = *u.regex, u.re
		changed = true
	}
	if changed {
		mem.resolved = mem.topics
	}
	return changed
}

// consumerJoin handles epoch 0: a new member, a static member replacing its
// previous incarnation, or a known member rejoining in place (KAFKA-19233:
// a fenced member rejoins with its member ID at epoch 0 and gets its
// current assignment back).
func (g *Group) consumerJoin(now time.Time, req Request, m *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	c := &g.consumer
	id := m.MemberID
	if id == "" {
		// v0: the coordinator names the member.
		id = g.newMemberID(req.ClientID)
	}
	existing := c.members[id]
	var replaced *consumerMember
	if existing != nil && existing.epoch == staticLeftEpoch {
		replaced = existing
	}
	if m.InstanceID != nil {
		inst := *m.InstanceID
		sid, held := c.static[inst]
		switch {
		case existing != nil && existing.instanceID != inst:
			// A member cannot change its instance ID (Kafka
			// PR #23542): otherwise a known member ID naming another
			// member's instance would replace that member.
			failHeartbeat(resp, kerr.InvalidRequest.Code, "Member "+id+" cannot change its instance id to "+inst+".")
			return
		case held && sid != id:
			prev := c.members[sid]
			if prev.epoch != staticLeftEpoch {
				failHeartbeat(resp, kerr.UnreleasedInstanceID.Code, "Static member "+id+" with instance id "+inst+
					" cannot join the group because the instance id is owned by "+sid+" member.")
				return
			}
			replaced = prev
		}
	}
	base := existing
	if replaced != nil {
		base = replaced
	}
	sub, ok := g.parseSubscription(base, m, resp)
	if !ok {
		return
	}
	if existing == nil && replaced == nil && len(c.members) >= g.cfg.MaxGroupSize {
		failHeartbeat(resp, kerr.GroupMaxSizeReached.Code, "The consumer group has reached its maximum capacity of "+
			itoa(g.cfg.MaxGroupSize)+" members.")
		return
	}
	if g.typ == Classic {
		// An empty classic group becomes a consumer group; its epoch,
		// offsets and partition history carry over.
		g.typ = Consumer
		g.consumer = consumerState{}
		g.consumer.init()
	}
	var mem *consumerMember
	retokened := false
	switch {
	case replaced != nil:
		mem = g.replaceStatic(now, req, m, replaced, id, sub)
	case existing != nil:
		mem = existing
		g.updateMember(now, req, m, mem, sub)
		// It abandoned everything it held: what it gets back is
		// provisional, and takes the epoch of the answer as token.
		forgot := mem.forgetReports()
		retokened = g.followEpoch(mem) || forgot
	default:
		mem = g.addConsumerMember(now, req, m, id, sub)
	}
	g.reconcile(now, mem, c.reported[:0], true, false, retokened)
	g.answerMember(resp, mem, true)
	c.heard = mem
}

// newConsumerMember returns a member built from a join request.
func (g *Group) newConsumerMember(now time.Time, req Request, m *kmsg.ConsumerGroupHeartbeatRequest, id string) *consumerMember {
	mem := &consumerMember{
		id:               id,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		rebalanceTimeout: time.Duration(m.RebalanceTimeoutMillis) * time.Millisecond,
		state:            memberStable,
		topics:           []string{},
		deadline:         now.Add(g.cfg.ConsumerSessionTimeout),
	}
	if m.InstanceID != nil {
		mem.instanceID = *m.InstanceID
	}
	if m.RackID != nil {
		mem.rack = *m.RackID
	}
	if m.ServerAssignor != nil {
		mem.serverAssignor = *m.ServerAssignor
	}
	mem.resolved = mem.topics
	return mem
}

// addConsumerMember adds a new member and bumps the group epoch (or has it
// wait for a coalesced bump: consumer_coalesce.go).
func (g *Group) addConsumerMember(now time.Time, req Request, m *kmsg.ConsumerGroupHeartbeatRequest, id string, sub subscriptionUpdate) *consumerMember {
	mem := g.newConsumerMember(now, req, m, id)
	applySubscription(mem, sub)
	g.insertMember(mem)
	g.persistMember(mem)
	g.event(Event{Kind: EventMemberJoined, MemberID: id, Members: len(g.consumer.members)})
	g.bumpForJoin(now)
	return mem
}

// insertMember adds mem to the group's indexes.
func (g *Group) insertMember(mem *consumerMember) {
	c := &g.consumer
	c.members[mem.id] = mem
	if mem.instanceID != "" {
		c.static[mem.instanceID] = mem.id
	}
	if mem.serverAssignor != "" {
		c.assignorVotes[mem.serverAssignor]++
	}
	c.subscribe(mem)
	c.index.add(mem)
	c.lowerDeadline(mem.deadline)
	c.countTarget(len(mem.target), 1)
	if mem.drained {
		c.drained++
	}
}

// replaceStatic lets a new incarnation of a static member, which left with
// epoch -2, take over its predecessor's assignment without a rebalance.
//
// Unlike Kafka, the successor receives the partitions under fresh tokens:
// its predecessor may still be running (a process that sent its leave and
// then stalled), and a fence must be able to tell the two apart. When every
// inherited token is below the group epoch the new tokens are the group
// epoch and nothing else changes; otherwise the epoch is bumped first, with
// an unchanged target (no partition moves).
func (g *Group) replaceStatic(now time.Time, req Request, m *kmsg.ConsumerGroupHeartbeatRequest, old *consumerMember, id string, sub subscriptionUpdate) *consumerMember {
	c := &g.consumer
	mem := g.newConsumerMember(now, req, m, id)
	mem.instanceID = old.instanceID
	if m.RackID == nil {
		mem.rack = old.rack
	}
	if m.ServerAssignor == nil {
		mem.serverAssignor = old.serverAssignor
	}
	mem.topics, mem.regex, mem.re, mem.resolved = old.topics, old.regex, old.re, old.resolved
	subChanged := applySubscription(mem, sub)
	g.setTarget(mem, old.target)
	mem.assigned = slices.Clone(old.assigned)

	needBump := subChanged || mem.serverAssignor != old.serverAssignor
	for _, p := range old.assigned {
		if p.Token >= tokenOf(g.epoch) {
			needBump = true
		}
	}
	for _, p := range old.assigned {
		g.owners.release(TopicPartition{p.Topic, p.Partition}, old.id)
	}
	g.dropMember(old)
	if old.id != id {
		g.persist(&MemberRecord{Group: g.name, MemberID: old.id, Deleted: true})
		g.event(Event{Kind: EventMemberRemoved, MemberID: old.id, Reason: "static-member-replaced", Members: len(c.members)})
	}
	g.insertMember(mem)
	g.persistMember(mem)
	g.event(Event{Kind: EventMemberJoined, MemberID: id, Reason: "static-member-rejoined", Members: len(c.members)})
	if needBump {
		g.bumpEpoch("static-member-rejoined", subChanged || mem.serverAssignor != old.serverAssignor)
	}
	// The successor takes over what is still in its target (a changed
	// subscription may have taken some away: those stay released, so that
	// it never holds, even for an instant, a token it will not use).
	token := tokenOf(g.epoch)
	kept := mem.assigned[:0]
	for _, p := range mem.assigned {
		tp := TopicPartition{p.Topic, p.Partition}
		if containsTP(mem.target, tp) {
			g.owners.assign(tp, id, token)
			kept = append(kept, OwnedPartition{p.Topic, p.Partition, token})
		}
	}
	mem.assigned = kept
	mem.addProvisional(withoutTokens(kept), token)
	// The successor starts at epoch 0, like Kafka's, and reconciles to
	// the target epoch in this request; its assignment changed hands.
	mem.assignmentChanged = true
	return mem
}

// updateMember applies a join or heartbeat's changes to a known member and
// bumps the epoch if its subscription or the group's assignor changed.
func (g *Group) updateMember(now time.Time, req Request, m *kmsg.ConsumerGroupHeartbeatRequest, mem *consumerMember, sub subscriptionUpdate) (subChanged bool) {
	c := &g.consumer
	mem.deadline = now.Add(g.cfg.ConsumerSessionTimeout)
	c.lowerDeadline(mem.deadline) // a restored member's grace ends (restore_grace.go)
	mem.graced = false
	changed := false
	if req.ClientID != mem.clientID || req.ClientHost != mem.clientHost {
		mem.clientID, mem.clientHost = req.ClientID, req.ClientHost
		changed = true
	}
	if m.RackID != nil && *m.RackID != mem.rack {
		mem.rack = *m.RackID
		changed = true
	}
	if m.RebalanceTimeoutMillis >= 0 {
		if d := time.Duration(m.RebalanceTimeoutMillis) * time.Millisecond; d != mem.rebalanceTimeout {
			mem.rebalanceTimeout = d
			changed = true
		}
	}
	assignorChanged := false
	if m.ServerAssignor != nil && *m.ServerAssignor != mem.serverAssignor {
		before := c.preferredAssignor(g.cfg)
		if mem.serverAssignor != "" {
			c.assignorVotes[mem.serverAssignor]--
		}
		mem.serverAssignor = *m.ServerAssignor
		c.assignorVotes[mem.serverAssignor]++
		assignorChanged = c.preferredAssignor(g.cfg) != before
		changed = true
	}
	if sub.topics != nil && sub.regex == nil && slices.Equal(sub.topics, mem.topics) {
		// A full heartbeat repeats the subscription: every member's
		// first one at a new coordinator does.
		sub.topics = nil
	}
	if sub.topics != nil || sub.regex != nil {
		c.unsubscribe(mem)
		subChanged = applySubscription(mem, sub)
		c.subscribe(mem)
	}
	if changed || subChanged {
		g.persistMember(mem)
	}
	switch {
	case subChanged:
		g.bumpEpoch("subscription-changed", true)
	case assignorChanged:
		g.bumpEpoch("assignor-changed", true)
	}
	return subChanged
}

// consumerBeat handles a regular heartbeat (epoch > 0) and returns the
// member if it was answered without an error.
func (g *Group) consumerBeat(now time.Time, req Request, m *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *consumerMember {
	mem, ok := g.lookupMember(m, resp)
	if !ok {
		return nil
	}
	reported, known, unresolved := g.parseReported(m.Topics)
	if m.MemberEpoch != mem.epoch {
		// Kafka accepts the previous epoch with a subset of the current
		// assignment: the response that carried the new epoch may have
		// been lost. Anything else is fenced.
		if m.MemberEpoch > mem.epoch || m.MemberEpoch != mem.prevEpoch || !known || unresolved ||
			!subsetOfOwned(reported, mem.assigned) {
			failHeartbeat(resp, kerr.FencedMemberEpoch.Code, fencedMessage(m.MemberEpoch, mem.epoch))
			return nil
		}
	}
	sub, ok := g.parseSubscription(mem, m, resp)
	if !ok {
		return nil
	}
	retokened := known && g.acknowledge(mem, reported, m.MemberEpoch)
	subChanged := g.updateMember(now, req, m, mem, sub)
	g.reconcile(now, mem, reported, known, subChanged, retokened)
	full := m.RebalanceTimeoutMillis != -1 && (m.SubscribedTopicNames != nil || m.SubscribedTopicRegex != nil) && m.Topics != nil
	g.answerMember(resp, mem, full || m.MemberEpoch != mem.epoch)
	return mem
}

func fencedMessage(got, want int32) string {
	if got > want {
		return "The consumer group member has a greater member epoch (" + itoa(int(got)) +
			") than the one known by the group coordinator (" + itoa(int(want)) +
			"). The member must abandon all its partitions and rejoin."
	}
	return "The consumer group member has a smaller member epoch (" + itoa(int(got)) +
		") than the one known by the group coordinator (" + itoa(int(want)) +
		"). The member must abandon all its partitions and rejoin."
}

// lookupMember finds the member a heartbeat or leave names: by instance ID
// for a static member that sends it, else by member ID.
func (g *Group) lookupMember(m *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) (*consumerMember, bool) {
	c := &g.consumer
	if m.InstanceID != nil {
		sid, ok := c.static[*m.InstanceID]
		if !ok {
			failHeartbeat(resp, kerr.UnknownMemberID.Code, "Instance id "+*m.InstanceID+" is unknown.")
			return nil, false
		}
		if sid != m.MemberID {
			failHeartbeat(resp, kerr.FencedInstanceID.Code, "Static member "+m.MemberID+" with instance id "+
				*m.InstanceID+" was fenced by member "+sid+".")
			return nil, false
		}
		mem := c.members[sid]
		c.heard = mem
		return mem, true
	}
	mem, ok := c.members[m.MemberID]
	if !ok {
		failHeartbeat(resp, kerr.UnknownMemberID.Code, "Member "+m.MemberID+" is not a member of group "+g.name+".")
		return nil, false
	}
	c.heard = mem
	return mem, true
}

// parseReported resolves the partitions a heartbeat says the member owns
// into the group's scratch buffer, sorted. known is false when the request
// did not say (nil Topics: unchanged); unresolved is set when a topic ID is
// unknown.
func (g *Group) parseReported(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) (reported []TopicPartition, known, unresolved bool) {
	if topics == nil {
		return nil, false, false
	}
	c := &g.consumer
	buf := c.reported[:0]
	for _, t := range topics {
		name, ok := c.topicIDs[t.TopicID]
		if !ok {
			name, ok = g.cfg.Topics.Name(t.TopicID)
		}
		if !ok {
			unresolved = true
			continue
		}
		for _, p := range t.Partitions {
			buf = append(buf, TopicPartition{name, p})
		}
	}
	buf = sortTPs(buf)
	c.reported = buf
	return buf, true, unresolved
}

// consumerLeave handles epoch -1 (leave) and -2 (static leave: the member
// keeps its assignment for a session timeout, so that its next incarnation
// takes it over without a rebalance).
func (g *Group) consumerLeave(now time.Time, m *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	mem, ok := g.lookupMember(m, resp)
	if !ok {
		return
	}
	resp.HeartbeatIntervalMillis = 0
	resp.MemberID = &mem.id
	resp.MemberEpoch = m.MemberEpoch
	if m.MemberEpoch == staticLeftEpoch && mem.instanceID != "" {
		g.staticLeave(now, mem)
		return
	}
	g.removeMember(mem, EventMemberLeft, "")
	g.bumpEpoch("member-left", true)
}

// staticLeave parks a static member: it keeps its assigned partitions (and
// so nobody else gets them) until its instance rejoins or its session
// expires; the partitions it was revoking are released, as it has stopped.
func (g *Group) staticLeave(now time.Time, mem *consumerMember) {
	if mem.epoch == staticLeftEpoch {
		return // a retried leave
	}
	c := &g.consumer
	for _, p := range mem.revoking {
		g.owners.release(TopicPartition{p.Topic, p.Partition}, mem.id)
	}
	mem.revoking = nil
	mem.revokeDeadline = time.Time{}
	mem.pending = nil
	mem.prevEpoch, mem.epoch = mem.epoch, staticLeftEpoch
	mem.state = memberStable
	mem.deadline = now.Add(g.cfg.ConsumerSessionTimeout)
	c.lowerDeadline(mem.deadline)
	c.recount(mem)
	g.persistAssignment(mem)
	g.event(Event{Kind: EventMemberLeft, MemberID: mem.id, Reason: "static-leave", Members: len(c.members)})
}

// removeMember ends every ownership of mem and drops it from the group,
// without bumping the epoch (the caller does, once for all removals).
func (g *Group) removeMember(mem *consumerMember, kind EventKind, reason string) {
	for _, p := range mem.assigned {
		g.owners.release(TopicPartition{p.Topic, p.Partition}, mem.id)
	}
	for _, p := range mem.revoking {
		g.owners.release(TopicPartition{p.Topic, p.Partition}, mem.id)
	}
	g.dropMember(mem)
	g.persist(&MemberRecord{Group: g.name, MemberID: mem.id, Deleted: true})
	g.event(Event{Kind: kind, MemberID: mem.id, Reason: reason, Members: len(g.consumer.members)})
}

// dropMember removes mem from the group's indexes.
func (g *Group) dropMember(mem *consumerMember) {
	c := &g.consumer
	delete(c.members, mem.id)
	if c.heard == mem {
		c.heard = nil
	}
	c.unsubscribe(mem)
	c.index.remove(mem)
	c.countTarget(len(mem.target), -1)
	if mem.drained {
		c.drained--
	}
	if mem.instanceID != "" && c.static[mem.instanceID] == mem.id {
		delete(c.static, mem.instanceID)
	}
	if mem.serverAssignor != "" {
		if c.assignorVotes[mem.serverAssignor]--; c.assignorVotes[mem.serverAssignor] <= 0 {
			delete(c.assignorVotes, mem.serverAssignor)
		}
	}
	if mem.countedAt != 0 && mem.countedAt == c.targetEpoch {
		c.reconciled--
	}
	mem.countedAt = 0
	if len(c.members) == 0 {
		c.nextDeadline = time.Time{}
	}
}

// answerMember fills a successful response; the assignment goes along when
// asked for (join, full request, unacknowledged epoch) or when it changed
// since it was last sent.
func (g *Group) answerMember(resp *kmsg.ConsumerGroupHeartbeatResponse, mem *consumerMember, withAssignment bool) {
	resp.MemberID = &mem.id
	resp.MemberEpoch = mem.epoch
	g.consumer.replyGrants = g.consumerGrants(mem, withAssignment)
	if !withAssignment && !mem.assignmentChanged {
		return
	}
	mem.assignmentChanged = false
	resp.Assignment = g.assignment(mem.assigned)
}

// assignment is the Assignment of a response that gives assigned, which
// is sorted. Every member's first heartbeat at a new coordinator gets
// one, so it takes few allocations: the assignment with room for one
// topic (the common case), and one array for all the partitions.
func (g *Group) assignment(assigned []OwnedPartition) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	topics := 0
	for i := range assigned {
		if i == 0 || assigned[i].Topic != assigned[i-1].Topic {
			topics++
		}
	}
	var a *kmsg.ConsumerGroupHeartbeatResponseAssignment
	if topics <= 1 {
		one := new(struct {
			a kmsg.ConsumerGroupHeartbeatResponseAssignment
			t [1]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic
		})
		a = &one.a
		a.Topics = one.t[:0]
	} else {
		a = &kmsg.ConsumerGroupHeartbeatResponseAssignment{
			Topics: make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, topics),
		}
	}
	parts := make([]int32, len(assigned))
	for i := 0; i < len(assigned); {
		j := i
		for j < len(assigned) && assigned[j].Topic == assigned[i].Topic {
			parts[j] = assigned[j].Partition
			j++
		}
		if id, ok := g.topicID(assigned[i].Topic); ok {
			a.Topics = append(a.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: id, Partitions: parts[i:j:j]})
		}
		i = j
	}
	return a
}

// topicID returns the ID of a topic the group assigns.
func (g *Group) topicID(name string) (TopicID, bool) {
	c := &g.consumer
	if c.sole != "" && name == c.sole {
		return c.soleTopic.id, true
	}
	if t, ok := c.topics[name]; ok {
		return t.id, true
	}
	id, _, ok := g.cfg.Topics.Lookup(name)
	return id, ok
}

// persistMember writes mem's MemberRecord.
func (g *Group) persistMember(mem *consumerMember) {
	g.persist(&MemberRecord{
		Group:             g.name,
		MemberID:          mem.id,
		InstanceID:        mem.instanceID,
		ClientID:          mem.clientID,
		ClientHost:        mem.clientHost,
		RackID:            mem.rack,
		SessionTimeout:    g.cfg.ConsumerSessionTimeout,
		RebalanceTimeout:  mem.rebalanceTimeout,
		Topics:            slices.Clone(mem.topics),
		TopicRegex:        mem.regex,
		ServerAssignor:    mem.serverAssignor,
		Drained:           mem.drained,
		RemoveWhenDrained: mem.removeWhenDrained,
	})
}

// persistAssignment writes mem's AssignmentRecord: its epochs, what it
// holds with the tokens (and which of them are provisional), and its
// target. The record shares mem's target and pending partitions, which
// are replaced, never changed in place.
func (g *Group) persistAssignment(mem *consumerMember) {
	mem.targetDirty = false
	g.persist(&AssignmentRecord{
		Group:       g.name,
		MemberID:    mem.id,
		MemberEpoch: mem.epoch,
		PrevEpoch:   mem.prevEpoch,
		Owned:       mergeOwned(mem.assigned, mem.revoking),
		Provisional: mem.provisionalRecord(),
		Pending:     mem.pending,
		Revoking:    withoutTokens(mem.revoking),
		Target:      mem.target,
	})
}

// persistTargets ends a step: if a target changed after the step's last
// GroupRecord and its member has not written it since, it writes the
// GroupRecord again, so that the store holds every member's target once
// the step's records are written. An epoch bump writes the GroupRecord
// after computing the targets, so this is for the rare change outside a
// bump (a static member's successor taking over its target). The targets
// a GroupRecord could not carry (takeTargets) go out here too, each in
// its member's AssignmentRecord.
func (g *Group) persistTargets() {
	c := &g.consumer
	if !c.targetsOwed && !c.flushOwed {
		return
	}
	flush := c.flushOwed || g.noGroupTargets
	c.targetsOwed, c.flushOwed = false, false
	if g.typ != Consumer || g.deleted {
		return
	}
	if !flush {
		for _, m := range c.targetDirty {
			if m.targetDirty && c.members[m.id] == m {
				g.persistGroup()
				break
			}
		}
		if !c.flushOwed {
			return
		}
		c.flushOwed = false
	}
	g.flushTargets()
}

// flushTargets writes the AssignmentRecord of every member whose target
// changed since its last one, sorted by member ID: one record per member
// however many times its target moved in the step. It runs at the end of
// a step, as every AssignmentRecord of a target did before GroupRecords
// carried them: earlier, a member may be half-way through a change (a
// static member's successor holds its predecessor's partitions under
// the old tokens until it is given fresh ones), which its record must
// never show.
func (g *Group) flushTargets() {
	c := &g.consumer
	slices.SortFunc(c.targetDirty, func(a, b *consumerMember) int { return strings.Compare(a.id, b.id) })
	for i, m := range c.targetDirty {
		// A member written and moved again since is listed twice.
		if m.targetDirty && c.members[m.id] == m && (i == 0 || c.targetDirty[i-1] != m) {
			g.persistAssignment(m)
		}
		m.targetDirty = false
	}
	clear(c.targetDirty)
	c.targetDirty = c.targetDirty[:0]
}

// maxGroupTargets bounds a GroupRecord's Targets. A bump in a large group
// moves the targets of few members, which then write their own records
// within a heartbeat interval; but the joins of a large group starting
// from cold move most targets again before their members write them, and
// carrying them all in every GroupRecord would cost each bump the whole
// group. Past the bound the members' targets go out in their
// AssignmentRecords instead, each member's once per change, as before.
const maxGroupTargets = 32

// takeTargets returns, for a GroupRecord, the targets of the members that
// have not written their current one, sorted by member ID; or, when they
// are more than maxGroupTargets or the GroupRecord may carry none
// (allowed false: Group.SetGroupTargets), no targets, and the step owes
// those members' AssignmentRecords (flushOwed; persistTargets writes
// them at its end). It drops the stale entries of targetDirty.
func (c *consumerState) takeTargets(allowed bool) []MemberTarget {
	c.targetsOwed = false
	live := c.targetDirty[:0]
	for _, m := range c.targetDirty {
		if m.targetDirty && c.members[m.id] == m {
			live = append(live, m)
		}
	}
	clear(c.targetDirty[len(live):])
	// A member written and moved again since is listed twice.
	slices.SortFunc(live, func(a, b *consumerMember) int { return strings.Compare(a.id, b.id) })
	live = slices.Compact(live)
	c.targetDirty = live
	switch {
	case len(live) == 0:
		return nil
	case len(live) > maxGroupTargets || !allowed:
		c.flushOwed = true
		return nil
	}
	out := make([]MemberTarget, len(live))
	for i, m := range live {
		// Shared: a member's target is replaced, never changed in place.
		out[i] = MemberTarget{MemberID: m.id, Target: m.target}
	}
	return out
}

// consumerCheckStable emits EventRebalanceCompleted when the group becomes
// Stable: every member reconciled to the target epoch.
func (g *Group) consumerCheckStable() {
	c := &g.consumer
	s := len(c.members) > 0 && c.reconciled == len(c.members) && !c.joinsWaiting()
	if s && !c.stable {
		g.event(Event{Kind: EventRebalanceCompleted, Members: len(c.members), Moves: c.moves})
		c.moves = 0
	}
	c.stable = s
}
