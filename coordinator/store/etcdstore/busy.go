package etcdstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
)

// etcd refuses a proposal while its applied index trails its committed
// index by more than 5,000 entries ("etcdserver: too many requests",
// rpctypes.ErrTooManyRequests): after a restart that replays a long log
// tail, or under a burst of writes. It refuses before proposing, so
// nothing is written and the same transaction may be sent again as it is,
// the fence unmoved. A write waits a growing, jittered interval between
// attempts (busyFirstWait doubling to busyMaxStep, each between half and
// all of it, so the groups of a restarted node do not all come back at
// once), for at most the BusyTimeout option in all; then it fails as
// rejected. A spell of refusals, whichever concurrent writes meet it, is
// logged once when it starts and once when etcd accepts a write again,
// not per write.

const (
	busyFirstWait = 20 * time.Millisecond
	busyMaxStep   = 500 * time.Millisecond
)

// busyState is the current spell of refusals.
type busyState struct {
	mu      sync.Mutex
	since   time.Time // zero: etcd accepts writes
	retries int
}

// refused notes a refusal, logging the start of a spell.
func (s *Store) refused() {
	b := &s.busy
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() {
		b.since = time.Now()
		s.cfg.log.Warn("etcd store: etcd refuses writes while it applies its log (too many requests); retrying with back-off",
			zap.Duration("up_to", s.cfg.busyTimeout))
	}
	b.retries++
}

// accepted notes an accepted write, logging the end of a spell.
func (s *Store) accepted() {
	b := &s.busy
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.since.IsZero() {
		s.cfg.log.Info("etcd store: etcd accepts writes again", zap.Duration("after", time.Since(b.since)),
			zap.Int("retries", b.retries))
		b.since, b.retries = time.Time{}, 0
	}
}

// whenAccepted runs send until etcd does not refuse it as too many
// requests, waiting between attempts, for at most cfg.busyTimeout.
func (s *Store) whenAccepted(ctx context.Context, send func() error) error {
	var waited time.Duration
	step := busyFirstWait
	for {
		err := send()
		if !errors.Is(err, rpctypes.ErrTooManyRequests) {
			if err == nil {
				s.accepted()
			}
			return err
		}
		wait := step/2 + rand.N(step/2+1)
		if waited+wait > s.cfg.busyTimeout {
			return err
		}
		s.refused()
		s.metrics.busyRetry()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		waited += wait
		step = min(2*step, busyMaxStep)
	}
}
