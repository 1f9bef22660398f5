package server

import (
	"crypto/rand"
	"errors"
	"maps"
	"slices"
	"sync"

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

	mu     sync.RWMutex
	byName map[string]*topic
	byID   map[coordinator.TopicID]*topic
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
	}
	return kerr.UnknownServerError.Code
}

// validate checks a creation without performing it.
func (r *topicRegistry) validate(name string, partitions int32) error {
	if !validTopicName(name) {
		return errTopicName
	}
	if partitions <= 0 {
		return errPartitions
	}
	if partitions > r.maxPartitions {
		return errPartitionsMax
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

// create adds a topic. If it exists, create returns it with
// errTopicExists.
func (r *topicRegistry) create(name string, partitions int32) (*topic, error) {
	if !validTopicName(name) {
		return nil, errTopicName
	}
	if partitions <= 0 {
		return nil, errPartitions
	}
	if partitions > r.maxPartitions {
		return nil, errPartitionsMax
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.byName[name]; t != nil {
		return t, errTopicExists
	}
	if len(r.byName) >= r.maxTopics {
		return nil, errTopicLimit
	}
	t := &topic{name: name, partitions: partitions}
	for {
		// A random version-4 UUID; a zero or colliding ID (never seen in
		// practice) is drawn again, since zero means "no ID" in Kafka.
		rand.Read(t.id[:])
		t.id[6] = t.id[6]&0x0f | 0x40
		t.id[8] = t.id[8]&0x3f | 0x80
		if _, dup := r.byID[t.id]; !dup {
			break
		}
	}
	r.byName[name] = t
	r.byID[t.id] = t
	return t, nil
}

// metadataPartitions lists the topic's partitions for Metadata, all led by
// node. It is built per request rather than kept, so that a topic costs
// the same few bytes whatever its partition count.
func (t *topic) metadataPartitions(node int32) []kmsg.MetadataResponseTopicPartition {
	replicas := []int32{node}
	ps := make([]kmsg.MetadataResponseTopicPartition, t.partitions)
	for i := range ps {
		p := &ps[i]
		p.Default()
		p.Partition = int32(i)
		p.Leader = node
		p.LeaderEpoch = 0
		p.Replicas = replicas
		p.ISR = replicas
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
