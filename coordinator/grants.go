package coordinator

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Grants for signing (Config.IssueGrants).
//
// The core decides WHICH ownerships a reply tells its member of; the
// caller signs them (epoch.Signer) and puts the signatures in the
// response (epoch/grantwire) before it sends it. The core holds no key and
// does no cryptography: keys live in the store and rotate under the
// server, and the simulator, which runs the core, needs none. Signing is
// deterministic, so where it happens changes no outcome.
//
// A reply grants what the member does not hold a signature for yet: a
// KIP-848 member's assigned partitions whose token is new or changed since
// its last grants (a new partition, a provisional token that followed
// the member epoch, a token fixed at another epoch by the member's
// report), and all of them when the member asked for its whole assignment
// (a join, a full heartbeat after a failure, an unacknowledged epoch); a
// classic member's owned partitions in every successful SyncGroup of a
// version that carries tagged fields (v4+). After
// ReissueGrants every member's next successful reply (a KIP-848 or classic
// heartbeat included) grants everything it holds again: the caller's key
// rotated. A restored group assumes its members hold signatures for what
// they own, as they do unless the reply was lost, in which case the member
// heartbeats in full and is granted everything.

// Grants are the ownerships one reply tells its member of.
type Grants struct {
	// Member is who holds them.
	Member string
	// Partitions are sorted by topic and partition.
	Partitions []GrantedPartition
}

// GrantedPartition is one partition held under a token. A partition of a
// topic without an ID (a classic group's topic that was never created) is
// not granted: there is nothing to bind the signature to.
type GrantedPartition struct {
	Topic     string
	TopicID   TopicID
	Partition int32
	Token     epoch.Token
}

// reissueGrants (input ReissueGrants) makes every member's next successful reply grant all it
// holds again (a new signing key: every live ownership gets a signature of
// it). It changes nothing durable and is a no-op without
// Config.IssueGrants.
func (g *Group) reissueGrants() {
	if !g.cfg.IssueGrants {
		return
	}
	for _, mem := range g.consumer.members {
		mem.granted = nil
	}
	for _, mem := range g.classic.members {
		mem.regrant = true
	}
}

// consumerGrants returns what a reply to mem grants: everything it is
// assigned when all is set, else the assigned
// partitions whose token it was not granted at; nil when that is nothing.
// It records the assignment as granted.
func (g *Group) consumerGrants(mem *consumerMember, all bool) *Grants {
	if !g.cfg.IssueGrants {
		return nil
	}
	if !all && slices.Equal(mem.assigned, mem.granted) {
		return nil // the steady state: one comparison
	}
	var out []GrantedPartition
	old := mem.granted
	for _, p := range mem.assigned {
		if !all {
			i, ok := indexOwned(old, TopicPartition{p.Topic, p.Partition})
			if ok && old[i].Token == p.Token {
				continue
			}
		}
		if id, ok := g.topicID(p.Topic); ok {
			out = append(out, GrantedPartition{Topic: p.Topic, TopicID: id, Partition: p.Partition, Token: p.Token})
		}
	}
	mem.granted = append(mem.granted[:0], mem.assigned...)
	if len(out) == 0 {
		return nil
	}
	return &Grants{Member: mem.id, Partitions: out}
}

// classicGrants returns the grants of everything mem owns, under the
// tokens the owners table holds, for resp; nil when that is nothing, or
// when resp's version has no tagged fields to carry them (SyncGroup and
// Heartbeat before v4), in which case a reissue stays due.
func (g *Group) classicGrants(mem *classicMember, resp kmsg.Response) *Grants {
	if !g.cfg.IssueGrants || !resp.IsFlexible() {
		return nil
	}
	mem.regrant = false
	var out []GrantedPartition
	for _, tp := range mem.owned {
		o, ok := g.owners.owner(tp)
		if !ok || o.member != mem.id {
			continue
		}
		if id, ok := g.topicID(tp.Topic); ok {
			out = append(out, GrantedPartition{Topic: tp.Topic, TopicID: id, Partition: tp.Partition, Token: o.token})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &Grants{Member: mem.id, Partitions: out}
}
