package server

import (
	"slices"
	"time"
)

// A peer probed down is a takeover to come, a lease's TTL later
// (standby_gc.go), and its groups stop changing then: nobody commits to
// a dead coordinator. A fleet that commits never leaves its groups quiet
// long enough to be rebuilt again (standbyOffsetsQuiet), so a takeover
// finds nearly every copy current but for its offsets, and gave each its
// offsets of now as it installed it: most of the winner's CPU in the
// seconds that decide how soon the groups are served
// (BenchmarkTakeover/one-leader with -e2e.takeover-commits). While the
// node waits for the election, refreshOffsets gives the copies those
// offsets ahead, and the takeover resumes them as they are.

// refreshOffsets gives every copy of a shard this node does not lead
// whose records changed in their offsets alone since it was rebuilt the
// offsets of now, and returns how many it gave. A copy is taken out of
// the standby while it is given them: a takeover prepared meanwhile
// restores that group from the mirror's records instead.
func (sb *standby) refreshOffsets() int {
	sb.mu.Lock()
	var shards []int
	for _, b := range sb.built {
		if !slices.Contains(shards, b.shard) {
			shards = append(shards, b.shard)
		}
	}
	sb.mu.Unlock()
	n := 0
	for _, shard := range shards {
		if sb.led(shard, time.Now()) {
			continue
		}
		// Versions first, then states: a state version read after a
		// version is at least the state at that version, so a copy whose
		// state is that state was current but for its offsets then.
		versions := sb.src.Versions(shard)
		states := sb.src.StateVersions(shard)
		gen := sb.s.topics.gen.Load()
		sb.mu.Lock()
		var due []string
		for name, b := range sb.built {
			if b.shard == shard && b.g != nil && b.topics == gen && b.version != versions[name] && b.state == states[name] {
				due = append(due, name)
			}
		}
		sb.mu.Unlock()
		for _, name := range due {
			if sb.led(shard, time.Now()) {
				break // taken over already: the install gives the rest their offsets
			}
			if sb.refreshOne(name, versions[name]) {
				n++
			}
		}
	}
	return n
}

// refreshOne gives name's copy the offsets of now if its records are
// still those of version, and reports whether it did.
func (sb *standby) refreshOne(name string, version uint64) bool {
	sb.mu.Lock()
	b := sb.built[name]
	if b == nil || b.g == nil {
		sb.mu.Unlock()
		return false
	}
	delete(sb.built, name)
	sb.mu.Unlock()
	recs, v, err := sb.src.Group(name)
	ok := err == nil && v == version && !tombstone(recs) && b.g.RestoreOffsets(recs) == nil
	if ok {
		b.version = v
		// The topics the group names now include its offsets'.
		b.gone = b.g.UnknownTopics()
	}
	// Back, unless the pass rebuilt it meanwhile; a copy not given its
	// offsets is as it was (RestoreOffsets fails changing nothing), and
	// the takeover checks its version as it does any copy's.
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if _, rebuilt := sb.built[name]; !rebuilt {
		sb.built[name] = b
	}
	return ok
}
