package coordinator

import (
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// GroupSummary is one group in a list of groups: its name and Stats.
type GroupSummary struct {
	Name string
	Stats
}

// Summary returns the group's entry in a list of groups; it costs what
// Stats costs.
func (g *Group) Summary() GroupSummary { return GroupSummary{Name: g.name, Stats: g.Stats()} }

// GroupView is a read-only picture of a group for people: the status page
// and the admin CLI. Everything in it is a copy; the group may change as
// soon as the caller releases it.
type GroupView struct {
	Name  string
	Type  GroupType
	State string
	// Epoch is the classic generation or the KIP-848 group epoch.
	Epoch int32
	// Protocol is the KIP-848 server assignor, or the classic protocol
	// the last join phase chose (for a Kafka consumer, its balancer).
	Protocol string
	// ProtocolType and Leader are classic only.
	ProtocolType string
	Leader       string
	// TargetEpoch is the epoch of the KIP-848 target assignment.
	TargetEpoch int32
	// Members are sorted by ID.
	Members []MemberView
	// Partitions are every partition of the topics the members subscribe
	// to, and every other partition somebody owns, sorted by topic and
	// partition. A classic group of a protocol type other than
	// "consumer" has none: its subscriptions and assignments are opaque.
	Partitions []PartitionView
	// Unowned counts the Partitions without an owner.
	Unowned int
}

// MemberView is one member of a GroupView.
type MemberView struct {
	ID         string
	InstanceID string
	ClientID   string
	ClientHost string
	Rack       string
	// Epoch is the KIP-848 member epoch, or for a classic member the
	// generation of its last synced assignment (0 before the first).
	Epoch int32
	// State is the KIP-848 reconciliation state (stable,
	// unrevoked-partitions, unreleased-partitions, or static-left for a
	// static member gone with epoch -2 that may come back), or the
	// classic member's place in a rebalance (joining, syncing, or stable;
	// must-rejoin while the group prepares a rebalance it has not joined).
	State string
	// SinceHeartbeat is how long ago the member's session was last
	// renewed (a heartbeat, or an answered join or sync), derived from the
	// session deadline; SessionTimeout is that session. A member that
	// waits for a join or sync answer does not expire, so its
	// SinceHeartbeat may exceed its session.
	SinceHeartbeat time.Duration
	SessionTimeout time.Duration
	// Assigned are the partitions the member owns and keeps, Revoking
	// those it owns but was asked to release (KIP-848), with their
	// tokens. Pending are partitions of its KIP-848 target that another
	// member still holds. All sorted.
	Assigned []OwnedPartition
	Revoking []OwnedPartition
	Pending  []TopicPartition
}

// PartitionView is one partition of a GroupView.
type PartitionView struct {
	Topic     string
	Partition int32
	// Owner is the member that owns the partition, "" if none does;
	// Token is its fencing token.
	Owner string
	Token epoch.Token
	// Revoking is set when the owner was asked to release it.
	Revoking bool
	// Target is the member the KIP-848 target assignment gives it to,
	// "" if none (and always for classic groups, whose target is the
	// leader's business).
	Target string
}

// View returns a picture of the group at now. It walks every member and
// every partition of the subscribed topics, so it is meant for people
// looking at a page, not for a request path.
func (g *Group) View(now time.Time) GroupView {
	v := GroupView{Name: g.name, Type: g.typ, State: g.State(), Epoch: g.epoch}
	// parts collects the partitions shown: every partition of the
	// subscribed topics, then every owned one.
	parts := make(map[TopicPartition]*PartitionView)
	addTopic := func(topic string, n int32) {
		for p := range n {
			tp := TopicPartition{topic, p}
			if parts[tp] == nil {
				parts[tp] = &PartitionView{Topic: topic, Partition: p}
			}
		}
	}
	part := func(tp TopicPartition) *PartitionView {
		pv := parts[tp]
		if pv == nil {
			pv = &PartitionView{Topic: tp.Topic, Partition: tp.Partition}
			parts[tp] = pv
		}
		return pv
	}
	switch g.typ {
	case Classic:
		c := &g.classic
		v.Protocol, v.ProtocolType, v.Leader = c.protocol, c.protocolType, c.leader
		if c.protocolType == consumerProtocolType {
			for topic := range g.offsetDeleteClassicTopics() {
				if _, n, ok := g.cfg.Topics.Lookup(topic); ok {
					addTopic(topic, n)
				}
			}
		}
		for _, m := range c.sortedMembers() {
			mv := MemberView{ID: m.id, ClientID: m.clientID, ClientHost: m.clientHost,
				Epoch: m.assignedAt, SessionTimeout: m.session,
				SinceHeartbeat: sinceRenewal(now, m.deadline, m.session)}
			if m.static {
				mv.InstanceID = m.instanceID
			}
			switch {
			case m.join != nil:
				mv.State = "joining"
			case m.sync != nil || m.pendingSync:
				mv.State = "syncing"
			case c.phase == classicPreparing:
				mv.State = "must-rejoin"
			default:
				mv.State = "stable"
			}
			for _, tp := range m.owned {
				if o, ok := g.owners.owner(tp); ok && o.member == m.id {
					mv.Assigned = append(mv.Assigned, OwnedPartition{tp.Topic, tp.Partition, o.token})
				}
			}
			v.Members = append(v.Members, mv)
		}
	case Consumer:
		c := &g.consumer
		v.Protocol, v.TargetEpoch = c.assignor, c.targetEpoch
		for name, t := range c.topics {
			addTopic(name, t.partitions)
		}
		session := g.cfg.ConsumerSessionTimeout
		for _, id := range c.sortedMemberIDs() {
			m := c.members[id]
			mv := MemberView{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
				Rack: m.rack, Epoch: m.epoch, State: m.state.String(), SessionTimeout: session,
				SinceHeartbeat: sinceRenewal(now, g.deadlineOf(m), session),
				Assigned:       slices.Clone(m.assigned), Revoking: slices.Clone(m.revoking),
				Pending: slices.Clone(m.pending)}
			if m.epoch == staticLeftEpoch {
				mv.State = "static-left"
			}
			for _, tp := range m.target {
				part(tp).Target = m.id
			}
			for _, p := range m.revoking {
				part(TopicPartition{p.Topic, p.Partition}).Revoking = true
			}
			v.Members = append(v.Members, mv)
		}
	}
	for tp, o := range g.owners.cur {
		pv := part(tp)
		pv.Owner, pv.Token = o.member, o.token
	}
	v.Partitions = make([]PartitionView, 0, len(parts))
	for _, pv := range parts {
		v.Partitions = append(v.Partitions, *pv)
		if pv.Owner == "" {
			v.Unowned++
		}
	}
	slices.SortFunc(v.Partitions, func(a, b PartitionView) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return v
}

// sinceRenewal is how long before now a session that expires at deadline
// was renewed, never negative.
func sinceRenewal(now, deadline time.Time, session time.Duration) time.Duration {
	return max(now.Sub(deadline.Add(-session)), 0)
}
