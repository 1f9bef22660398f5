package kgobalancer

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/assignor"
)

// Uniform returns assignor.Uniform as a franz-go group balancer, so that kgo
// consumers in a classic consumer group (JoinGroup/SyncGroup, on Kafka or on
// tenure) can use it:
//
//	cl, err := kgo.NewClient(
//		kgo.ConsumerGroup("g"),
//		kgo.ConsumeTopics("events"),
//		kgo.Balancers(kgobalancer.Uniform()),
//	)
//
// Its protocol name is "uniform" and it is cooperative (KIP-429): Uniform
// moves as few partitions as balance allows, so members keep consuming what
// they keep during a rebalance, and only moved partitions are revoked first
// and handed over in the follow-up rebalance that kgo triggers. Every member
// of a group must offer it; a group cannot mix cooperative and eager
// balancers. For KIP-848 groups (kgo.ServerSideBalancer) the assignment is
// computed by the broker instead, and kgo ignores these balancers.
func Uniform() kgo.GroupBalancer { return &balancer{a: assignor.Uniform()} }

// Rendezvous returns assignor.Rendezvous(epsilon) as a franz-go group
// balancer (see Uniform for use). Its protocol name is "rendezvous".
//
// It is cooperative too: its placement is consistent, so after a membership
// change most partitions stay where they are and need no revocation; an
// eager balancer would stop every member's consumption on every rebalance to
// move a few partitions. Rendezvous does not read ownership, but the
// adapter still reports it, because the cooperative protocol needs it to
// find what to revoke.
func Rendezvous(epsilon float64) kgo.GroupBalancer {
	return &balancer{a: assignor.Rendezvous(epsilon)}
}

// balancer adapts an assignor.Assignor to kgo's GroupBalancer, with the consumer
// protocol's member metadata (kmsg.ConsumerMemberMetadata) as kgo's own
// cooperative-sticky balancer writes it.
type balancer struct{ a assignor.Assignor }

func (b *balancer) ProtocolName() string { return b.a.Name() }

func (b *balancer) IsCooperative() bool { return true }

// JoinGroupMetadata writes version 3 metadata: subscription, owned
// partitions (v1+, what cooperative rebalancing and stickiness read) and the
// generation they were owned at (v2+, to tell stale claims apart). kgo adds
// the rack.
func (b *balancer) JoinGroupMetadata(topics []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = topics
	meta.Generation = generation
	for topic, partitions := range current {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = topic
		owned.Partitions = partitions
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	// The coordinator compares metadata to decide whether a rejoin
	// changes anything: keep it deterministic.
	slices.SortFunc(meta.OwnedPartitions, func(a, b kmsg.ConsumerMemberMetadataOwnedPartition) int {
		return strings.Compare(a.Topic, b.Topic)
	})
	return meta.AppendTo(nil)
}

func (b *balancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (b *balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance runs the assignor on the group the leader received. Claims that
// another member makes at a strictly higher generation are dropped first
// (KIP-792: a member that missed a rebalance still reports what it owned
// before), then the plan is adjusted for the cooperative protocol: a
// partition moving between members is left out until its old owner has
// revoked it.
func (b *balancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	in := assignor.Input{Topics: make([]assignor.Topic, 0, len(topics))}
	for name, partitions := range topics {
		in.Topics = append(in.Topics, assignor.Topic{Name: name, Partitions: partitions})
	}

	newest := make(map[assignor.TopicPartition]int32)
	cb.EachMember(func(_ *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		for _, owned := range meta.OwnedPartitions {
			for _, p := range owned.Partitions {
				tp := assignor.TopicPartition{Topic: owned.Topic, Partition: p}
				if g, ok := newest[tp]; !ok || meta.Generation > g {
					newest[tp] = meta.Generation
				}
			}
		}
	})
	in.Members = make([]assignor.Member, 0, len(cb.Members()))
	cb.EachMember(func(member *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		m := assignor.Member{ID: member.MemberID, Topics: meta.Topics}
		if m.Topics == nil {
			m.Topics = []string{} // nil would mean every topic
		}
		if member.InstanceID != nil {
			m.InstanceID = *member.InstanceID
		}
		if meta.Rack != nil {
			m.Rack = *meta.Rack
		}
		for _, owned := range meta.OwnedPartitions {
			for _, p := range owned.Partitions {
				tp := assignor.TopicPartition{Topic: owned.Topic, Partition: p}
				if meta.Generation >= newest[tp] {
					m.Owned = append(m.Owned, tp)
				}
			}
		}
		in.Members = append(in.Members, m)
	})

	a, err := b.a.Assign(in)
	if err != nil {
		cb.SetError(err)
		return nil
	}
	plan := cb.NewPlan()
	for i := range cb.Members() {
		member, _ := cb.MemberAt(i)
		tps := a[member.MemberID]
		for len(tps) > 0 {
			n := 1
			for n < len(tps) && tps[n].Topic == tps[0].Topic {
				n++
			}
			partitions := make([]int32, n)
			for k := range n {
				partitions[k] = tps[k].Partition
			}
			plan.AddPartitions(member, tps[0].Topic, partitions)
			tps = tps[n:]
		}
	}
	plan.AdjustCooperative(cb)
	return plan
}
