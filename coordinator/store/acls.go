package store

import (
	"context"
	"slices"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// ACLStore keeps the authorizer's access control lists (Kafka's ACLs).
// Every node of an HA set shares one (etcdstore.ACLs), so a binding
// created through any node applies on all. Both stores implement it.
type ACLStore interface {
	// CreateACLs stores bs; a binding stored already stays as it is, so
	// creation is idempotent, as in Kafka. The bindings are valid
	// (acl.Binding.Validate).
	CreateACLs(ctx context.Context, bs []acl.Binding) error
	// DeleteACLs deletes every stored binding that one of filters
	// matches and returns, for each filter, the bindings it matched,
	// sorted (acl.Compare); a binding two filters match is deleted once
	// and reported by both.
	DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error)
	// LoadACLs returns every stored binding, sorted (acl.Compare).
	LoadACLs(ctx context.Context) ([]acl.Binding, error)
}

// ACLWatcher is implemented by an ACLStore that other processes write to
// as well (the etcd store). WatchACLs signals on the returned channel
// once the watch is in place (a change made before it went unseen), after
// the stored bindings change, by anyone, and after the watch had to
// restart (it may have missed changes); the caller then loads them. The
// channel is closed once ctx ends. Signals coalesce: one may stand for
// many changes.
type ACLWatcher interface {
	WatchACLs(ctx context.Context) <-chan struct{}
}

// MatchACLs is the reference semantics of DeleteACLs over stored: which
// bindings each filter matches (sorted), and the set of all of them.
// Stores use it so that both delete alike.
func MatchACLs(stored []acl.Binding, filters []acl.Filter) ([][]acl.Binding, map[acl.Binding]bool) {
	matched := make([][]acl.Binding, len(filters))
	all := make(map[acl.Binding]bool)
	for i := range filters {
		for j := range stored {
			if filters[i].Matches(&stored[j]) {
				matched[i] = append(matched[i], stored[j])
				all[stored[j]] = true
			}
		}
		slices.SortFunc(matched[i], acl.Compare)
	}
	return matched, all
}

// CreateACLs implements ACLStore.
func (m *Memory) CreateACLs(_ context.Context, bs []acl.Binding) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.acls == nil {
		m.acls = make(map[acl.Binding]bool)
	}
	for _, b := range bs {
		m.acls[b] = true
	}
	return nil
}

// DeleteACLs implements ACLStore.
func (m *Memory) DeleteACLs(_ context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	matched, all := MatchACLs(m.sortedACLs(), filters)
	for b := range all {
		delete(m.acls, b)
	}
	return matched, nil
}

// LoadACLs implements ACLStore.
func (m *Memory) LoadACLs(context.Context) ([]acl.Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return m.sortedACLs(), nil
}

// sortedACLs returns the stored bindings, sorted; m.mu must be held.
func (m *Memory) sortedACLs() []acl.Binding {
	out := make([]acl.Binding, 0, len(m.acls))
	for b := range m.acls {
		out = append(out, b)
	}
	slices.SortFunc(out, acl.Compare)
	return out
}
