package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// Deleting a topic (DeleteTopics, on the leader). The offsets of a
// deleted topic must not come back, not even on a topic created again
// under its name: an OffsetRecord names its topic by name only. So the
// topic leaves the topic store last, once every group's deletions are
// durable:
//
//  1. the topic leaves the registry: nothing can commit it or be assigned
//     it any more (creations and refreshes wait: changeMu);
//  2. every group is told (coordinator.TopicsDeleted): it deletes the topic's
//     offsets and KIP-848 groups revoke its partitions, through the
//     group's ordinary writes; a group that is offline and cannot be
//     loaded gets the deletion of every offset of the topic written for
//     it instead (its reload waits for that write);
//  3. once all of it is durable, the topic is deleted from the topic store
//     (delete-if-same: by its ID).
//
// If step 2 or 3 fails, the topic goes back into the registry, the groups
// are told it exists (their KIP-848 members get it back, at a new epoch),
// and the client is answered a retriable error: what was deleted of the
// offsets stays deleted. A crash before step 3 leaves the topic in the
// store, and the client's retry deletes it. Every other node of an HA set
// drops the topic at its next refresh (refreshTopics), and a group restored
// later forgets every topic its records name that the registry does not
// hold (restoreGroup).
//
// What is left: a group whose offsets could not be deleted in step 2 of a
// refresh (a deletion this node learns of from the store), and that stays
// offline until a topic of the same name is created again, keeps the old
// topic's offsets for the new one.

// Errors of topic deletion; deleteTopicCode maps them to Kafka codes.
var (
	errNotController = errors.New("server: not the leader of the HA set")
	errTopicUnknown  = errors.New("server: unknown topic")
	errTopicGroups   = errors.New("server: the groups' deletions of the topic's offsets could not be stored")
)

// deleteTopics deletes ts, topics of the registry, and returns each one's
// error. restored reports that some topic was put back after a failure:
// the caller tells the groups (topicsChanged).
func allValid(terms []*term, now time.Time) bool {
	for _, tm := range terms {
		if !tm.valid(now) {
			return false
		}
	}
	return true
}

func (s *Server) deleteTopics(ts []*topic) (errs []error, restored bool) {
	r := s.topics
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	errs = make([]error, len(ts))
	fail := func(err error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	now := time.Now()
	tm := s.controllerTerm(now)
	if tm == nil {
		fail(errNotController)
		return errs, false
	}
	// With shards, the groups of the other nodes' shards forget the
	// topics at their next refresh (refreshTopics), or when loaded.
	terms := s.ledTerms(now)
	var live []*topic
	for i, t := range ts {
		if r.get(t.name) != t {
			// A refresh dropped it meanwhile: deleted on another node.
			errs[i] = errTopicUnknown
			continue
		}
		live = append(live, t)
	}
	if len(live) == 0 {
		return errs, false
	}
	r.hide(live)
	groups, err := s.forgetTopics(terms, now, live)()
	if err == nil && !allValid(terms, time.Now()) {
		// Deposed while the writes were in flight: the next leader loads
		// the groups from the store and decides nothing more of it.
		err = errNotController
	}
	if err != nil {
		r.unhide(live)
		s.log.Warn("topics not deleted: the groups could not delete their offsets", zap.Strings("topics", topicNames(live)), zap.Error(err))
		fail(err)
		return errs, true
	}
	for i, t := range ts {
		if errs[i] != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
		deleted, err := s.topicStore.DeleteTopic(ctx, t.record())
		cancel()
		switch {
		case err != nil:
			r.unhide([]*topic{t})
			restored = true
			errs[i] = fmt.Errorf("%w: %w", errTopicStore, err)
			s.log.Error("topic not deleted: the store failed; its offsets are deleted", zap.String("topic", t.name), zap.Error(err))
		case !deleted:
			// Not in the store any more, or with another ID: another
			// leader deleted it. It is gone all the same; a topic
			// created again under the name comes with the next refresh.
			s.log.Warn("topic deleted, but the store no longer held it", zap.String("topic", t.name), zap.String("topic_id", topicIDString(t.id)))
		default:
			s.log.Info("topic deleted", zap.String("topic", t.name), zap.String("topic_id", topicIDString(t.id)),
				zap.Int32("partitions", t.partitions), zap.Int("groups", groups))
		}
	}
	s.m.topics.Set(float64(r.Len()))
	return errs, restored
}

// forgetTopics tells every group of terms that the topics ts were
// deleted (coordinator.TopicsDeleted); a group that is offline and cannot be
// loaded now gets the deletion of every offset of them written for it
// (deleteOffsetsOffline). The returned function waits until all of it is
// durable and returns how many groups were told, and the first error.
// The registry must no longer hold ts.
func (s *Server) forgetTopics(terms []*term, now time.Time, ts []*topic) func() (int, error) {
	names := topicNames(ts)
	var waits []<-chan error
	n := 0
	var groups []*groupEntry
	for _, tm := range terms {
		groups = append(groups, tm.groups.snapshot()...)
	}
	for _, e := range groups {
		e.mu.Lock()
		if e.gone {
			e.mu.Unlock()
			continue // deleted: its tombstone has no offsets
		}
		n++
		if !e.offline || s.reload(e, now) {
			if s.stepCore(e, nil, now, coordinator.TopicsDeleted{Names: names}) {
				s.performReady(e, nil)
				if w := s.waitDurable(e); w != nil {
					waits = append(waits, w)
				}
			}
		}
		if e.offline {
			waits = append(waits, s.deleteOffsetsOffline(e, ts))
		}
		e.mu.Unlock()
	}
	return func() (int, error) {
		var first error
		for _, w := range waits {
			if err := <-w; err != nil && first == nil {
				first = fmt.Errorf("%w: %w", errTopicGroups, err)
			}
		}
		return n, first
	}
}

// deleteOffsetsOffline writes, for offline group e, the deletion of every
// offset of the topics ts, through the writer (after any write of e still
// in flight), and holds e's reload until it is done. The returned channel
// gets the write's outcome. e.mu must be held.
func (s *Server) deleteOffsetsOffline(e *groupEntry, ts []*topic) <-chan error {
	var recs []coordinator.Record
	for _, t := range ts {
		for p := range t.partitions {
			recs = append(recs, &coordinator.OffsetRecord{Group: e.name, Topic: t.name, Partition: p, Deleted: true})
		}
	}
	done := make(chan error, 1)
	e.inflight++
	e.tm.writer.submit(&write{
		recs:  recs,
		group: e,
		alone: true, // after every write of e in flight
		live:  func() bool { return true },
		done: func(err error) {
			e.mu.Lock()
			e.inflight--
			e.mu.Unlock()
			done <- err
		},
	})
	return done
}

// restoreGroup rebuilds a group from its records (coordinator.Restore)
// and makes it forget the topics its records name that the registry does
// not hold: deleted while the group was not loaded. What that changes is
// in the group's Ready, for the caller to perform.
func (s *Server) restoreGroup(name string, now time.Time, recs []coordinator.Record) (*coordinator.Group, error) {
	// Restore, with the gate set before Resume steps the group.
	g, err := coordinator.Rebuild(name, &s.core, newGroupRand(), recs)
	if err != nil {
		return nil, err
	}
	s.gateTargets(g)
	g.Step(now, coordinator.Resume{})
	s.restoredGroup(name, now, g)
	return g, nil
}

// restoredGroup readies a group restored (or rebuilt and resumed) at now
// for this node: it forgets the topics deleted meanwhile, and is granted
// again what it holds if the signing key is retiring.
func (s *Server) restoredGroup(name string, now time.Time, g *coordinator.Group) {
	s.readyRestored(name, now, g, g.UnknownTopics())
}

// readyRestored is restoredGroup with the topics g names that the
// registry does not hold already looked up (gone).
func (s *Server) readyRestored(name string, now time.Time, g *coordinator.Group, gone []string) {
	if len(gone) > 0 {
		s.log.Info("restored group forgets deleted topics", zap.String("group", name), zap.Strings("topics", gone))
		g.Step(now, coordinator.TopicsDeleted{Names: gone})
	}
	s.restoredGrants(g, now)
}

func topicNames(ts []*topic) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.name
	}
	return names
}

// topicIDString is a topic ID as Kafka's tools print it: URL-safe base64,
// unpadded.
func topicIDString(id coordinator.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}
