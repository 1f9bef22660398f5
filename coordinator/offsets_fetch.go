package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchOffsets answers this group's part of an OffsetFetch of the given
// version (the caller converts v0-v7 requests, which name one group, into a
// request group). A nil Topics list asks for every committed offset, sorted
// by topic and partition; a partition without a committed offset is
// answered with offset -1 and no error. From v10, topics are named by ID
// and an unknown ID is UNKNOWN_TOPIC_ID on each of its partitions.
//
// Consumer (KIP-848) groups validate the member from v9, with Kafka's rule
// (ConsumerGroup.validateOffsetFetch): a request without member ID and with
// a negative epoch is an admin fetch and always allowed; otherwise an
// unknown member is UNKNOWN_MEMBER_ID and an epoch different from the
// member's current epoch is STALE_MEMBER_EPOCH (KIP-1251 relaxed commits,
// not fetches). Both are group-level errors answered without any offset: a
// client must retry them after its next heartbeat, never take them for
// "no committed offset" (which is how platformatic/kafka #267 lost
// offsets during a scale-up: a member fetching right after a rebalance
// raced its own epoch bump). kgo restarts its session on them and fetches
// again.
//
// requireStable is accepted and has no effect: tenure has no transactions,
// so there are never pending transactional offsets. now is unused; it is
// there for offset expiry.
func (g *Group) FetchOffsets(now time.Time, version int16, req kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	resp := kmsg.NewOffsetFetchResponseGroup()
	resp.Group = g.name
	if g.deleted {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	if g.typ == Consumer && version >= 9 && !(req.MemberID == nil && req.MemberEpoch < 0) {
		var mem *consumerMember
		if req.MemberID != nil {
			mem = g.consumer.members[*req.MemberID]
		}
		switch {
		case mem == nil:
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp
		case req.MemberEpoch != mem.epoch:
			resp.ErrorCode = kerr.StaleMemberEpoch.Code
			return resp
		}
	}
	if req.Topics == nil {
		g.fetchAll(&resp)
		return resp
	}
	resp.Topics = make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, code := t.Topic, int16(0)
		if version >= 10 {
			n, ok := g.cfg.Topics.Name(t.TopicID)
			if ok {
				name = n
			} else {
				code = kerr.UnknownTopicID.Code
			}
		}
		for _, p := range t.Partitions {
			rp := fetchPartition(g.offsets.m[TopicPartition{name, p}], g.offsets.has(name, p) && code == 0)
			rp.Partition = p
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (o *offsetTable) has(topic string, partition int32) bool {
	_, ok := o.m[TopicPartition{topic, partition}]
	return ok
}

// fetchAll fills every committed offset, grouped by topic.
func (g *Group) fetchAll(resp *kmsg.OffsetFetchResponseGroup) {
	resp.Topics = []kmsg.OffsetFetchResponseGroupTopic{}
	tps := g.offsets.sorted()
	for i := 0; i < len(tps); {
		j := i
		for j < len(tps) && tps[j].Topic == tps[i].Topic {
			j++
		}
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = tps[i].Topic
		if id, _, ok := g.cfg.Topics.Lookup(rt.Topic); ok {
			rt.TopicID = id
		}
		for k := i; k < j; k++ {
			rp := fetchPartition(g.offsets.m[tps[k]], true)
			rp.Partition = tps[k].Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		i = j
	}
}

// fetchPartition renders one committed offset or, if !ok, its absence
// (offset -1 and empty metadata, as Kafka answers).
func fetchPartition(c committed, ok bool) kmsg.OffsetFetchResponseGroupTopicPartition {
	rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	meta := ""
	if !ok {
		rp.Offset = -1
		rp.LeaderEpoch = -1
	} else {
		rp.Offset = c.offset
		rp.LeaderEpoch = c.leaderEpoch
		if c.metadata != nil {
			meta = *c.metadata
		}
	}
	rp.Metadata = &meta
	return rp
}
