package coordinator

import "github.com/twmb/franz-go/pkg/kmsg"

// Stats is a snapshot of a group for metrics and the admin CLI.
type Stats struct {
	Type    GroupType
	State   string
	Epoch   int32
	Members int
	// Owned counts partitions with a current owner.
	Owned int
	// Unowned counts partitions of the topics the members subscribe to
	// that have no current owner: during a rebalance, after a crash until
	// the session expires, or while a partition waits for its previous
	// owner to release it. Classic groups of a protocol type other than
	// "consumer" report 0: their subscriptions are opaque.
	//
	// A group with no members counts the partitions it has committed
	// offsets for (of topics that exist) when its last member was
	// expelled (session timeout, connection-loss grace) rather than left:
	// its consumers may still be working on them, as consumers whose
	// client never found their new coordinator after a fail-over do,
	// while nobody owns them; a join or a leave ends it. A group emptied
	// by leaving counts 0, and so does one a coordinator took over empty
	// (it is not persisted).
	Unowned int
	// Awaited counts the members restored with a takeover grace
	// (Config.TakeoverGrace) that have not been heard from since: the
	// clients still finding their new coordinator after a fail-over.
	Awaited int
}

// Stats returns a snapshot of the group. It costs O(subscribed topics) for
// consumer groups and O(members) for classic ones (their subscriptions are
// decoded from the join metadata), plus O(members) with a takeover grace,
// plus O(committed partitions) for a group whose last member was expelled,
// so call it when metrics are scraped,
// not per request.
func (g *Group) Stats() Stats {
	s := Stats{Type: g.typ, State: g.State(), Epoch: g.epoch, Owned: g.owners.owned()}
	var subscribed int
	switch g.typ {
	case Classic:
		s.Members = len(g.classic.members)
		if g.cfg.TakeoverGrace > 0 {
			for _, m := range g.classic.members {
				if m.graced {
					s.Awaited++
				}
			}
		}
		if g.classic.protocolType == consumerProtocolType {
			for topic := range g.offsetDeleteClassicTopics() {
				if _, parts, ok := g.cfg.Topics.Lookup(topic); ok {
					subscribed += int(parts)
				}
			}
		}
	case Consumer:
		s.Members = len(g.consumer.members)
		if g.cfg.TakeoverGrace > 0 {
			for _, m := range g.consumer.members {
				if m.graced {
					s.Awaited++
				}
			}
		}
		for _, t := range g.consumer.topics {
			subscribed += int(t.partitions)
		}
	}
	if s.Members > 0 && subscribed > s.Owned {
		s.Unowned = subscribed - s.Owned
	}
	if s.Members == 0 && g.expelledEmpty {
		for tp := range g.offsets.m {
			if _, parts, ok := g.cfg.Topics.Lookup(tp.Topic); ok && tp.Partition < parts {
				s.Unowned++
			}
		}
	}
	return s
}

// Listing returns the group's entry in a ListGroups response.
func (g *Group) Listing() kmsg.ListGroupsResponseGroup {
	l := kmsg.NewListGroupsResponseGroup()
	l.Group = g.name
	l.GroupState = g.State()
	l.GroupType = g.typ.String()
	switch g.typ {
	case Classic:
		l.ProtocolType = g.classic.protocolType
	case Consumer:
		l.ProtocolType = consumerProtocolType
	}
	return l
}
