package server

import (
	"runtime"
	"time"

	"go.uber.org/zap"
)

// A standby holds every group it may take over, so its node's heap is
// large (about 4 KB a member: DESIGN.md), and a garbage collection
// marks all of it. When a takeover begins, every member of the dead
// node's groups comes back within a second or two, and the requests of
// that surge allocate; whenever the heap then reaches the collector's
// target, a collection runs in the middle of the surge: one cycle of a
// 600 MB heap took a third of the winner's CPU in the seconds that
// decide how soon its groups are served (BenchmarkTakeover/one-leader,
// 10,000 groups of 16). A peer probed down is a takeover to come, a
// lease's TTL later; collecting then, while the node waits for the
// election, leaves the surge a whole cycle's worth of allocation before
// the next collection.

// collectEvery is the least time between two collections ahead of a
// takeover: a peer whose probes flap between down and up must not keep
// the node collecting back to back (a collection of a large standby's
// heap costs a core-second or two).
const collectEvery = time.Minute

// readyForTakeover gives the standby's copies the offsets of now
// (standby_refresh.go) and then runs a garbage collection, in the
// background, if this node keeps a standby and did not start them within
// collectEvery: a peer was probed down.
func (s *Server) readyForTakeover() {
	if s.standby == nil {
		return
	}
	now := time.Now()
	s.collectMu.Lock()
	due := s.collectedAt.IsZero() || now.Sub(s.collectedAt) >= collectEvery
	if due {
		s.collectedAt = now
	}
	s.collectMu.Unlock()
	if !due {
		return
	}
	go func() {
		// The refresh first: what it leaves to collect is collected too.
		refreshed := s.standby.refreshOffsets()
		refreshedAt := time.Now()
		runtime.GC()
		s.log.Info("readied the standby for a takeover: offsets given to its copies, garbage collected",
			zap.Int("copies_refreshed", refreshed), zap.Duration("refresh_took", refreshedAt.Sub(now)),
			zap.Duration("gc_took", time.Since(refreshedAt)))
	}()
}
