package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// restoreConsumer rebuilds the KIP-848 half of a group from its records
// (Restore). The target assignment comes back as persisted, not
// recomputed: members keep reconciling towards the target of the epoch
// they know. A member's target is the one the GroupRecord's Targets give
// it, if any, else its AssignmentRecord's; a member restored with the
// former stays listed in the GroupRecords to come until it writes its
// AssignmentRecord. Joins that waited for a coalesced epoch bump get it at
// the first Tick.
func (g *Group) restoreConsumer(gr *GroupRecord, rg *recordGroup) error {
	c := &g.consumer
	c.assignor = gr.Protocol
	c.targetEpoch = g.epoch
	switch gr.State {
	case "":
	case consumerAssigning:
		g.resume.assigning = true
	default:
		return fmt.Errorf("%w: consumer group %q has state %q", ErrCorruptRecords, g.name, gr.State)
	}
	lost, err := resolveClaims(g.name, ownedClaims(rg))
	if err != nil {
		return err
	}
	targets := make(map[string][]TopicPartition, len(gr.Targets))
	for _, t := range gr.Targets {
		targets[t.MemberID] = t.Target
	}
	var names topicNames
	for _, id := range slices.Sorted(maps.Keys(rg.members)) {
		r := rg.members[id]
		mem := &consumerMember{
			id:                id,
			instanceID:        r.InstanceID,
			rack:              r.RackID,
			clientID:          r.ClientID,
			clientHost:        r.ClientHost,
			rebalanceTimeout:  r.RebalanceTimeout,
			serverAssignor:    r.ServerAssignor,
			topics:            normalizeNames(slices.Clone(r.Topics)),
			regex:             r.TopicRegex,
			drained:           r.Drained,
			removeWhenDrained: r.RemoveWhenDrained,
			state:             memberStable,
			graced:            g.cfg.TakeoverGrace > 0,
			// The member may not have heard its latest assignment
			// before the restart: send it whole next time.
			assignmentChanged: true,
		}
		if mem.topics == nil {
			mem.topics = []string{}
		}
		for i, t := range mem.topics {
			mem.topics[i] = names.intern(t)
		}
		mem.resolved = mem.topics
		if mem.regex != "" {
			re, err := CompileTopicRegex(mem.regex)
			if err != nil {
				return fmt.Errorf("%w: group %q member %q: regex %q: %v", ErrCorruptRecords, g.name, id, mem.regex, err)
			}
			mem.re = re
		}
		if mem.instanceID != "" {
			if other, dup := c.static[mem.instanceID]; dup {
				return fmt.Errorf("%w: group %q: members %q and %q share instance %q", ErrCorruptRecords, g.name, other, id, mem.instanceID)
			}
		}
		if a := rg.assignments[id]; a != nil {
			g.restoreConsumerAssignment(mem, a, lost[id], &names)
		}
		if t, ok := targets[id]; ok {
			mem.target = names.internAll(slices.Clone(t))
			mem.targetDirty = true
			c.targetDirty = append(c.targetDirty, mem)
		}
		g.insertMember(mem)
	}
	g.resolveTopics()
	for _, m := range c.members {
		c.recount(m)
		if m.state == memberUnrevoked {
			g.resume.unrevoked = append(g.resume.unrevoked, m)
		}
		if d := g.cfg.restoredSession(g.name, m.id, g.cfg.ConsumerSessionTimeout); g.resume.firstSession == 0 || d < g.resume.firstSession {
			g.resume.firstSession = d
		}
	}
	c.stable = len(c.members) > 0 && c.reconciled == len(c.members) && !g.resume.assigning
	return nil
}

// resumeConsumer starts the KIP-848 deadlines of a rebuilt group at now
// (Resume): sessions, rebalance timeouts of revoking members, and the
// coalesced epoch bump that joins were waiting for (assigning).
func (g *Group) resumeConsumer(now time.Time, assigning bool) {
	c := &g.consumer
	if assigning {
		c.joinDue = now
	}
	if len(c.members) == 0 {
		return
	}
	// Every session ends at restoredDeadline(now) (deadlineOf), the
	// first firstSession after now.
	c.resumedAt = now
	c.lowerDeadline(now.Add(g.resume.firstSession))
	for _, mem := range g.resume.unrevoked {
		mem.revokeDeadline = now.Add(mem.rebalanceTimeout)
		c.lowerDeadline(mem.revokeDeadline)
	}
}

// deadlineOf is when mem's session expires.
func (g *Group) deadlineOf(mem *consumerMember) time.Time {
	if mem.deadline.IsZero() {
		return g.cfg.restoredDeadline(g.consumer.resumedAt, g.name, mem.id, g.cfg.ConsumerSessionTimeout)
	}
	return mem.deadline
}

// restoreConsumerAssignment gives mem what its AssignmentRecord says,
// except the partitions in lost (resolveClaims), with the topic names of
// names.
func (g *Group) restoreConsumerAssignment(mem *consumerMember, a *AssignmentRecord, lost []TopicPartition, names *topicNames) {
	mem.epoch, mem.prevEpoch = a.MemberEpoch, a.PrevEpoch
	for _, p := range a.Owned {
		p.Topic = names.intern(p.Topic)
		tp := TopicPartition{p.Topic, p.Partition}
		if containsTP(lost, tp) {
			continue
		}
		g.owners.assign(tp, mem.id, p.Token)
		if containsTP(a.Revoking, tp) {
			mem.revoking = append(mem.revoking, p)
		} else {
			mem.assigned = append(mem.assigned, p)
		}
	}
	for _, p := range a.Provisional {
		tp := TopicPartition{names.intern(p.Topic), p.Partition}
		if held, _ := mem.heldPartition(tp); held != nil {
			mem.unacked = append(mem.unacked, provisional{tp, p.Floor})
		}
	}
	mem.pending = names.internAll(slices.Clone(a.Pending))
	mem.target = names.internAll(slices.Clone(a.Target))
	if g.cfg.IssueGrants {
		// Its predecessor granted it what it holds (grants.go).
		mem.granted = slices.Clone(mem.assigned)
	}
	switch {
	case len(mem.revoking) > 0:
		mem.state = memberUnrevoked // its rebalance timeout starts at Resume
	case len(mem.pending) > 0:
		mem.state = memberUnreleased
	}
}

// topicNames gives each topic name of a group's records one string, so
// that the restored group's members, assignments and resolved topics
// share it: each record decodes its own copy, and every member's first
// heartbeat at a new coordinator compares the topics it reports and is
// answered with against the group's (acknowledge, topicID), which for
// strings that share their bytes ends at the pointer instead of reading
// two copies nobody touched since the standby rebuilt the group. The
// copies are not kept either.
type topicNames struct {
	m    map[string]string
	last string // the name given last: a record's lists are runs of one topic
}

// intern returns the group's string for name.
func (n *topicNames) intern(name string) string {
	if name == n.last {
		return n.last
	}
	if s, ok := n.m[name]; ok {
		n.last = s
		return s
	}
	if n.m == nil {
		n.m = make(map[string]string)
	}
	n.m[name], n.last = name, name
	return name
}

// internAll gives each partition of tps the group's topic string, in
// place, and returns tps.
func (n *topicNames) internAll(tps []TopicPartition) []TopicPartition {
	for i := range tps {
		tps[i].Topic = n.intern(tps[i].Topic)
	}
	return tps
}
