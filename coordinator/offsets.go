package coordinator

// Committed offsets, and the check that makes tenure's commits fenced.
//
// OffsetCommit follows Kafka's rules for each protocol first:
//
//   - classic: classicCommitMember (unknown member UNKNOWN_MEMBER_ID, wrong
//     generation ILLEGAL_GENERATION, CompletingRebalance
//     REBALANCE_IN_PROGRESS, ...);
//   - KIP-848 (consumerCommitMember): generation < 0 on a group without
//     members is an admin commit; otherwise an unknown member is
//     UNKNOWN_MEMBER_ID, a version below 9 UNSUPPORTED_VERSION, an epoch
//     above the member's STALE_MEMBER_EPOCH; and, per partition (KIP-1251,
//     Kafka 4.3), an epoch below the epoch at which the member received
//     the partition is STALE_MEMBER_EPOCH. An epoch between the two is
//     accepted: a commit that raced an epoch bump for a partition the
//     member kept is not falsely fenced.
//
// Then, beyond Kafka, every partition is checked against the coordinator's
// owners (g.owners.commitToken): the committer must own it, or be its last
// owner with nobody given it since (the hand-off commit of a partition
// being revoked). Otherwise the partition is refused and the others of the
// request are still committed, so a zombie cannot move another owner's
// offset. The code for a refused partition was chosen for how stock
// clients react (read from kgo's commit path):
//
//   - KIP-848 groups: STALE_MEMBER_EPOCH, the code Kafka already uses for
//     per-partition epoch failures. kgo retries a STALE partition only if
//     its member epoch changed in the meantime (500 ms, at most 10 times),
//     and before retrying drops the partitions it no longer owns (they
//     surface as REBALANCE_IN_PROGRESS); otherwise it hands the error to the
//     caller. A zombie therefore stops committing the partition, and a
//     healthy member neither loops nor rejoins: in 848 mode kgo leaves
//     fencing to the heartbeat, which is what tells a zombie it lost the
//     partition. FENCED_MEMBER_EPOCH would be wrong here: Kafka never sends
//     it to OffsetCommit and kgo gives it no meaning there.
//   - classic groups: ILLEGAL_GENERATION. Every client knows it (code 113
//     is unknown to pre-KIP-848 clients), and both kgo and the Java client
//     react by rejoining, which drops the assignment the member wrongly
//     believes it has: exactly what a zombie needs. A healthy classic member
//     does not get it: it only commits partitions of its current
//     generation's assignment, which are its own in g.owners, or those it
//     is handing off.
//
// Only groups whose ownership the coordinator knows are checked: KIP-848
// groups, and classic groups of protocol type "consumer" (other protocol
// types carry assignments the coordinator cannot read).
//
// Every accepted commit is persisted in an OffsetRecord with its token: the
// epoch at which the committer received the partition (None for an admin
// commit), so a reader can tell which ownership wrote each offset. Other
// per-partition errors: a partition of an unknown topic, or beyond its
// partition count, is UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for an
// unknown ID in v10+), a metadata string longer than
// Config.MaxMetadataBytes is OFFSET_METADATA_TOO_LARGE.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// committed is one committed offset.
type committed struct {
	offset      int64
	leaderEpoch int32
	metadata    *string
	token       epoch.Token
	member      string
}

// offsetTable holds a group's committed offsets.
type offsetTable struct {
	m map[TopicPartition]committed
}

func (o *offsetTable) init() { o.m = make(map[TopicPartition]committed) }

// sorted returns the partitions with a committed offset, sorted.
func (o *offsetTable) sorted() []TopicPartition {
	tps := make([]TopicPartition, 0, len(o.m))
	for tp := range o.m {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	return tps
}

func (o *offsetTable) writeTo(b *strings.Builder) {
	if len(o.m) == 0 {
		return
	}
	b.WriteString("offsets:\n")
	for _, tp := range o.sorted() {
		c := o.m[tp]
		by := c.member
		if by == "" {
			by = "admin"
		}
		fmt.Fprintf(b, "  %s[%d]=%d token=%v by %s\n", tp.Topic, tp.Partition, c.offset, c.token, by)
	}
}

// commitOffsets answers an OffsetCommit.
func (g *Group) commitOffsets(now time.Time, req Request, m *kmsg.OffsetCommitRequest) {
	resp := commitResponse(req, m)
	var member string
	var code int16
	switch {
	case g.deleted:
		code = kerr.GroupIDNotFound.Code
	case g.typ == Consumer:
		member, code = g.consumerCommitMember(m)
	default:
		member, code = g.classicCommitMember(m)
	}
	checkOwners := member != "" && (g.typ == Consumer || g.classic.protocolType == consumerProtocolType)
	fencedReason := commitRefusalReason(code)
	resp.Topics = commitTopics(resp.Topics, len(m.Topics))
	for i := range m.Topics {
		t := &m.Topics[i]
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = commitPartitions(rt.Partitions, len(t.Partitions))
		name, topicCode, parts := g.commitTopic(m.Version, t)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rp := &rt.Partitions[j]
			rp.Partition = p.Partition
			switch {
			case topicCode != 0:
				rp.ErrorCode = topicCode
			case p.Partition < 0 || p.Partition >= parts:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case code != 0:
				rp.ErrorCode = code
				if fencedReason != "" {
					g.event(Event{Kind: EventCommitRejected, MemberID: m.MemberID, Reason: fencedReason,
						Partition: TopicPartition{name, p.Partition}, Members: g.memberCount()})
				}
			case p.Metadata != nil && len(*p.Metadata) > g.cfg.MaxMetadataBytes:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				rp.ErrorCode = g.commitPartition(TopicPartition{name, p.Partition}, p, m.Generation, member, checkOwners)
			}
		}
	}
	g.reply(req, resp)
}

// commitResponse returns the response to fill: the caller's, reset (its
// slices are reused), or a new one.
func commitResponse(req Request, m *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	if r, ok := req.Resp.(*kmsg.OffsetCommitResponse); ok && r != nil {
		*r = kmsg.OffsetCommitResponse{Version: m.Version, Topics: r.Topics[:0]}
		return r
	}
	return m.ResponseKind().(*kmsg.OffsetCommitResponse)
}

// commitTopics returns ts resized to n zeroed topics, reusing its memory
// (and that of each topic's partitions) when it is large enough.
func commitTopics(ts []kmsg.OffsetCommitResponseTopic, n int) []kmsg.OffsetCommitResponseTopic {
	if cap(ts) < n {
		return make([]kmsg.OffsetCommitResponseTopic, n)
	}
	ts = ts[:n]
	for i := range ts {
		ts[i] = kmsg.OffsetCommitResponseTopic{Partitions: ts[i].Partitions[:0]}
	}
	return ts
}

// commitPartitions returns ps resized to n zeroed partitions, reusing its
// memory when it is large enough.
func commitPartitions(ps []kmsg.OffsetCommitResponseTopicPartition, n int) []kmsg.OffsetCommitResponseTopicPartition {
	if cap(ps) < n {
		return make([]kmsg.OffsetCommitResponseTopicPartition, n)
	}
	ps = ps[:n]
	clear(ps)
	return ps
}

// commitRefusalReason names, for EventCommitRejected, a group-level code
// that refuses a committer as not (or no longer) entitled to commit; it is
// "" for the other codes.
func commitRefusalReason(code int16) string {
	switch code {
	case kerr.UnknownMemberID.Code:
		return "unknown-member"
	case kerr.StaleMemberEpoch.Code:
		return "stale-epoch"
	case kerr.IllegalGeneration.Code:
		return "illegal-generation"
	case kerr.FencedInstanceID.Code:
		return "fenced-instance"
	}
	return ""
}

// commitTopic resolves a committed topic (by ID from v10) to its name and
// partition count, or the per-partition code for an unknown one.
func (g *Group) commitTopic(version int16, t *kmsg.OffsetCommitRequestTopic) (name string, code int16, partitions int32) {
	name = t.Topic
	if version >= 10 {
		n, ok := g.cfg.Topics.Name(t.TopicID)
		if !ok {
			return "", kerr.UnknownTopicID.Code, 0
		}
		name = n
	}
	_, parts, ok := g.cfg.Topics.Lookup(name)
	if !ok {
		return "", kerr.UnknownTopicOrPartition.Code, 0
	}
	return name, 0, parts
}

// commitPartition applies tenure's ownership check to one partition of a
// commit the group accepted, and stores it if it passes.
func (g *Group) commitPartition(tp TopicPartition, p *kmsg.OffsetCommitRequestTopicPartition, generation int32, member string, checkOwners bool) int16 {
	token := epoch.None
	if checkOwners {
		t, ok := g.owners.commitToken(tp, member)
		var code int16
		var reason string
		switch {
		case !ok && g.typ == Consumer:
			code, reason = kerr.StaleMemberEpoch.Code, "not-owner"
		case !ok:
			code, reason = kerr.IllegalGeneration.Code, "not-owner"
		case g.typ == Consumer && tokenOf(generation) < t:
			// KIP-1251: the commit predates the member's assignment
			// of the partition.
			code, reason = kerr.StaleMemberEpoch.Code, "epoch-before-assignment"
		}
		if code != 0 {
			g.event(Event{Kind: EventCommitRejected, MemberID: member, Reason: reason, Partition: tp, Members: g.memberCount()})
			return code
		}
		token = t
	}
	var meta *string
	if p.Metadata != nil {
		s := *p.Metadata
		meta = &s
	}
	g.offsets.m[tp] = committed{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: meta, token: token, member: member}
	if g.tombstone {
		// Offsets beside a tombstone read as a deleted group's (a
		// loader skips the group: server/load.go).
		g.persistGroup()
	}
	g.persist(&OffsetRecord{
		Group:       g.name,
		Topic:       tp.Topic,
		Partition:   tp.Partition,
		Offset:      p.Offset,
		LeaderEpoch: p.LeaderEpoch,
		Metadata:    meta,
		Token:       token,
		MemberID:    member,
	})
	return 0
}

// MemberCount returns the number of members.
func (g *Group) MemberCount() int { return g.memberCount() }

// memberCount is the number of members, for events.
func (g *Group) memberCount() int {
	if g.typ == Consumer {
		return len(g.consumer.members)
	}
	return len(g.classic.members)
}
