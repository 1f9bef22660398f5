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
// (coordinator.Drain); with remove the member is removed once it
// holds nothing. It returns once the drain is durable (the partitions
// then move as the members heartbeat). Errors: *NotCoordinatorError, the
// core's (coordinator.ErrUnknownMember, ErrNotDrainable, ...), or one for
// a group that does not exist or is unavailable.
func (s *Server) Drain(group, member string, remove bool) error {
	return s.adminChange(group, func(a *adminAnswer) coordinator.Input {
		return coordinator.Drain{Ref: a, MemberID: member, Remove: remove}
	})
}

// Undrain lets a drained member be assigned partitions again.
func (s *Server) Undrain(group, member string) error {
	return s.adminChange(group, func(a *adminAnswer) coordinator.Input {
		return coordinator.Undrain{Ref: a, MemberID: member}
	})
}

// ErrUnknownGroup is returned by the admin operations for a group this
// coordinator does not have.
var ErrUnknownGroup = errors.New("server: no such group")

// adminAnswer is the Ref of an admin input (Drain, Undrain, DeleteGroup):
// performReady puts the group's answer in it.
type adminAnswer struct{ err error }

// errorCode is the Kafka error code of a core's answer.
func errorCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// adminChange steps the group with the admin input in makes for an answer,
// and returns the group's answer once it is durable.
func (s *Server) adminChange(group string, in func(a *adminAnswer) coordinator.Input) error {
	now := time.Now()
	a := new(adminAnswer)
	code := s.withGroup(group, now, func(g *coordinator.Group) {
		if g.Deleted() {
			a.err = ErrUnknownGroup
			return
		}
		g.Step(now, in(a))
	})
	switch code {
	case 0:
		return a.err
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
