package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/coordinator"
)

// The admin operations the Kafka protocol has no request for: reading a
// group's generation log and draining a member. The HTTP listener (and
// through it `tenure groups explain | drain`) calls them.

// ErrNoLog is returned by GenerationLog when the server's store keeps no
// generation log.
var ErrNoLog = errors.New("server: the store keeps no generation log")

// NotCoordinatorError is returned by the admin operations that change a
// group, and by GroupView, when this node does not coordinate the group:
// Leader is the node that does (the leader, or the owner of the group's
// shard), if one is known. It is an ErrNotLeading.
type NotCoordinatorError struct {
	Leader    Node
	HasLeader bool
}

func (e *NotCoordinatorError) Error() string {
	if e.HasLeader {
		return fmt.Sprintf("this node does not coordinate the group now; node %d at %s does", e.Leader.ID, e.Leader.Addr)
	}
	return "no node coordinates the group now (an election is under way, or etcd has lost its quorum)"
}

func (e *NotCoordinatorError) Unwrap() error { return ErrNotLeading }

// GenerationLog returns the newest limit entries (all with limit <= 0) of
// the group's generation log, newest first, those below epoch before if
// before > 0. It reads the store, so any node of an HA set answers.
func (s *Server) GenerationLog(ctx context.Context, group string, before int32, limit int) ([]*coordinator.GenerationRecord, error) {
	if s.logStore == nil {
		return nil, ErrNoLog
	}
	return s.logStore.LoadLog(ctx, group, before, limit)
}

// Drain moves every partition off a KIP-848 member gracefully
// (coordinator.Group.Drain); with remove the member is removed once it
// holds nothing. It returns once the drain is durable (the partitions
// then move as the members heartbeat). Errors: *NotCoordinatorError, the
// core's (coordinator.ErrUnknownMember, ErrNotDrainable, ...), or one for
// a group that does not exist or is unavailable.
func (s *Server) Drain(group, member string, remove bool) error {
	return s.adminChange(group, func(g *coordinator.Group, now time.Time) error {
		return g.Drain(now, member, remove)
	})
}

// Undrain lets a drained member be assigned partitions again.
func (s *Server) Undrain(group, member string) error {
	return s.adminChange(group, func(g *coordinator.Group, now time.Time) error {
		return g.Undrain(now, member)
	})
}

// ErrUnknownGroup is returned by the admin operations for a group this
// coordinator does not have.
var ErrUnknownGroup = errors.New("server: no such group")

func (s *Server) adminChange(group string, fn func(g *coordinator.Group, now time.Time) error) error {
	now := time.Now()
	var err error
	code := s.withGroup(group, now, func(g *coordinator.Group) {
		if g.Deleted() {
			err = ErrUnknownGroup
			return
		}
		err = fn(g, now)
	})
	switch code {
	case 0:
		return err
	case kerr.GroupIDNotFound.Code:
		return fmt.Errorf("%w %q", ErrUnknownGroup, group)
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		if s.termFor(group, now) == nil {
			l, ok := s.coordinatorNode(group, now)
			return &NotCoordinatorError{Leader: l, HasLeader: ok}
		}
	}
	return fmt.Errorf("server: group %q: %w", group, kerr.ErrorForCode(code))
}
