package coordinator

import (
	"slices"
	"time"
)

// Topic deletion. A topic's partitions are its name and a number, and a
// topic deleted and created again under its name shares nothing with the
// old one but the name: not its offsets, not its owners, not their tokens.
// So a deletion ends everything a group holds of the topic:
//
//   - every committed offset of it is deleted, durably, whatever the
//     members subscribe to (Kafka's coordinator deletes a deleted topic's
//     offsets from every group likewise);
//   - the last owner of each of its partitions is forgotten, so that no
//     hand-off commit reaches a topic created later under the name;
//   - KIP-848: every member's partitions of it are revoked at once, and the
//     group epoch is bumped with a new target; a partition of a topic
//     created again under the name is given only once the old one is
//     released, at the new epoch, so under a higher token;
//   - classic: the leader decides the assignment, so members keep what it
//     named until their next rebalance (a client rejoins when its metadata
//     shows the topic gone, as with Kafka); while the topic does not exist
//     their commits of it are refused UNKNOWN_TOPIC_OR_PARTITION
//     (commitTopic), and a member that still holds a partition when a
//     topic of the name is created again keeps it under its token until
//     that rebalance.

// topicsDeleted (input TopicsDeleted) is told that the named topics were
// deleted: its
// Topics resolver no longer knows them, or knows a new topic of the name
// (deleted and created again). The group deletes their committed offsets
// (OffsetRecords with Deleted), forgets their last owners and, if it is a
// KIP-848 group with members, revokes every member's partitions of them
// and bumps its epoch ("topics-changed"): a parked static member, which
// runs nothing, releases them at once. Topics the group holds nothing of
// change nothing.
func (g *Group) topicsDeleted(now time.Time, names []string) {
	if g.deleted || len(names) == 0 {
		return
	}
	gone := make(map[string]struct{}, len(names))
	for _, n := range names {
		gone[n] = struct{}{}
	}
	for _, tp := range g.offsets.sorted() {
		if _, ok := gone[tp.Topic]; ok {
			g.deleteOffset(tp)
		}
	}
	if g.typ == Consumer {
		g.consumerTopicsDeleted(now, gone)
	}
	g.owners.forgetLast(gone)
	for tp := range g.log.released {
		if _, ok := gone[tp.Topic]; ok {
			delete(g.log.released, tp)
		}
	}
}

// consumerTopicsDeleted revokes the partitions of the gone topics from
// every KIP-848 member and bumps the epoch if anything of them was held or
// targeted, or the assignable topics changed.
func (g *Group) consumerTopicsDeleted(now time.Time, gone map[string]struct{}) {
	c := &g.consumer
	if len(c.members) == 0 {
		return
	}
	inGone := func(topic string) bool { _, ok := gone[topic]; return ok }
	targeted := false
	var changed []*consumerMember
	for _, id := range c.sortedMemberIDs() {
		mem := c.members[id]
		targeted = targeted || slices.ContainsFunc(mem.target, func(tp TopicPartition) bool { return inGone(tp.Topic) })
		var keep, revoke []OwnedPartition
		for _, p := range mem.assigned {
			if inGone(p.Topic) {
				revoke = append(revoke, p)
			} else {
				keep = append(keep, p)
			}
		}
		if len(revoke) == 0 {
			continue
		}
		changed = append(changed, mem)
		mem.assigned = keep
		if mem.epoch == staticLeftEpoch {
			for _, p := range revoke {
				g.owners.release(TopicPartition{p.Topic, p.Partition}, mem.id)
			}
			continue
		}
		// As for a member that unsubscribed while revoking
		// (revokeUnsubscribed): it must stop at once, and it stays at
		// its epoch until it has released them.
		mem.revoking = mergeOwned(mem.revoking, revoke)
		mem.assignmentChanged = true
		if mem.state != memberUnrevoked {
			mem.state = memberUnrevoked
			mem.revokeDeadline = now.Add(mem.rebalanceTimeout)
			c.lowerDeadline(mem.revokeDeadline)
		}
		c.recount(mem)
	}
	if g.resolveTopics() || targeted || len(changed) > 0 {
		g.bumpEpoch("topics-changed", true)
		g.consumerCheckStable()
	}
	for _, mem := range changed {
		g.persistAssignment(mem)
	}
}

// forgetLast forgets the last owner of every partition of the gone topics
// that nobody holds.
func (o *ownership) forgetLast(gone map[string]struct{}) {
	for tp := range o.last {
		if _, ok := gone[tp.Topic]; ok {
			delete(o.last, tp)
		}
	}
}

// UnknownTopics returns, sorted, the topics that the group's committed
// offsets or its KIP-848 members' partitions (held or targeted) name and
// that the Topics resolver does not know. A group restored after one of
// its topics was deleted (while the coordinator was down, or the group
// offline) passes them to TopicsDeleted, so that a deleted topic's offsets
// do not come back with it.
func (g *Group) UnknownTopics() []string {
	known := make(map[string]bool)
	// A group's partitions are mostly of one topic, named again by every
	// member's assignment, revocation and target: comparing with the
	// topic checked last spares a map lookup a partition, most of what
	// a takeover's install of thousands of groups costs here.
	last := ""
	check := func(topic string) {
		if topic == last && last != "" {
			return
		}
		last = topic
		if _, seen := known[topic]; !seen {
			_, _, known[topic] = g.cfg.Topics.Lookup(topic)
		}
	}
	for tp := range g.offsets.m {
		check(tp.Topic)
	}
	if g.typ == Consumer {
		for _, m := range g.consumer.members {
			for _, p := range m.assigned {
				check(p.Topic)
			}
			for _, p := range m.revoking {
				check(p.Topic)
			}
			for _, tp := range m.target {
				check(tp.Topic)
			}
		}
	}
	var out []string
	for topic, ok := range known {
		if !ok {
			out = append(out, topic)
		}
	}
	slices.Sort(out)
	return out
}
