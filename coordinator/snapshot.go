package coordinator

import "slices"

// Snapshot returns the records that describe the group's durable state as
// it is now, in load order (RecordSet.Group): what a store holds for the
// group once every record the group emitted so far is written, and what
// Restore rebuilds the group from. Tests compare the snapshots of a group
// and of its restored copy; tools may use it to copy a group.
//
// A deleted group's snapshot is its tombstone. A group that has never had
// a member has a GroupRecord at epoch 0.
func (g *Group) Snapshot() []Record {
	if g.deleted {
		return []Record{&GroupRecord{Group: g.name, Type: g.typ, Epoch: g.epoch, Deleted: true}}
	}
	saved, tombstone := g.ready.Persist, g.tombstone
	g.ready.Persist = nil
	// Every member's AssignmentRecord below holds its target: the
	// GroupRecord needs no Targets.
	g.persist(g.groupRecord())
	switch g.typ {
	case Classic:
		for _, m := range g.classic.sortedMembers() {
			g.persist(g.classicMemberRecord(m))
		}
		for _, m := range g.classic.sortedMembers() {
			if m.assignedAt != 0 {
				g.persist(g.classicAssignmentRecord(m))
			}
		}
	case Consumer:
		c := &g.consumer
		ids := c.sortedMemberIDs()
		for _, id := range ids {
			g.persistMember(c.members[id])
		}
		for _, id := range ids {
			m := c.members[id]
			dirty := m.targetDirty
			g.persistAssignment(m)
			m.targetDirty = dirty
		}
	}
	for _, tp := range g.offsets.sorted() {
		o := g.offsets.m[tp]
		g.persist(&OffsetRecord{
			Group: g.name, Topic: tp.Topic, Partition: tp.Partition,
			Offset: o.offset, LeaderEpoch: o.leaderEpoch, Metadata: o.metadata,
			Token: o.token, MemberID: o.member,
		})
	}
	out := slices.Clip(g.ready.Persist)
	g.ready.Persist, g.tombstone = saved, tombstone
	return out
}
