package server

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/coordinator"
)

// Read-only views of the groups for people (the status page of `tenure
// serve --http`). Each group is read while the server owns it, like a
// describe request, and what is shown is durable: a view waits for the
// group's writes in flight, so it never shows a decision the store may
// not hold.

// Errors of the views, for the caller to tell apart with errors.Is.
var (
	// ErrNotLeading: this node does not coordinate groups now; Leadership
	// says which node does.
	ErrNotLeading = errors.New("server: this node does not lead")
	// ErrGroupNotFound: no group of that name.
	ErrGroupNotFound = errors.New("server: group not found")
	// ErrGroupUnavailable: the group is offline (a store write failed
	// and it has not been reloaded yet) or went offline while the view
	// waited for its writes.
	ErrGroupUnavailable = errors.New("server: group unavailable")
)

// Leadership says whether this node coordinates groups and, if not,
// which node does.
type Leadership struct {
	// Self is this node as clients reach it.
	Self Node
	// Leading is set while this node coordinates groups: every group, or
	// with shards those of at least one shard.
	Leading bool
	// Leader is the node to go to when this one does not lead;
	// LeaderKnown is false when no node leads (an election is under way)
	// or this node cannot tell. With shards no node leads: each shard's
	// owner coordinates its groups, and LeaderKnown is false.
	Leader      Node
	LeaderKnown bool
	// Shards is set when the groups are spread over shards.
	Shards *ShardStatus
}

// ShardStatus is what a node of a sharded set coordinates.
type ShardStatus struct {
	// Count is the set's number of shards (tenure serve --shards).
	Count int
	// Coordinating lists, in order, the shards whose valid terms this
	// node holds: the shards whose groups it coordinates now.
	Coordinating []int
}

// Leadership reports whether this node coordinates groups now, and which
// node does if it does not; with shards, which shards it coordinates.
// Call it once Serve has started.
func (s *Server) Leadership() Leadership {
	now := time.Now()
	if s.sharded != nil {
		st := &ShardStatus{Count: len(s.shards), Coordinating: []int{}}
		for i := range s.shards {
			if s.shardTerm(i, now) != nil {
				st.Coordinating = append(st.Coordinating, i)
			}
		}
		return Leadership{Self: s.self(), Leading: len(st.Coordinating) > 0, Shards: st}
	}
	l := Leadership{Self: s.self(), Leading: len(s.ledTerms(now)) > 0}
	l.Leader, l.LeaderKnown = s.leaderNode(now)
	return l
}

// Groups returns every group, sorted by name, as the group list of the
// status page shows them. A group that is offline, or whose writes in
// flight fail, is left out. On a node that does not lead it returns
// ErrNotLeading.
func (s *Server) Groups() ([]coordinator.GroupSummary, error) {
	terms := s.ledTerms(time.Now())
	if len(terms) == 0 {
		return nil, ErrNotLeading
	}
	type read struct {
		tm   *term
		sum  coordinator.GroupSummary
		wait <-chan error
	}
	var reads []read
	for _, tm := range terms {
		for _, e := range tm.groups.snapshot() {
			e.mu.Lock()
			if e.gone || e.offline || e.g.Deleted() {
				e.mu.Unlock()
				continue
			}
			reads = append(reads, read{tm, e.g.Summary(), s.waitDurable(e)})
			e.mu.Unlock()
		}
	}
	out := make([]coordinator.GroupSummary, 0, len(reads))
	now := time.Now()
	for _, r := range reads {
		if r.wait != nil && <-r.wait != nil {
			continue
		}
		if !r.tm.valid(now) {
			continue // deposed while the reads waited
		}
		out = append(out, r.sum)
	}
	if len(out) == 0 && len(s.ledTerms(now)) == 0 {
		return nil, ErrNotLeading
	}
	slices.SortFunc(out, func(a, b coordinator.GroupSummary) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// GroupView returns the named group as the status page shows it
// (coordinator.Group.View), or ErrNotLeading, ErrGroupNotFound or
// ErrGroupUnavailable. An offline group is reloaded from the store first,
// as a describe request would.
func (s *Server) GroupView(name string) (coordinator.GroupView, error) {
	var (
		v     coordinator.GroupView
		found bool
	)
	now := time.Now()
	code := s.withGroup(name, now, func(g *coordinator.Group) {
		if !g.Deleted() {
			v, found = g.View(now), true
		}
	})
	switch {
	case code == kerr.GroupIDNotFound.Code:
		return v, ErrGroupNotFound
	case code == kerr.NotCoordinator.Code || code != 0 && s.termFor(name, time.Now()) == nil:
		l, ok := s.coordinatorNode(name, time.Now())
		return v, &NotCoordinatorError{Leader: l, HasLeader: ok}
	case code != 0:
		return v, ErrGroupUnavailable
	case !found:
		return v, ErrGroupNotFound
	}
	return v, nil
}
