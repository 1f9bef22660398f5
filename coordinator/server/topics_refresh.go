package server

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// topicRefreshPause spaces the reloads that requests naming an unknown
// topic cause, so a client asking again and again for a topic that does
// not exist costs at most one etcd read per pause, whatever its rate.
const topicRefreshPause = 200 * time.Millisecond

// topicMisses coalesces the topic reloads of an HA node's misses: every
// miss waits for a reload that starts after it arrived (so a topic another
// node created before the request was sent is found), and all the misses
// that arrive while one reload waits for its turn share it.
type topicMisses struct {
	mu        sync.Mutex
	pending   *topicReload // not started yet; joined by new misses
	lastStart time.Time
}

// topicReload is one reload of the topic store; done closes when it ends.
type topicReload struct {
	done chan struct{}
}

// knowTopics makes sure, on a node of an HA set, that the named topics
// this node does not hold yet are looked up in the topic store before a
// request about them is answered: another node may have created them a
// moment ago (a client creates a topic through one node and asks another,
// or commits through the leader). Only a miss reads the store, and waits
// at most topicRefreshPause plus the read; it reports whether it waited
// (the caller's clock reading is then stale).
func (s *Server) knowTopics(names []string, ids [][16]byte) bool {
	if s.cfg.Cluster == nil || s.holdsTopics(names, ids) {
		return false
	}
	<-s.topicMisses.join(s).done
	return true
}

// holdsTopics reports whether every named topic is held by this node.
func (s *Server) holdsTopics(names []string, ids [][16]byte) bool {
	for _, n := range names {
		if s.topics.get(n) == nil {
			return false
		}
	}
	for _, id := range ids {
		if s.topics.getID(id) == nil {
			return false
		}
	}
	return true
}

// join returns the reload a miss arriving now waits for: the pending one,
// or a new one that starts once topicRefreshPause has passed since the
// last start.
func (m *topicMisses) join(s *Server) *topicReload {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending != nil {
		return m.pending
	}
	r := &topicReload{done: make(chan struct{})}
	m.pending = r
	wait := time.Until(m.lastStart.Add(topicRefreshPause))
	go func() {
		defer close(r.done)
		if wait > 0 {
			time.Sleep(wait)
		}
		m.mu.Lock()
		m.pending = nil
		m.lastStart = time.Now()
		m.mu.Unlock()
		added, err := s.refreshTopics(s.storeCtx)
		switch {
		case err != nil:
			s.log.Warn("topics could not be refreshed", zap.Error(err))
		case added:
			s.topicsChanged(time.Now())
		}
	}()
	return r
}
