package etcdstore

import "github.com/tenure-dev/tenure/coordinator"

// PauseMirror ends m's watches and keeps them from starting again until
// resume is called, as an etcd out of reach would: the mirror falls
// behind the writes made meanwhile.
func PauseMirror(m *Mirror) (resume func()) {
	hold := make(chan struct{})
	m.mu.Lock()
	m.hold = hold
	var stops []func()
	for _, u := range m.units {
		if u.breakWatch != nil {
			stops = append(stops, u.breakWatch)
		}
	}
	m.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	return func() {
		m.mu.Lock()
		m.hold = nil
		m.mu.Unlock()
		close(hold)
	}
}

// HoldCombiner keeps c from sending, as if its requests in flight were
// all unanswered, so that the transactions sent meanwhile wait together;
// queued counts them, and release lets them go.
func HoldCombiner(c *Combiner) (queued func() int, release func()) {
	return holdRequests(c, maxCombinedInFlight)
}

// HoldRequest counts one request of c in flight, as if sent and
// unanswered, until release; queued counts the transactions waiting.
func HoldRequest(c *Combiner) (queued func() int, release func()) { return holdRequests(c, 1) }

// CombinerQueued counts the transactions waiting in c.
func CombinerQueued(c *Combiner) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// EndCombineDelay ends c's combine delay now, if one runs, as its timer
// would.
func EndCombineDelay(c *Combiner) {
	c.mu.Lock()
	n := c.linger
	c.mu.Unlock()
	c.endLinger(n)
}

func holdRequests(c *Combiner, n int) (queued func() int, release func()) {
	c.mu.Lock()
	c.inFlight += n
	c.mu.Unlock()
	queued = func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue)
	}
	release = func() {
		c.mu.Lock()
		c.inFlight -= n
		c.sendLocked()
		c.mu.Unlock()
	}
	return queued, release
}

// OffsetKeyValues returns the partition keys and values of recs (of
// offsets only) under prefix: what a store before offset batches wrote
// for them, one key each.
func OffsetKeyValues(prefix string, recs []coordinator.Record) (keys, vals []string) {
	k := newKeys(prefix, 0, 1)
	for _, r := range recs {
		o := r.(*coordinator.OffsetRecord)
		keys, vals = append(keys, k.offset(o.Group, o.Topic, o.Partition)), append(vals, offsetValueString(o))
	}
	return keys, vals
}

// PendingBatches returns how many of group's batches s counts as not yet
// folded.
func PendingBatches(s *Store, group string) int {
	s.folds.mu.Lock()
	defer s.folds.mu.Unlock()
	return s.folds.pending[group]
}

// FoldWait returns how many batches group's next fold waits for, and
// whether a fold of the group is running.
func FoldWait(s *Store, group string) (every int, running bool) {
	s.folds.mu.Lock()
	defer s.folds.mu.Unlock()
	return max(s.cfg.foldEvery, s.folds.every[group]), s.folds.running[group]
}

// SetFoldHook makes s call hook before each of a fold's transactions,
// with its index (0: right after the fold read the group).
func SetFoldHook(s *Store, hook func(txn int)) { s.foldHook = hook }

// LockMirror holds m's lock until unlock, as a Follow waiting for it
// would; stoppingOpen reports, with the lock held, whether m has begun
// stopping its followers (Close) while a Follow would still start one.
func LockMirror(m *Mirror) (stoppingOpen func() bool, unlock func()) {
	m.mu.Lock()
	return func() bool { return m.ctx.Err() != nil && m.err == nil }, m.mu.Unlock
}
