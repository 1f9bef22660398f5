package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/tenure-dev/tenure/coordinator"
)

// Memory is a Store that keeps the latest state of every group in process
// memory. It survives nothing, not even a restart of the process: use it
// for tests, the simulator and `tenure serve --store=memory`.
//
// Memory compacts as it goes, keeping per group only the newest
// GroupRecord, one MemberRecord and one AssignmentRecord per live member,
// and one OffsetRecord per committed partition, so a long-running server
// does not grow with the number of commits. A deleted member takes its
// assignment with it; a deleted group keeps only its GroupRecord (with
// Deleted set), so that its epoch is not forgotten and a group re-created
// under the same name can continue from it.
type Memory struct {
	mu     sync.Mutex
	closed bool
	groups map[string]*memGroup
}

type memGroup struct {
	group       *coordinator.GroupRecord
	members     map[string]*coordinator.MemberRecord
	assignments map[string]*coordinator.AssignmentRecord
	offsets     map[coordinator.TopicPartition]*coordinator.OffsetRecord
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{groups: make(map[string]*memGroup)}
}

func (m *Memory) group(name string) *memGroup {
	g := m.groups[name]
	if g == nil {
		g = &memGroup{
			members:     make(map[string]*coordinator.MemberRecord),
			assignments: make(map[string]*coordinator.AssignmentRecord),
			offsets:     make(map[coordinator.TopicPartition]*coordinator.OffsetRecord),
		}
		m.groups[name] = g
	}
	return g
}

// Persist implements Store. It copies every record, so the caller may
// reuse them at once.
func (m *Memory) Persist(_ context.Context, recs []coordinator.Record) error {
	// Validate first so that an unknown record writes nothing (all or
	// nothing, as the interface promises).
	for _, r := range recs {
		switch r.(type) {
		case *coordinator.GroupRecord, *coordinator.MemberRecord,
			*coordinator.AssignmentRecord, *coordinator.OffsetRecord:
		default:
			return fmt.Errorf("%w: %T", ErrUnknownRecord, r)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, r := range recs {
		switch r := r.(type) {
		case *coordinator.GroupRecord:
			g := m.group(r.Group)
			c := *r
			g.group = &c
			if r.Deleted {
				clear(g.members)
				clear(g.assignments)
				clear(g.offsets)
			}
		case *coordinator.MemberRecord:
			g := m.group(r.Group)
			if r.Deleted {
				delete(g.members, r.MemberID)
				delete(g.assignments, r.MemberID)
				continue
			}
			c := *r
			c.Topics = slices.Clone(r.Topics)
			if r.Protocols != nil {
				c.Protocols = make(map[string][]byte, len(r.Protocols))
				for k, v := range r.Protocols {
					c.Protocols[k] = slices.Clone(v)
				}
			}
			g.members[r.MemberID] = &c
		case *coordinator.AssignmentRecord:
			g := m.group(r.Group)
			c := *r
			c.Owned = slices.Clone(r.Owned)
			c.Pending = slices.Clone(r.Pending)
			c.Revoking = slices.Clone(r.Revoking)
			c.Raw = slices.Clone(r.Raw)
			g.assignments[r.MemberID] = &c
		case *coordinator.OffsetRecord:
			g := m.group(r.Group)
			tp := coordinator.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			if r.Deleted {
				delete(g.offsets, tp)
				continue
			}
			c := *r
			if r.Metadata != nil {
				md := *r.Metadata
				c.Metadata = &md
			}
			g.offsets[tp] = &c
		}
	}
	return nil
}

// Load implements Store. The records are copies: the caller may keep and
// change them.
func (m *Memory) Load(context.Context) ([]coordinator.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	var out []coordinator.Record
	for _, name := range slices.Sorted(maps.Keys(m.groups)) {
		g := m.groups[name]
		if g.group != nil {
			c := *g.group
			out = append(out, &c)
		}
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			c := *g.members[id]
			c.Topics = slices.Clone(c.Topics)
			if c.Protocols != nil {
				ps := make(map[string][]byte, len(c.Protocols))
				for k, v := range c.Protocols {
					ps[k] = slices.Clone(v)
				}
				c.Protocols = ps
			}
			out = append(out, &c)
		}
		for _, id := range slices.Sorted(maps.Keys(g.assignments)) {
			c := *g.assignments[id]
			c.Owned = slices.Clone(c.Owned)
			c.Pending = slices.Clone(c.Pending)
			c.Revoking = slices.Clone(c.Revoking)
			c.Raw = slices.Clone(c.Raw)
			out = append(out, &c)
		}
		tps := slices.SortedFunc(maps.Keys(g.offsets), func(a, b coordinator.TopicPartition) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		for _, tp := range tps {
			c := *g.offsets[tp]
			if c.Metadata != nil {
				md := *c.Metadata
				c.Metadata = &md
			}
			out = append(out, &c)
		}
	}
	return out, nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
