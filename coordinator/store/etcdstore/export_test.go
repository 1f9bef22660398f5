package etcdstore

import "github.com/tenure-dev/tenure/coordinator"

// PauseMirror ends m's watch and keeps it from starting again until
// resume is called, as an etcd out of reach would: the mirror falls
// behind the writes made meanwhile.
func PauseMirror(m *Mirror) (resume func()) {
	hold := make(chan struct{})
	m.mu.Lock()
	m.hold = hold
	stop := m.breakWatch
	m.mu.Unlock()
	stop()
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
	c.mu.Lock()
	c.inFlight += maxCombinedInFlight
	c.mu.Unlock()
	queued = func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue)
	}
	release = func() {
		c.mu.Lock()
		c.inFlight -= maxCombinedInFlight
		c.sendLocked()
		c.mu.Unlock()
	}
	return queued, release
}

// PlannedOffsetOps returns the keys and values that Persist writes for
// recs (of offsets only) under prefix, in one transaction.
func PlannedOffsetOps(prefix string, recs []coordinator.Record) (keys, vals []string) {
	for _, o := range newKeys(prefix, 0, 1).plan(recs, 1<<20, 1<<30)[0].ops {
		keys, vals = append(keys, o.key), append(vals, o.val)
	}
	return keys, vals
}
