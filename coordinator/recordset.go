package coordinator

import (
	"fmt"
	"maps"
	"slices"
)

// RecordSet is the latest durable state of groups and topics as records:
// applying records in the order groups emit them keeps, per group, its
// newest GroupRecord, one MemberRecord and one AssignmentRecord per live
// member and one OffsetRecord per committed partition, and the newest
// TopicRecord of each topic. It is the reference semantics of a store
// (the memory store is a RecordSet behind a lock; the etcd store keeps the
// same records under one key each), and what Restore reads.
//
// The rules: a record replaces the previous record of the same entity; a
// MemberRecord with Deleted removes the member and its assignment; a
// GroupRecord with Deleted removes every member, assignment and offset of
// the group and stays as its tombstone, whose epoch a re-created group
// continues from; an OffsetRecord or TopicRecord with Deleted removes its
// entity.
//
// A RecordSet keeps the records it is given (they are immutable once a
// group hands them out) and is not safe for concurrent use.
type RecordSet struct {
	groups map[string]*recordGroup
	topics map[string]*TopicRecord
}

type recordGroup struct {
	group       *GroupRecord
	members     map[string]*MemberRecord
	assignments map[string]*AssignmentRecord
	offsets     map[TopicPartition]*OffsetRecord
	// log is the generation log, by epoch; it is not part of the state
	// Group and Records return.
	log []*GenerationRecord
}

// NewRecordSet returns an empty RecordSet.
func NewRecordSet() *RecordSet {
	return &RecordSet{groups: make(map[string]*recordGroup), topics: make(map[string]*TopicRecord)}
}

func (s *RecordSet) group(name string) *recordGroup {
	g := s.groups[name]
	if g == nil {
		g = &recordGroup{
			members:     make(map[string]*MemberRecord),
			assignments: make(map[string]*AssignmentRecord),
			offsets:     make(map[TopicPartition]*OffsetRecord),
		}
		s.groups[name] = g
	}
	return g
}

// Apply applies one record. It returns an error, and changes nothing, for
// a record type it does not know.
func (s *RecordSet) Apply(r Record) error {
	switch r := r.(type) {
	case *GroupRecord:
		g := s.group(r.Group)
		g.group = r
		if r.Deleted {
			clear(g.members)
			clear(g.assignments)
			clear(g.offsets)
		}
	case *MemberRecord:
		g := s.group(r.Group)
		if r.Deleted {
			delete(g.members, r.MemberID)
			delete(g.assignments, r.MemberID)
			return nil
		}
		g.members[r.MemberID] = r
	case *AssignmentRecord:
		s.group(r.Group).assignments[r.MemberID] = r
	case *OffsetRecord:
		g := s.group(r.Group)
		tp := TopicPartition{r.Topic, r.Partition}
		if r.Deleted {
			delete(g.offsets, tp)
			return nil
		}
		g.offsets[tp] = r
	case *TopicRecord:
		if r.Deleted {
			delete(s.topics, r.Name)
			return nil
		}
		s.topics[r.Name] = r
	case *GenerationRecord:
		g := s.group(r.Group)
		i, found := slices.BinarySearchFunc(g.log, r.Epoch, func(e *GenerationRecord, ep int32) int { return int(e.Epoch - ep) })
		if found {
			g.log[i] = r
		} else {
			g.log = slices.Insert(g.log, i, r)
		}
		if r.Trim > 0 {
			n, _ := slices.BinarySearchFunc(g.log, r.Trim+1, func(e *GenerationRecord, ep int32) int { return int(e.Epoch - ep) })
			g.log = slices.Delete(g.log, 0, n)
		}
	default:
		return fmt.Errorf("coordinator: unknown record type %T", r)
	}
	return nil
}

// Group returns the records of the named group in load order: its
// GroupRecord (a tombstone if it was deleted), then its MemberRecords,
// AssignmentRecords and OffsetRecords, each sorted by member ID or
// partition. It returns nil for a group with no records.
func (s *RecordSet) Group(name string) []Record {
	g := s.groups[name]
	if g == nil {
		return nil
	}
	return g.appendTo(nil)
}

func (g *recordGroup) appendTo(out []Record) []Record {
	if g.group != nil {
		out = append(out, g.group)
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		out = append(out, g.members[id])
	}
	for _, id := range slices.Sorted(maps.Keys(g.assignments)) {
		out = append(out, g.assignments[id])
	}
	for _, tp := range slices.SortedFunc(maps.Keys(g.offsets), compareTP) {
		out = append(out, g.offsets[tp])
	}
	return out
}

// Log returns the generation log of the named group, oldest first: the
// newest record of each epoch its retention keeps. The log outlives a
// deletion of the group (it is history, not state).
func (s *RecordSet) Log(group string) []*GenerationRecord {
	if g := s.groups[group]; g != nil {
		return slices.Clone(g.log)
	}
	return nil
}

// Records returns every record in load order: the TopicRecords by name,
// then each group's records (as Group returns them) by group name.
func (s *RecordSet) Records() []Record {
	var out []Record
	for _, name := range slices.Sorted(maps.Keys(s.topics)) {
		out = append(out, s.topics[name])
	}
	for _, name := range slices.Sorted(maps.Keys(s.groups)) {
		out = s.groups[name].appendTo(out)
	}
	return out
}

// Topic returns the named topic's record, or nil.
func (s *RecordSet) Topic(name string) *TopicRecord { return s.topics[name] }

// Topics returns every topic's record, sorted by name.
func (s *RecordSet) Topics() []*TopicRecord {
	out := make([]*TopicRecord, 0, len(s.topics))
	for _, name := range slices.Sorted(maps.Keys(s.topics)) {
		out = append(out, s.topics[name])
	}
	return out
}

// GroupOf returns the group a record belongs to; ok is false for a
// TopicRecord, which belongs to none.
func GroupOf(r Record) (group string, ok bool) {
	switch r := r.(type) {
	case *GroupRecord:
		return r.Group, true
	case *MemberRecord:
		return r.Group, true
	case *AssignmentRecord:
		return r.Group, true
	case *OffsetRecord:
		return r.Group, true
	case *GenerationRecord:
		return r.Group, true
	}
	return "", false
}
