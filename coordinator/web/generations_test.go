package web_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/web"
)

// generations stands in for the server's generation log, which is not in
// this package's reach: it watches one group's views and writes an entry
// per epoch, with the members before and after, the partitions that then
// changed owner, and how long they were unowned. It lets the browser test
// see the timeline follow a real group.
type generations struct {
	mu      sync.Mutex
	entries []web.LogEntry // oldest first
	epoch   int32
	members []string
	owners  map[coordinator.TopicPartition]coordinator.PartitionView
	// unownedSince is when each partition that is unowned now lost its
	// owner.
	unownedSince map[coordinator.TopicPartition]time.Time
	last         time.Time
}

// logSource serves a server's groups with the generations of one group.
type logSource struct {
	web.ServerSource
	group string
	gens  *generations
}

func (s logSource) GenerationLog(ctx context.Context, group string, limit int) ([]web.LogEntry, error) {
	if group != s.group {
		return nil, web.ErrLogNotAvailable
	}
	return s.gens.newestFirst(limit), nil
}

// watch records the group's generations until ctx ends.
func (r *generations) watch(ctx context.Context, src web.Source, group string) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if v, err := src.GroupView(group); err == nil {
			r.observe(v, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r *generations) observe(v coordinator.GroupView, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owners == nil {
		r.owners = make(map[coordinator.TopicPartition]coordinator.PartitionView)
		r.unownedSince = make(map[coordinator.TopicPartition]time.Time)
	}
	var members []string
	for _, m := range v.Members {
		members = append(members, m.ID)
	}
	if v.Epoch != r.epoch {
		e := web.LogEntry{Epoch: v.Epoch, Time: now.UTC(), MembersBefore: r.members, MembersAfter: members,
			Handoff: &web.Handoff{}}
		joined := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return slices.Contains(r.members, m) })
		left := slices.DeleteFunc(slices.Clone(r.members), func(m string) bool { return slices.Contains(members, m) })
		switch {
		case len(joined) == 1:
			e.Reason, e.Detail = "member_joined", fmt.Sprintf("member %s joined", joined[0])
		case len(joined) > 1:
			e.Reason, e.Detail = "member_joined", fmt.Sprintf("%d members joined", len(joined))
		case len(left) > 0:
			e.Reason, e.Detail = "member_left", fmt.Sprintf("member %s left", strings.Join(left, ", "))
		}
		if e.Reason == "" {
			e.Reason = "rebalance"
		}
		e.MovesMin = fewestMoves(v, r.owners)
		if n := len(r.entries); n > 0 && len(r.entries[n-1].Moves) == 0 {
			prev := &r.entries[n-1]
			prev.Detail += "; superseded before any partition moved"
			prev.MovesMin, prev.Handoff = 0, nil
		}
		r.entries = append(r.entries, e)
		r.epoch, r.members = v.Epoch, members
	}
	if len(r.entries) == 0 {
		return
	}
	cur := &r.entries[len(r.entries)-1]
	for _, p := range v.Partitions {
		tp := coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		was, seen := r.owners[tp]
		if p.Owner == "" {
			if _, ok := r.unownedSince[tp]; !ok {
				r.unownedSince[tp] = now
			}
			if !r.last.IsZero() {
				cur.Handoff.UnownedPartitionSeconds += now.Sub(r.last).Seconds()
			}
			continue
		}
		if since, ok := r.unownedSince[tp]; ok {
			cur.Handoff.MaxUnownedSeconds = max(cur.Handoff.MaxUnownedSeconds, now.Sub(since).Seconds())
			delete(r.unownedSince, tp)
		}
		if p.Owner != was.Owner {
			from, old := "", int64(0)
			if seen {
				from, old = was.Owner, int64(was.Token)
			}
			cur.Moves = append(cur.Moves, web.Move{Topic: p.Topic, Partition: p.Partition, From: from, To: p.Owner,
				OldToken: old, NewToken: int64(p.Token)})
		}
		r.owners[tp] = p
	}
	cur.Handoff.Done = v.Unowned == 0 && v.State == "Stable"
	r.last = now
}

// fewestMoves is how many partitions must change owner to balance v's
// partitions over its members, from the owners before: those of members
// gone, and what the others hold beyond their share.
func fewestMoves(v coordinator.GroupView, before map[coordinator.TopicPartition]coordinator.PartitionView) int {
	if len(v.Members) == 0 {
		return 0
	}
	held := make(map[string]int)
	for _, m := range v.Members {
		held[m.ID] = 0
	}
	moves := 0
	for _, p := range before {
		if _, ok := held[p.Owner]; ok {
			held[p.Owner]++
		} else if p.Owner != "" {
			moves++
		}
	}
	counts := slices.Sorted(func(yield func(int) bool) {
		for _, n := range held {
			if !yield(n) {
				return
			}
		}
	})
	slices.Reverse(counts)
	share, extra := len(v.Partitions)/len(counts), len(v.Partitions)%len(counts)
	for i, n := range counts {
		limit := share
		if i < extra {
			limit++ // the fullest members keep one more
		}
		moves += max(n-limit, 0)
	}
	return moves
}

func (r *generations) newestFirst(limit int) []web.LogEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []web.LogEntry
	for i := len(r.entries) - 1; i >= 0 && len(out) < limit; i-- {
		e := r.entries[i]
		e.Moves = slices.Clone(e.Moves)
		if e.Handoff != nil {
			h := *e.Handoff
			e.Handoff = &h
		}
		out = append(out, e)
	}
	return out
}
