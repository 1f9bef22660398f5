// Package store persists the durable state of coordinator groups: the
// records that a group's Ready asks its caller to write before it sends any
// reply.
//
// The server calls Persist with the records of one Ready, in order, and
// sends that Ready's replies only once Persist has returned nil; a failed
// Persist means the group's in-memory state is ahead of the store, so the
// server answers COORDINATOR_NOT_AVAILABLE and drops the group. At start-up
// Load returns the records needed to rebuild every group.
//
// Two implementations are planned: Memory (this package), which keeps the
// latest state in process memory and therefore survives nothing, and an
// etcd-backed store, which writes each Persist as one transaction guarded
// by the coordinator's leadership.
package store

import (
	"context"
	"errors"

	"github.com/tenure-dev/tenure/coordinator"
)

// Store is durable storage for coordinator records. Implementations must be
// safe for concurrent use: the server persists different groups from
// different goroutines at once, while the records of one group always come
// from one goroutine at a time, in the order the group produced them.
type Store interface {
	// Persist durably writes recs (the Persist slice of one Ready, all of
	// one group) in order, before returning. Either every record is
	// written or Persist returns an error. The store must not keep recs
	// or the records' slices after returning: the caller reuses them.
	Persist(ctx context.Context, recs []coordinator.Record) error

	// Load returns the records that rebuild the state of every group:
	// for each group, its GroupRecord first, then MemberRecords,
	// AssignmentRecords and OffsetRecords, groups in name order. Records
	// superseded by later ones (an older epoch, a member that left) may
	// be left out.
	Load(ctx context.Context) ([]coordinator.Record, error)

	// Close releases the store's resources. Persist and Load fail after
	// Close.
	Close() error
}

// ErrClosed is returned by Persist and Load after Close.
var ErrClosed = errors.New("store: closed")

// ErrUnknownRecord is returned by Persist for a record type the store does
// not know, which means the store is older than the coordinator.
var ErrUnknownRecord = errors.New("store: unknown record type")
