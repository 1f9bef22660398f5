package epoch

import (
	"context"
	"errors"
	"strconv"
)

// Partition identifies a partition within a fenced resource.
type Partition int32

// ErrStale is the sentinel every fence wraps when it rejects a token older
// than the newest it has admitted for a partition. Test with errors.Is.
//
// It surfaces from [Fence.Admit], from the downstream fences in etcdfence and
// sqlfence, and from the member library when the coordinator rejects a
// commit.
var ErrStale = errors.New("epoch: stale token")

// ErrNoToken is returned (or wrapped) by fences asked to admit a token that
// no ownership ever carries: zero or negative (see [Token.Valid]), and by
// [Ownership.Assign] when offered such a token.
var ErrNoToken = errors.New("epoch: no token")

// StaleError says which token was rejected and which newer token the fence
// had already admitted. It wraps [ErrStale].
type StaleError struct {
	Partition Partition
	Token     Token // the token that was rejected
	Current   Token // the newest token the fence had admitted; may be None if unknown
}

func (e *StaleError) Error() string {
	s := "epoch: stale token " + e.Token.String() + " for partition " + strconv.Itoa(int(e.Partition))
	if !e.Current.IsNone() {
		s += " (current " + e.Current.String() + ")"
	}
	return s
}

// Unwrap returns ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }

// Fence is the check a resource performs before it applies an effect: it
// admits a token that is not older than the newest token it has admitted for
// the partition, and remembers it; it rejects an older one with an error
// wrapping [ErrStale].
//
// Equal tokens are admitted, because one owner keeps its token for every
// write it makes. A token that is not [Token.Valid] (zero, or negative) is
// never admitted ([ErrNoToken]). A rejected call changes nothing.
//
// Implementations must be safe for concurrent use.
type Fence interface {
	Admit(ctx context.Context, partition Partition, token Token) error
}
