package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestTakeoverCatchUp: a term taken over from the standby reads the
// topics while the standby catches up, not one after the other (here each
// waits up to a second for the other to be under way at the same time,
// which one after the other never is), and the standby catches up to the
// term's handover revision, so that nothing reads the store's revision
// first; a term that does not know one asks for 0, the store's revision
// at the call.
func TestTakeoverCatchUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handover int64
	}{{"handover revision", 42}, {"no handover revision", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			meet := &meeting{both: make(chan struct{})}
			src := &meetingSource{recordsSource: recordsSource{recs: map[string][]coordinator.Record{
				"g": {&coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 3}},
			}}, meet: meet}
			set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}}}
			topics := &meetingTopics{TopicStore: set.shared, meet: meet}
			na := set.node(0)
			a := startServer(t, func(c *Config) {
				c.Store = nil
				c.TopicStore = topics
				c.Cluster = na
				c.TopicRefresh = time.Hour
				c.Standby = src
			})
			set.advertise(a)
			topics.armed.Store(true)
			src.armed.Store(true)
			set.setLeader(0)
			ft := newFakeTerm(set.shared)
			var term Term = ft
			if tc.handover > 0 {
				term = &handoverTerm{fakeTerm: ft, rev: tc.handover}
			}
			na.terms <- term
			eventually(t, 10*time.Second, "the term to lead", func() bool { return a.lead.Load() != nil })
			if !src.met.Load() || !topics.met.Load() {
				t.Fatalf("the topics' read met the standby's catch-up: %v, and the other way: %v; want both", topics.met.Load(), src.met.Load())
			}
			if got := src.asked.Load(); got != tc.handover {
				t.Fatalf("the standby caught up to revision %d, want %d", got, tc.handover)
			}
		})
	}
}

// handoverTerm is a fakeTerm that knows its handover revision.
type handoverTerm struct {
	*fakeTerm
	rev int64
}

func (t *handoverTerm) HandoverRevision() int64 { return t.rev }

// meeting is where two calls wait, each up to a second, for the other to
// be under way at the same time.
type meeting struct {
	mu   sync.Mutex
	in   int
	once sync.Once
	both chan struct{}
}

// attend waits for the other call and reports whether it came.
func (m *meeting) attend() bool {
	m.mu.Lock()
	if m.in++; m.in == 2 {
		m.once.Do(func() { close(m.both) })
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.in--
		m.mu.Unlock()
	}()
	select {
	case <-m.both:
		return true
	case <-time.After(time.Second):
		return false
	}
}

// meetingSource is a recordsSource whose catch-up, once armed, attends
// the meeting and records the revision it was asked for.
type meetingSource struct {
	recordsSource
	meet       *meeting
	armed, met atomic.Bool
	asked      atomic.Int64
}

func (s *meetingSource) SyncTo(ctx context.Context, shard int, rev int64) (int64, error) {
	if s.armed.Load() {
		s.asked.Store(rev)
		s.met.Store(s.meet.attend())
	}
	return s.recordsSource.SyncTo(ctx, shard, rev)
}

// meetingTopics is a topic store whose reads, once armed, attend the
// meeting.
type meetingTopics struct {
	store.TopicStore
	meet       *meeting
	armed, met atomic.Bool
}

func (s *meetingTopics) LoadTopics(ctx context.Context) ([]*coordinator.TopicRecord, error) {
	if s.armed.Load() {
		s.met.Store(s.meet.attend())
	}
	return s.TopicStore.LoadTopics(ctx)
}
