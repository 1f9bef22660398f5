package workload

import (
	"context"
	"errors"

	"github.com/tenure-dev/tenure/epoch"
)

// Fanout is a [Resource] that writes to several resources: Admit and
// Append go to each in turn, in the order given, and succeed once every
// one accepted. The first error ends the call, so the resources after the
// one that failed are not written: a stale rejection by any of them is
// the fan-out's stale rejection, and the claim stops as it would on one
// resource. A retry after another error rewrites the record everywhere,
// which writes it once per resource (see [Resource.Append]).
//
// A fan-out is not atomic: a record rejected or lost by the second
// resource may be in the first. Read each resource on its own (the
// attempt log, see [LogAttempts], says what each accepted).
type Fanout struct {
	rs []Resource
}

var _ Resource = (*Fanout)(nil)

// NewFanout returns a fan-out over rs, in that order; at least one.
func NewFanout(rs ...Resource) (*Fanout, error) {
	if len(rs) == 0 {
		return nil, errors.New("workload: fan-out to no resource")
	}
	for _, r := range rs {
		if r == nil {
			return nil, errors.New("workload: fan-out to a nil resource")
		}
	}
	return &Fanout{rs: append([]Resource(nil), rs...)}, nil
}

// Resources returns the resources of the fan-out, in order.
func (f *Fanout) Resources() []Resource { return append([]Resource(nil), f.rs...) }

// Admit implements [Resource].
func (f *Fanout) Admit(ctx context.Context, p epoch.Partition, t epoch.SignedToken) error {
	for _, r := range f.rs {
		if err := r.Admit(ctx, p, t); err != nil {
			return err
		}
	}
	return nil
}

// Append implements [Resource].
func (f *Fanout) Append(ctx context.Context, rec Record, t epoch.SignedToken) error {
	for _, r := range f.rs {
		if err := r.Append(ctx, rec, t); err != nil {
			return err
		}
	}
	return nil
}

// Records returns the first resource's records: the resources may differ
// (see [Fanout]), and their Orders are not comparable, so they are not
// merged.
func (f *Fanout) Records(ctx context.Context) ([]Stored, error) {
	return f.rs[0].Records(ctx)
}
