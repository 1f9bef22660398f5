package coordinator

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConsumer answers this group's entry of a ConsumerGroupDescribe:
// its state, epoch, target assignment epoch, assignor and members (sorted
// by member ID) with their current and target assignments. A group that is
// not a consumer group, or was deleted, is answered GROUP_ID_NOT_FOUND, as
// Kafka does. AuthorizedOperations is left at its "not requested" default
// for the caller to fill.
func (g *Group) DescribeConsumer() kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = g.name
	if g.deleted || g.typ != Consumer {
		d.ErrorCode = kerr.GroupIDNotFound.Code
		d.ErrorMessage = kmsg.StringPtr("Group " + g.name + " is not a consumer group.")
		return d
	}
	c := &g.consumer
	d.State = g.State()
	d.Epoch = g.epoch
	d.AssignmentEpoch = c.targetEpoch
	d.AssignorName = c.assignor
	for _, id := range c.sortedMemberIDs() {
		m := c.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		if m.instanceID != "" {
			dm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		if m.rack != "" {
			dm.RackID = kmsg.StringPtr(m.rack)
		}
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.SubscribedTopics = slices.Clone(m.topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.re != nil {
			dm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		}
		dm.Assignment = g.describeAssignment(withoutTokens(m.assigned))
		dm.TargetAssignment = g.describeAssignment(m.target)
		dm.MemberType = 1 // consumer protocol
		d.Members = append(d.Members, dm)
	}
	return d
}

// describeAssignment groups sorted partitions by topic, with topic IDs
// and names.
func (g *Group) describeAssignment(tps []TopicPartition) kmsg.Assignment {
	var a kmsg.Assignment
	for i := 0; i < len(tps); {
		j := i
		for j < len(tps) && tps[j].Topic == tps[i].Topic {
			j++
		}
		t := kmsg.NewAssignmentTopicPartition()
		t.Topic = tps[i].Topic
		t.TopicID, _ = g.topicID(t.Topic)
		for k := i; k < j; k++ {
			t.Partitions = append(t.Partitions, tps[k].Partition)
		}
		a.TopicPartitions = append(a.TopicPartitions, t)
		i = j
	}
	return a
}
