package coordinator

import (
	"slices"
	"sync"
)

// TopicID is a topic's UUID, as Kafka's Metadata v10+ and KIP-848
// assignments carry it.
type TopicID = [16]byte

// Topics resolves the topics a group may be assigned. Partition counts are
// fixed once a topic exists: tenure's topics are virtual work shards.
type Topics interface {
	// Lookup returns the ID and partition count of the named topic.
	Lookup(name string) (id TopicID, partitions int32, ok bool)
	// Name returns the name of the topic with the given ID.
	Name(id TopicID) (name string, ok bool)
}

// StaticTopics is a Topics backed by a map, safe for concurrent use. The
// simulator and tests use it; the server keeps its own registry.
type StaticTopics struct {
	mu     sync.RWMutex
	byName map[string]staticTopic
	byID   map[TopicID]string
}

type staticTopic struct {
	id         TopicID
	partitions int32
}

// NewStaticTopics returns an empty topic set.
func NewStaticTopics() *StaticTopics {
	return &StaticTopics{byName: make(map[string]staticTopic), byID: make(map[TopicID]string)}
}

// Add adds (or replaces) a topic.
func (t *StaticTopics) Add(name string, id TopicID, partitions int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byName[name]; ok {
		delete(t.byID, old.id)
	}
	t.byName[name] = staticTopic{id, partitions}
	t.byID[id] = name
}

// Remove deletes a topic; an unknown name is ignored. Tell the groups
// (input TopicsDeleted).
func (t *StaticTopics) Remove(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byName[name]; ok {
		delete(t.byID, old.id)
		delete(t.byName, name)
	}
}

// Lookup implements Topics.
func (t *StaticTopics) Lookup(name string) (TopicID, int32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	st, ok := t.byName[name]
	return st.id, st.partitions, ok
}

// Name implements Topics.
func (t *StaticTopics) Name(id TopicID) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.byID[id]
	return n, ok
}

// Names returns the topic names, sorted.
func (t *StaticTopics) Names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := make([]string, 0, len(t.byName))
	for n := range t.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
