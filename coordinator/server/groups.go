package server

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// groupEntry owns one group's core. Whoever holds mu owns the core: a
// connection's reader stepping a request, the group's timer ticking it, the
// store writer acknowledging its writes, or an admin request reading it.
// Groups never share a lock, so they run in parallel, and a group whose
// write is in flight keeps stepping.
type groupEntry struct {
	name string
	tm   *term // the term that loaded it

	mu sync.Mutex
	// g is the core; nil while the group is offline.
	g *coordinator.Group
	// gone: removed from the registry (deleted, or the server is
	// closing); a request that finds its entry gone looks it up again.
	gone bool
	// offline: the core is not loaded: the entry is new, or its core was
	// dropped because a store write failed or the core panicked. The
	// next request rebuilds it from the store (reload) once none of its
	// writes is in flight; offlineAt paces those attempts.
	offline   bool
	offlineAt time.Time
	// inc counts the cores the entry has had; a queued write of an
	// earlier core is skipped.
	inc uint64
	// issued numbers the writes queued for this group, durable is the
	// highest number up to which all are durable (or were dropped with
	// their core), and inflight counts writes not yet done. waiting are
	// replies held until the writes their Ready followed are durable,
	// and barriers the reads held likewise.
	issued, durable uint64
	// landed are writes above durable that are durable already, sorted:
	// offset writes of one group may be written in concurrent batches
	// and land out of order (writer.go); durable moves past them once
	// everything below them is durable too.
	landed   []uint64
	inflight int
	waiting  fifo[heldReply]
	barriers fifo[barrier]

	timer *time.Timer
	armed time.Time // the NextTick the timer is set for; zero if none

	// connsLeft counts the members that left a connection's list
	// (connloss.go: moved to another one, left the group, or lost their
	// tags with a core reloaded): while it is 0, no list of the group
	// needs a clean-up.
	connsLeft int

	// parked counts the requests handed to the core and not yet answered
	// (slot.enterGroup, slot.unpark), for MaxParkedPerGroup.
	parked atomic.Int32

	// Per-group gauges, nil with per-group metrics off and until the
	// group's first event; unownedStale says an event of the Ready being
	// performed may have changed unowned.
	groupGauges
	unowned      prometheus.Gauge
	unownedStale bool
}

// groupRegistry maps names to the groups of one term.
type groupRegistry struct {
	s      *Server
	tm     *term
	mu     sync.RWMutex
	m      map[string]*groupEntry
	closed bool
	// pending are the groups the store held when the term began that
	// its takeover has not installed yet (standby.go): a request for one
	// is answered COORDINATOR_LOAD_IN_PROGRESS, never given a new
	// group, until its state at the term's revision is in place.
	pending map[string]struct{}
}

func newGroupRegistry(s *Server, tm *term) *groupRegistry {
	return &groupRegistry{s: s, tm: tm, m: make(map[string]*groupEntry)}
}

// get returns the named group, creating its entry if create is set: a new
// entry is offline, and the first request that owns it loads whatever the
// store holds of the name (a deleted group's tombstone, so its epochs
// continue). When it returns nil, code is the error to answer with:
// GROUP_ID_NOT_FOUND for a missing group, COORDINATOR_LOAD_IN_PROGRESS
// for one the term's takeover has still to install,
// COORDINATOR_NOT_AVAILABLE at the group limit or at shutdown. With
// COORDINATOR_LOAD_IN_PROGRESS, installed, if not nil, is closed once
// another's install of the group ends, when get may be asked again.
func (r *groupRegistry) get(name string, create bool) (e *groupEntry, code int16, installed <-chan struct{}) {
	r.mu.RLock()
	e, closed := r.m[name], r.closed
	pending := e == nil && r.isPending(name) // a group is pending only until its entry is added
	r.mu.RUnlock()
	switch {
	case closed:
		return nil, shutdownCode, nil
	case e != nil:
		return e, 0, nil
	case pending:
		// The takeover has not installed it yet: install it now, ahead
		// of its turn, unless another is doing so already.
		to := r.tm.takeover.Load()
		if to == nil {
			// The takeover ended between the two loads, leaving the
			// group pending: the term ended first.
			return nil, kerr.CoordinatorLoadInProgress.Code, nil
		}
		if to.claim(name) {
			to.install(name)
			return r.get(name, create)
		}
		return nil, kerr.CoordinatorLoadInProgress.Code, to.installed(name)
	case !create:
		return nil, kerr.GroupIDNotFound.Code, nil
	}
	// A name not pending now never becomes so: the term's pending set
	// is fixed before it serves and only shrinks.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, shutdownCode, nil
	}
	if e := r.m[name]; e != nil {
		return e, 0, nil
	}
	if len(r.m) >= r.s.cfg.MaxGroups {
		r.s.m.limits.WithLabelValues("groups").Inc()
		r.s.log.Warn("group refused: group limit reached", zap.String("group", name), zap.Int("limit", r.s.cfg.MaxGroups))
		return nil, kerr.CoordinatorNotAvailable.Code, nil
	}
	e = r.add(name, nil)
	r.s.log.Debug("group created", zap.String("group", name))
	return e, 0, nil
}

// groupGauges are a group's per-group gauges, nil with per-group metrics
// off, and until the group's first event (Server.observe): a takeover
// installs thousands of groups while their members' first requests wait
// for them, and making a gauge hashes its label and takes the vector's
// lock (3% of the winner's CPU in BenchmarkTakeover's surge, when made at
// the install). A group restored has nothing new to show until an event;
// made at its install, its gauges read 0 until then.
type groupGauges struct{ generation, members prometheus.Gauge }

// add registers an entry for name with core g (nil: offline, loaded on
// first use), no longer pending; r.mu must be held.
func (r *groupRegistry) add(name string, g *coordinator.Group) *groupEntry {
	delete(r.pending, name)
	e := &groupEntry{name: name, tm: r.tm, g: g, offline: g == nil}
	r.m[name] = e
	r.s.m.groups.Set(float64(len(r.m)))
	return e
}

// lookup returns the named group if it exists.
func (r *groupRegistry) lookup(name string) *groupEntry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[name]
}

// missingCode is the answer for a group lookup did not find:
// COORDINATOR_LOAD_IN_PROGRESS while the term's takeover has still to
// install it, else GROUP_ID_NOT_FOUND.
func (r *groupRegistry) missingCode(name string) int16 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.isPending(name) {
		return kerr.CoordinatorLoadInProgress.Code
	}
	return kerr.GroupIDNotFound.Code
}

// isPending reports whether name is still to be installed by the term's
// takeover; r.mu must be held.
func (r *groupRegistry) isPending(name string) bool {
	_, ok := r.pending[name]
	return ok
}

// expect marks names as the groups the term's takeover is about to
// install, before the term serves anyone.
func (r *groupRegistry) expect(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = make(map[string]struct{}, len(names))
	if len(r.m) == 0 {
		// The entries to come, made room for at once rather than by
		// growing the table while requests wait for them.
		r.m = make(map[string]*groupEntry, len(names))
	}
	for _, n := range names {
		if r.m[n] == nil {
			r.pending[n] = struct{}{}
		}
	}
}

// pendingCount is the number of groups the term's takeover has still to
// install.
func (r *groupRegistry) pendingCount() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.pending)
}

// settle marks name as no longer pending without installing it: a
// deleted group's tombstone, which the first request that re-creates the
// group loads from the store.
func (r *groupRegistry) settle(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, name)
}

// remove drops e from the registry; e.mu must be held.
func (r *groupRegistry) remove(e *groupEntry) {
	e.gone = true
	r.s.stopTimer(e)
	r.mu.Lock()
	if r.m[e.name] == e {
		delete(r.m, e.name)
	}
	r.s.m.groups.Set(float64(len(r.m)))
	r.mu.Unlock()
	if r.s.cfg.PerGroupMetrics {
		r.s.m.generation.DeleteLabelValues(groupLabel(e.name))
		r.s.m.members.DeleteLabelValues(groupLabel(e.name))
		r.s.m.unowned.DeleteLabelValues(groupLabel(e.name))
	}
}

// snapshot returns every group, in no particular order.
func (r *groupRegistry) snapshot() []*groupEntry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	es := make([]*groupEntry, 0, len(r.m))
	for _, e := range r.m {
		es = append(es, e)
	}
	return es
}

// closeAll stops every group at shutdown: timers stop, and requests that
// reach a group from now on get COORDINATOR_NOT_AVAILABLE. Writes already
// queued still complete (Serve drains the writer), and their replies go
// out.
func (r *groupRegistry) closeAll() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	for _, e := range r.snapshot() {
		e.mu.Lock()
		e.gone = true
		r.s.stopTimer(e)
		e.mu.Unlock()
	}
}

// drop ends every group when the term ends: as closeAll, and every reply
// or read waiting for a write, and every request parked in a group, is
// answered with code at once (a deposed leader's writes fail anyway).
func (r *groupRegistry) drop(code int16) {
	r.closeAll()
	for _, e := range r.snapshot() {
		e.mu.Lock()
		r.s.answerWaiting(e, code, errGroupOffline)
		e.g = nil
		e.mu.Unlock()
	}
	r.s.answerParked(func(e *groupEntry) bool { return e.tm == r.tm }, code)
}

// newGroupRand returns the random source of a new core, from a secure
// seed: member IDs must not be guessable.
func newGroupRand() *rand.Rand {
	var seed [32]byte
	crand.Read(seed[:])
	return rand.New(rand.NewChaCha8(seed))
}
