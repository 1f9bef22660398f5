package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// topic is one virtual topic. It is immutable once created: the partition
// count never changes and the ID is generated once.
type topic struct {
	name       string
	id         coordinator.TopicID
	partitions int32
}

// topicRegistry holds the server's virtual topics. It implements
// coordinator.Topics and is safe for concurrent use.
type topicRegistry struct {
	maxTopics     int
	maxPartitions int32

	// changeMu serializes the changes of the set of topics, which wait
	// for the store: creations, deletions and refreshes. A refresh that
	// read the store before a creation or deletion landed must not undo
	// it, nor a creation bring back a topic being deleted.
	changeMu sync.Mutex
	mu       sync.RWMutex
	byName   map[string]*topic
	byID     map[coordinator.TopicID]*topic
	// gen counts the changes of byName, so that a group rebuilt ahead of
	// time (standby.go) knows whether it resolved its topics against
	// the topics of now.
	gen atomic.Uint64
}

var _ coordinator.Topics = (*topicRegistry)(nil)

func newTopicRegistry(maxTopics int, maxPartitions int32) *topicRegistry {
	return &topicRegistry{
		maxTopics:     maxTopics,
		maxPartitions: maxPartitions,
		byName:        make(map[string]*topic),
		byID:          make(map[coordinator.TopicID]*topic),
	}
}

// Lookup implements coordinator.Topics.
func (r *topicRegistry) Lookup(name string) (coordinator.TopicID, int32, bool) {
	r.mu.RLock()
	t := r.byName[name]
	r.mu.RUnlock()
	if t == nil {
		return coordinator.TopicID{}, 0, false
	}
	return t.id, t.partitions, true
}

// Name implements coordinator.Topics.
func (r *topicRegistry) Name(id coordinator.TopicID) (string, bool) {
	r.mu.RLock()
	t := r.byID[id]
	r.mu.RUnlock()
	if t == nil {
		return "", false
	}
	return t.name, true
}

// Names returns the topic names, sorted.
func (r *topicRegistry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.byName))
}

// Len returns the number of topics.
func (r *topicRegistry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byName)
}

func (r *topicRegistry) get(name string) *topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

func (r *topicRegistry) getID(id coordinator.TopicID) *topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

// Errors of topic creation; each maps to the Kafka code topicCode returns.
var (
	errTopicName     = errors.New("server: invalid topic name")
	errTopicExists   = errors.New("server: topic already exists")
	errTopicLimit    = errors.New("server: topic limit reached")
	errPartitions    = errors.New("server: invalid partition count")
	errPartitionsMax = errors.New("server: partition count above the limit")
	errTopicStore    = errors.New("server: the topic could not be stored")
)

func topicCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errTopicName):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, errTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, errTopicLimit):
		return kerr.PolicyViolation.Code
	case errors.Is(err, errPartitions), errors.Is(err, errPartitionsMax):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, errTopicStore):
		// Retriable: the client asks again, and the store may be back.
		return kerr.KafkaStorageError.Code
	}
	return kerr.UnknownServerError.Code
}

// validate checks a creation without performing it.
func (r *topicRegistry) validate(name string, partitions int32) error {
	if err := r.check(name, partitions); err != nil {
		return err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.byName[name] != nil {
		return errTopicExists
	}
	if len(r.byName) >= r.maxTopics {
		return errTopicLimit
	}
	return nil
}

// create adds a topic: the ID is drawn, persist makes the topic durable
// (so that it keeps its ID across restarts) and returns it as stored (with
// another node's ID if that node created the name first), and only then
// is the topic visible, to clients and to groups. If the topic exists,
// create returns it with errTopicExists. Creations are serialized; lookups
// go on.
func (r *topicRegistry) create(name string, partitions int32, persist func(*topic) (*topic, error)) (*topic, error) {
	if err := r.check(name, partitions); err != nil {
		return nil, err
	}
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	r.mu.RLock()
	existing, n := r.byName[name], len(r.byName)
	r.mu.RUnlock()
	switch {
	case existing != nil:
		return existing, errTopicExists
	case n >= r.maxTopics:
		return nil, errTopicLimit
	}
	t := &topic{name: name, partitions: partitions}
	for {
		// A random version-4 UUID; a zero or colliding ID (never seen in
		// practice) is drawn again, since zero means "no ID" in Kafka.
		rand.Read(t.id[:])
		t.id[6] = t.id[6]&0x0f | 0x40
		t.id[8] = t.id[8]&0x3f | 0x80
		if r.getID(t.id) == nil {
			break
		}
	}
	stored, err := persist(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTopicStore, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byID[stored.id]; !dup {
		r.byName[name] = stored
		r.gen.Add(1)
		r.byID[stored.id] = stored
	}
	if stored.id != t.id {
		// Another node created it first (refresh may have added it
		// meanwhile): it exists, with its ID.
		return r.byName[name], errTopicExists
	}
	return r.byName[name], nil
}

// check applies the rules of a creation that need no lookup.
func (r *topicRegistry) check(name string, partitions int32) error {
	switch {
	case !validTopicName(name):
		return errTopicName
	case partitions <= 0:
		return errPartitions
	case partitions > r.maxPartitions:
		return errPartitionsMax
	}
	return nil
}

// restore adds a topic loaded from the store, with its ID; a topic it
// already holds is left as it is. It reports whether the topic is new.
// r.changeMu must be held.
func (r *topicRegistry) restore(rec *coordinator.TopicRecord) (bool, error) {
	if !validTopicName(rec.Name) || rec.Partitions <= 0 || rec.ID == (coordinator.TopicID{}) {
		return false, fmt.Errorf("invalid topic record: %d partitions, ID %x", rec.Partitions, rec.ID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.byName[rec.Name]; ok {
		if t.id != rec.ID || t.partitions != rec.Partitions {
			return false, fmt.Errorf("topic %q is held with ID %x and %d partitions, the store says %x and %d",
				rec.Name, t.id, t.partitions, rec.ID, rec.Partitions)
		}
		return false, nil
	}
	if _, dup := r.byID[rec.ID]; dup {
		return false, fmt.Errorf("topic ID %x is taken", rec.ID)
	}
	t := &topic{name: rec.Name, id: rec.ID, partitions: rec.Partitions}
	r.byName[t.name] = t
	r.gen.Add(1)
	r.byID[t.id] = t
	return true, nil
}

// hide removes ts: lookups no longer find them. r.changeMu must be held.
func (r *topicRegistry) hide(ts []*topic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		if r.byName[t.name] == t {
			delete(r.byName, t.name)
			r.gen.Add(1)
			delete(r.byID, t.id)
		}
	}
}

// unhide puts back topics hide removed, unless their name or ID has been
// taken meanwhile. r.changeMu must be held.
func (r *topicRegistry) unhide(ts []*topic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		if r.byName[t.name] == nil && r.byID[t.id] == nil {
			r.byName[t.name] = t
			r.gen.Add(1)
			r.byID[t.id] = t
		}
	}
}

// stale returns the topics held that recs, every topic of the store, no
// longer hold: deleted, or deleted and created again with another ID.
// r.changeMu must be held.
func (r *topicRegistry) stale(recs []*coordinator.TopicRecord) []*topic {
	stored := make(map[string]coordinator.TopicID, len(recs))
	for _, rec := range recs {
		stored[rec.Name] = rec.ID
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*topic
	for name, t := range r.byName {
		if id, ok := stored[name]; !ok || id != t.id {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *topic) int { return strings.Compare(a.name, b.name) })
	return out
}

// record is t's durable form.
func (t *topic) record() *coordinator.TopicRecord {
	return &coordinator.TopicRecord{Name: t.name, ID: t.id, Partitions: t.partitions}
}

// metadataPartitions lists the topic's partitions for Metadata, led by
// the nodes of live, spread by partitionLeader. It is built per request
// rather than kept, so that a topic costs the same few bytes whatever its
// partition count.
func (t *topic) metadataPartitions(live []int32) []kmsg.MetadataResponseTopicPartition {
	replicas := make(map[int32][]int32, len(live))
	for _, id := range live {
		replicas[id] = []int32{id}
	}
	ps := make([]kmsg.MetadataResponseTopicPartition, t.partitions)
	for i := range ps {
		p := &ps[i]
		p.Default()
		p.Partition = int32(i)
		p.Leader = partitionLeader(t.name, int32(i), live)
		p.LeaderEpoch = 0
		p.Replicas = replicas[p.Leader]
		p.ISR = p.Replicas
	}
	return ps
}

// validTopicName applies Kafka's rule: 1 to 249 characters of ASCII
// letters, digits, '.', '_' and '-', and neither "." nor "..".
func validTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// topicsChanged tells every group that topics were created, so KIP-848
// groups assign the new partitions.
func (s *Server) topicsChanged(now time.Time) {
	// A term not yet loaded loads the topics first.
	for _, tm := range s.ledTerms(now) {
		for _, e := range tm.groups.snapshot() {
			e.mu.Lock()
			if !e.gone && !e.offline && s.stepCore(e, nil, now, coordinator.TopicsChanged{}) {
				s.performReady(e, nil)
			}
			e.mu.Unlock()
		}
	}
}
