package coordinator

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteOffsets answers an OffsetDelete with Kafka's rules
// (OffsetMetadataManager.deleteOffsets and the groups'
// validateOffsetDelete): an empty group may delete any offset; a consumer
// group, or a classic group of protocol type "consumer", may delete the
// offsets of topics no member subscribes to, and answers
// GROUP_SUBSCRIBED_TO_TOPIC for the others; a classic group of another
// protocol type with members answers NON_EMPTY_GROUP. A partition of an
// unknown topic is UNKNOWN_TOPIC_OR_PARTITION. Deleting an offset that is
// not committed succeeds and changes nothing.
func (g *Group) deleteOffsets(now time.Time, req Request, m *kmsg.OffsetDeleteRequest) {
	resp := response[kmsg.OffsetDeleteResponse](req.Resp, m.Version)
	var subscribed func(topic string) bool
	switch {
	case g.deleted:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case g.Empty():
	case g.typ == Consumer:
		subscribed = g.consumerSubscribes
	case g.classic.protocolType != consumerProtocolType:
		resp.ErrorCode = kerr.NonEmptyGroup.Code
	default:
		topics := g.offsetDeleteClassicTopics()
		subscribed = func(t string) bool { _, ok := topics[t]; return ok }
	}
	if resp.ErrorCode != 0 {
		g.reply(req, resp)
		return
	}
	for _, t := range m.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		_, parts, known := g.cfg.Topics.Lookup(t.Topic)
		sub := subscribed != nil && subscribed(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition}
			tp := TopicPartition{t.Topic, p.Partition}
			switch {
			case !known || p.Partition < 0 || p.Partition >= parts:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case sub:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				g.deleteOffset(tp)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	g.reply(req, resp)
}

// deleteOffset removes a committed offset, if any, durably.
func (g *Group) deleteOffset(tp TopicPartition) {
	if _, ok := g.offsets.m[tp]; !ok {
		return
	}
	delete(g.offsets.m, tp)
	g.persist(&OffsetRecord{Group: g.name, Topic: tp.Topic, Partition: tp.Partition, Deleted: true})
}

// consumerSubscribes reports whether a KIP-848 member subscribes to topic,
// by name or through its regex (Kafka's ConsumerGroup.isSubscribedToTopic).
func (g *Group) consumerSubscribes(topic string) bool {
	for _, m := range g.consumer.members {
		if _, ok := slices.BinarySearch(m.resolved, topic); ok {
			return true
		}
		if m.re != nil && m.re.MatchString(topic) {
			return true
		}
	}
	return false
}

// offsetDeleteClassicTopics returns the topics the members of a classic
// "consumer" group subscribe to, read from their JoinGroup metadata (as
// Kafka's ClassicGroup.subscribedTopics does). Metadata that does not parse
// subscribes to nothing.
func (g *Group) offsetDeleteClassicTopics() map[string]struct{} {
	topics := make(map[string]struct{})
	for _, mem := range g.classic.members {
		for _, p := range mem.protocols {
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(p.metadata); err != nil {
				continue
			}
			for _, t := range meta.Topics {
				topics[t] = struct{}{}
			}
		}
	}
	return topics
}

// deleteGroup (input DeleteGroup) deletes the group, as DeleteGroups asks: a group with members
// answers NON_EMPTY_GROUP (a static member parked by a -2 leave still
// counts) and a deleted one GROUP_ID_NOT_FOUND; otherwise every committed
// offset is deleted, then the group, durably (OffsetRecords with Deleted,
// then a GroupRecord with Deleted), and the Group accepts nothing more:
// the caller drops it once the records are persisted.
func (g *Group) deleteGroup() error {
	switch {
	case g.deleted:
		return kerr.GroupIDNotFound
	case !g.Empty():
		return kerr.NonEmptyGroup
	}
	for _, tp := range g.offsets.sorted() {
		g.deleteOffset(tp)
	}
	g.deleted = true
	g.persist(&GroupRecord{Group: g.name, Type: g.typ, Epoch: g.epoch, Deleted: true})
	return nil
}
