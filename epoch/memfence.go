package epoch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// DenseLimit is the number of partitions, 0 through DenseLimit-1, that a
// [MemFence] keeps in a fixed array: admitting a token for one of them is a
// load and at most a few compare-and-swaps, with no lock and no allocation.
// Other partitions (negative or larger) work as well, through a lock-free
// concurrent map: a lookup per call (a few times slower than the array),
// and an allocation the first time the fence sees the partition.
const DenseLimit = 256

// cacheLine is the assumed size of a CPU cache line. Each dense slot gets a
// line of its own so that goroutines admitting tokens for neighbouring
// partitions do not invalidate each other's caches (false sharing).
const cacheLine = 64

// slot holds the highest token admitted for one partition.
type slot struct {
	hi atomic.Int64
	_  [cacheLine - 8]byte
}

// MemFence is an in-process [Fence]: it remembers, per partition, the highest
// token it has admitted, and rejects anything older. Use it where the fenced
// resource lives in the same process as its writers (a cache, an in-memory
// index, a simulator's resource model), or as the reference behaviour for
// fences kept elsewhere.
//
// The zero MemFence is ready to use: it has admitted nothing yet, so the
// first valid token for each partition is admitted. It takes 16 KiB (one
// cache line per dense partition) plus what sparse partitions add. A
// MemFence is safe for concurrent use and must not be copied after first use.
// It never blocks: its cost is one atomic load when the token equals the
// partition's current one (the steady state of an owner's writes) and a
// compare-and-swap when it is newer. Partitions in [0, DenseLimit) are
// lock-free and allocation-free; see [DenseLimit] for the others.
//
// A MemFence only grows: it remembers every partition it has seen for its
// whole life, which is what keeps a partition's token from going back.
type MemFence struct {
	dense    [DenseLimit]slot
	sparse   sync.Map // Partition -> *atomic.Int64
	verifier *Verifier
}

var _ SignedFence = (*MemFence)(nil)

// NewMemFence returns a MemFence that checks signed tokens with v before
// it admits them ([MemFence.AdmitSigned]), and, if v requires signatures,
// refuses every plain token given to Admit. A nil v is the zero MemFence.
func NewMemFence(v *Verifier) *MemFence { return &MemFence{verifier: v} }

// testHookBeforeSwap, when set by a test, runs between the load and the
// compare-and-swap of Admit, so that a test can make another writer win the
// race deterministically.
var testHookBeforeSwap func()

// Admit admits token for partition and records it if it is newer than the
// highest token admitted so far. It returns a [*StaleError] (wrapping
// [ErrStale]) when token is lower than that, and an error wrapping
// [ErrNoToken] when token is not [Token.Valid]; a rejected call changes
// nothing. Equal tokens are admitted.
//
// A fence whose verifier requires signatures refuses every plain token
// with a [*VerifyError] wrapping [ErrUnsigned], changing nothing.
//
// ctx is not used: Admit never blocks. It is there to satisfy [Fence].
func (f *MemFence) Admit(_ context.Context, partition Partition, token Token) error {
	if !token.Valid() {
		return noTokenError(token)
	}
	if err := f.verifier.CheckUnsigned(partition, token); err != nil {
		return err
	}
	return f.admit(partition, token)
}

// AdmitSigned admits token like Admit once the fence's verifier (if it
// has one) has verified it: a token that does not verify is refused with
// a [*VerifyError] wrapping [ErrUnverified], and the fence does not move.
// A verified token is cached by the verifier, so an owner's further
// writes under it cost a comparison.
func (f *MemFence) AdmitSigned(_ context.Context, partition Partition, token SignedToken) error {
	if !token.Token.Valid() {
		return noTokenError(token.Token)
	}
	if err := f.verifier.Verify(partition, token); err != nil {
		return err
	}
	return f.admit(partition, token.Token)
}

// admit is Admit's monotonic check, once the token is known to be one the
// fence may admit.
func (f *MemFence) admit(partition Partition, token Token) error {
	hi := f.cell(partition, true)
	for {
		cur := Token(hi.Load())
		if token < cur {
			return &StaleError{Partition: partition, Token: token, Current: cur}
		}
		if token == cur {
			return nil
		}
		if testHookBeforeSwap != nil {
			testHookBeforeSwap()
		}
		if hi.CompareAndSwap(int64(cur), int64(token)) {
			return nil
		}
		// Another writer moved the partition's token between the load and
		// the swap: look again, it may now be newer than ours.
	}
}

// Current returns the highest token the fence has admitted for partition, or
// [None] if it has admitted none. A later Admit may raise it at any time;
// it never lowers it.
func (f *MemFence) Current(partition Partition) Token {
	hi := f.cell(partition, false)
	if hi == nil {
		return None
	}
	return Token(hi.Load())
}

// cell returns the atomic holding partition's highest token. For a sparse
// partition it creates the cell when create is set, and returns nil when the
// partition is unknown and create is not set.
func (f *MemFence) cell(partition Partition, create bool) *atomic.Int64 {
	if uint32(partition) < DenseLimit {
		return &f.dense[partition].hi
	}
	if v, ok := f.sparse.Load(partition); ok {
		return v.(*atomic.Int64)
	}
	if !create {
		return nil
	}
	v, _ := f.sparse.LoadOrStore(partition, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// noTokenError explains why token carries no ownership. The zero token gets
// the bare sentinel; a negative one (Kafka's generation -1 for "no
// generation") says which value it was.
func noTokenError(token Token) error {
	if token == None {
		return ErrNoToken
	}
	return fmt.Errorf("%w: token %d is negative", ErrNoToken, int64(token))
}
