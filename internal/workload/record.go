package workload

import (
	"context"
	"errors"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// Record is one unit of work's result: the Seq-th record of a partition,
// written under a fencing token by a worker.
type Record struct {
	Partition epoch.Partition `json:"partition"`
	Seq       int64           `json:"seq"`
	Token     epoch.Token     `json:"token"`
	// Worker is the writer's name (its instance ID, or its first member
	// ID), which stays the same across the member's rejoins.
	Worker string `json:"worker"`
	// Member is the member ID of the claim the record was written under
	// (member.Claim.MemberID), so that a checker can match the record to
	// the owner the coordinator gave the token to. Empty in records
	// written by versions that did not store it.
	Member string `json:"member"`
}

// Unsigned returns r's token without a signature: what Append takes for a
// record whose writer has none.
func (r Record) Unsigned() epoch.SignedToken {
	return epoch.SignedToken{Token: r.Token, Member: r.Member}
}

// ErrTokenMismatch is returned by Append when the token it is given is not
// the record's.
var ErrTokenMismatch = errors.New("workload: the token is not the record's")

// Stored is a record as a resource holds it. Order is the position at
// which the resource accepted it (etcd's revision, a database sequence):
// within a partition, a higher Order was accepted later.
type Stored struct {
	Record
	Order int64
}

// Resource is where a [Worker] appends its records. Both methods check the
// token against the newest one admitted for the partition, atomically with
// their effect, and reject an older one with an [*epoch.StaleError]
// (errors.Is(err, epoch.ErrStale)), writing nothing. An equal or newer
// token is admitted and becomes the partition's newest. A resource built
// with a verifier ([Verify]) first refuses a token the coordinator did not
// sign for the partition with an [*epoch.VerifyError]
// (errors.Is(err, epoch.ErrUnverified)), writing nothing. (The unfenced
// resources, a test control, check nothing: see the package
// documentation.)
type Resource interface {
	// Admit records t as the newest token of partition p, with no other
	// effect.
	Admit(ctx context.Context, p epoch.Partition, t epoch.SignedToken) error
	// Append writes r under t, the record's token with its signature
	// (member.Claim.Token; r.Unsigned() without one), which a verifying
	// resource checks; t.Token must be r.Token ([ErrTokenMismatch]).
	// Appending the same record again (same partition, sequence number
	// and token) writes it once.
	Append(ctx context.Context, r Record, t epoch.SignedToken) error
	// Records returns every stored record, sorted by partition, then in
	// the order the resource accepted them.
	Records(ctx context.Context) ([]Stored, error)
}

// Option configures a fenced resource: see [NewEtcdResource] and
// [NewSQLResource].
type Option func(*options)

type options struct {
	verifier *epoch.Verifier
}

// Verify makes the resource's fence check every token with v (signed
// tokens verified, plain ones refused if v requires signatures) before
// anything is written: epoch.SignedFence's rule.
func Verify(v *epoch.Verifier) Option { return func(o *options) { o.verifier = v } }

func applyOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Write is the outcome of one append, as reported to [Config.Observe].
type Write struct {
	Record
	// Err is nil if the resource accepted the record; it wraps
	// epoch.ErrStale if the resource rejected the token.
	Err error
	// Held is true if a [Pause] held the write between the claim check
	// that allowed it and the write itself: a zombie's write.
	Held bool
	// At is when the append returned.
	At time.Time
}
