// Package store persists the durable state of coordinator groups: the
// records that a group's Ready asks its caller to write before it sends any
// reply, and the topics of the server's registry.
//
// The server hands the records of many Readies, of many groups, to one
// writer, which persists them in batches (group commit) and releases a
// group's replies once every record that group produced up to the replies'
// Ready is durable. A failed write takes the groups of that batch offline;
// the server rebuilds each from LoadGroup (coordinator.Restore) once none of
// its writes is in flight. At start-up Load returns every group and topic.
//
// Two implementations: Memory (this package), which keeps the state in
// process memory and survives nothing, and the etcd store (package
// etcdstore), which keeps one key per entity in etcd.
package store

import (
	"context"
	"errors"

	"github.com/tenure-dev/tenure/coordinator"
)

// Store is durable storage for coordinator records. Implementations must be
// safe for concurrent use. Their semantics are coordinator.RecordSet's:
// each record replaces the previous record of its entity, deletions remove
// entities, and a deleted group keeps its GroupRecord as a tombstone.
type Store interface {
	// Persist durably writes recs in order: the records of any number of
	// groups (each group's in the order it produced them) and topics. The
	// records are immutable and the store may keep them.
	//
	// When Persist returns nil every record is durable. When it returns an
	// error, any part of recs may have been written, in order (a store that
	// must split a batch writes a prefix), but nothing of recs will be
	// written after Persist returns: a reader that comes after sees the
	// final outcome. coordinator.Restore rebuilds a group safely from any
	// such prefix.
	//
	// Persist may be called concurrently; calls in flight at once write
	// distinct keys (the server's writer sees to it), and may land in any
	// order.
	Persist(ctx context.Context, recs []coordinator.Record) error

	// Load returns every record: TopicRecords first, by name, then each
	// group's records in load order (coordinator.RecordSet.Records), groups
	// in name order, tombstones of deleted groups included. The records are
	// shared: the caller must not modify them.
	Load(ctx context.Context) ([]coordinator.Record, error)

	// LoadGroup returns the records of one group in load order (nil if it
	// has none), as coordinator.Restore takes them.
	LoadGroup(ctx context.Context, group string) ([]coordinator.Record, error)

	// Close releases the store's resources. Persist and the loads fail
	// after Close.
	Close() error
}

// TopicStore keeps topics: the work shards groups are assigned, each with
// an ID by which KIP-848 members name its partitions. A topic, once
// created, never changes, and every node of an HA set may create one, so
// creation is create-if-absent: two creators of one name agree on the
// first one's ID. Deletion is delete-if-same: it names the topic by name
// and ID, so that it never deletes a topic created again under the name.
// Both stores implement it; an HA set shares one (etcdstore.Topics) apart
// from the leader's guarded group store.
type TopicStore interface {
	// CreateTopic stores rec unless a topic of its name exists, and
	// returns the stored topic: rec, or the existing one.
	CreateTopic(ctx context.Context, rec *coordinator.TopicRecord) (*coordinator.TopicRecord, error)
	// DeleteTopic deletes the topic of rec's name if it is stored with
	// rec's ID, and reports whether it did; a topic of the name with
	// another ID, or none, is left as it is.
	DeleteTopic(ctx context.Context, rec *coordinator.TopicRecord) (bool, error)
	// LoadTopics returns every topic, sorted by name.
	LoadTopics(ctx context.Context) ([]*coordinator.TopicRecord, error)
}

// LogStore keeps the groups' generation logs: the GenerationRecords that
// Persist writes, which Load and LoadGroup leave out (they are history,
// not state, and a group restores without them). Both stores implement
// it; any node of an HA set may read it.
type LogStore interface {
	// LoadLog returns the newest limit entries (all, if limit <= 0) of the
	// group's generation log, newest first; an entry with an epoch of
	// before or more is left out when before > 0.
	LoadLog(ctx context.Context, group string, before int32, limit int) ([]*coordinator.GenerationRecord, error)
}

// ErrClosed is returned by Persist and the loads after Close.
var ErrClosed = errors.New("store: closed")

// ErrUnknownRecord is returned by Persist for a record type the store does
// not know, which means the store is older than the coordinator.
var ErrUnknownRecord = errors.New("store: unknown record type")

// Check returns ErrUnknownRecord, wrapped, if a record of recs is of a type
// no store knows; stores call it before writing anything.
func Check(recs []coordinator.Record) error {
	for _, r := range recs {
		switch r.(type) {
		case *coordinator.GroupRecord, *coordinator.MemberRecord, *coordinator.AssignmentRecord,
			*coordinator.OffsetRecord, *coordinator.TopicRecord, *coordinator.GenerationRecord:
		default:
			return unknownRecord(r)
		}
	}
	return nil
}
