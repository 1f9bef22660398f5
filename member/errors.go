package member

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/epoch"
)

// The causes of a claim's end. A [Claim]'s context is cancelled with an
// error wrapping one of them (read it with context.Cause, test it with
// errors.Is), and [Claim.Commit] refuses, with one of them, a claim whose
// token may no longer be valid.
var (
	// ErrRevoked: the coordinator asked for the partition back, or the
	// session is closing or draining. The token is still valid: commit
	// what was done, then return from the handler.
	ErrRevoked = errors.New("member: claim revoked")
	// ErrSuspect: the member could not confirm its session before its
	// safe-ownership deadline. Stop at once; the token may already be
	// someone else's. If the coordinator confirms the session in time,
	// the handler runs again with a new Claim carrying the same token.
	ErrSuspect = errors.New("member: claim suspect: session not confirmed before the deadline")
	// ErrLost: the session expired, the member was fenced, or a commit was
	// rejected. The token is dead forever; the partition may come back
	// later with a new, higher token, in a new Claim.
	ErrLost = errors.New("member: claim lost")
)

// ErrClosed is returned by [Session] methods called after the session
// ended.
var ErrClosed = errors.New("member: session closed")

// stopCause is the cancellation cause of a claim that moved to state for
// the given reason (a ClaimChange cause).
func stopCause(state epoch.State, reason string) error {
	var sentinel error
	switch state {
	case epoch.Suspect:
		sentinel = ErrSuspect
	case epoch.Lost:
		sentinel = ErrLost
	default:
		sentinel = ErrRevoked
	}
	if reason == "" {
		return sentinel
	}
	return fmt.Errorf("%w (%s)", sentinel, reason)
}

// CommitError is returned by [Claim.Commit] when the coordinator rejected
// the commit as coming from an owner whose token is no longer valid
// (STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID). The claim is then Lost. It
// wraps both [epoch.ErrStale] (through a *epoch.StaleError, for
// errors.As) and the Kafka error (a *kerr.Error).
type CommitError struct {
	Topic     string
	Partition int32
	Token     epoch.Token
	// Code is the coordinator's answer.
	Code  *kerr.Error
	stale epoch.StaleError
}

func newCommitError(c *Claim, code *kerr.Error) *CommitError {
	return &CommitError{
		Topic: c.topic, Partition: c.partition, Token: c.token, Code: code,
		stale: epoch.StaleError{Partition: epoch.Partition(c.partition), Token: c.token},
	}
}

func (e *CommitError) Error() string {
	return "member: commit of " + e.Topic + "/" + strconv.Itoa(int(e.Partition)) +
		" at token " + e.Token.String() + " rejected: " + e.Code.Message
}

// Unwrap returns the *epoch.StaleError and the Kafka error.
func (e *CommitError) Unwrap() []error { return []error{&e.stale, e.Code} }

// rejectsToken reports the per-partition commit answers that mean the
// member's token for the partition is no longer valid.
func rejectsToken(err error) bool {
	for _, code := range []error{
		kerr.StaleMemberEpoch,
		kerr.FencedMemberEpoch,
		kerr.UnknownMemberID,
		kerr.IllegalGeneration,
		kerr.FencedInstanceID,
	} {
		if errors.Is(err, code) {
			return true
		}
	}
	return false
}
