package server

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// declareTopics creates the topics of Config.Topics that do not exist yet.
// A declared topic that exists with another partition count keeps it: a
// topic's partitions never change, and its groups' tokens are per
// partition.
func (s *Server) declareTopics() error {
	created := false
	for _, spec := range s.cfg.Topics {
		if t := s.topics.get(spec.Name); t != nil {
			if t.partitions != spec.Partitions {
				s.log.Warn("declared topic exists with another partition count; it keeps its partitions",
					zap.String("topic", spec.Name), zap.Int32("declared", spec.Partitions), zap.Int32("partitions", t.partitions))
			}
			continue
		}
		t, err := s.createTopic(spec.Name, spec.Partitions, "declared")
		switch {
		case errors.Is(err, errTopicExists):
			// Another node of the HA set created it first.
			if t.partitions != spec.Partitions {
				s.log.Warn("declared topic exists with another partition count; it keeps its partitions",
					zap.String("topic", spec.Name), zap.Int32("declared", spec.Partitions), zap.Int32("partitions", t.partitions))
			}
		case err != nil:
			return fmt.Errorf("server: declared topic %q: %w", spec.Name, err)
		default:
			created = true
		}
	}
	if created {
		s.topicsChanged(time.Now())
	}
	return nil
}

// unknownTopics remembers which clients were told about which missing
// topic, so that each (client, topic) is logged once: a client polling
// for a topic that does not exist would otherwise fill the log. It is
// bounded; when full it starts over, and a pair may be logged again.
type unknownTopics struct {
	mu   sync.Mutex
	seen map[[2]string]struct{}
}

const maxUnknownTopicPairs = 4096

// unknownTopic logs, once per client ID and topic, that a client asked
// for a topic that does not exist and was not created, and what to do
// about it. via names the request.
func (s *Server) unknownTopic(clientID, host, topic, via string) {
	u := &s.unknown
	u.mu.Lock()
	key := [2]string{clientID, topic}
	_, seen := u.seen[key]
	if !seen {
		if u.seen == nil || len(u.seen) >= maxUnknownTopicPairs {
			u.seen = make(map[[2]string]struct{})
		}
		u.seen[key] = struct{}{}
	}
	u.mu.Unlock()
	if seen {
		return
	}
	s.log.Warn("a client asked for a topic that does not exist; it waits until the topic is created (tenure serve --topic NAME:PARTITIONS, or tenure topics create)",
		zap.String("topic", topic), zap.String("client_id", clientID), zap.String("client_host", host), zap.String("via", via))
}
