package coordinator

import (
	"slices"

	"github.com/tenure-dev/tenure/epoch"
)

// How a KIP-848 member and the coordinator agree on a partition's token.
//
// The member cannot see the coordinator's state, only the responses it
// receives, and a response may be lost: the coordinator gives a partition
// at epoch 13 in a response that never arrives, and the member first hears
// of it in a later response at epoch 16. So the token is fixed by what both
// sides see, the member's heartbeats:
//
//	a partition's token is the member epoch of the first heartbeat in
//	which its owner reports it (in Topics).
//
// Until then the partition is provisional in the coordinator: its token
// follows the member epoch, which is the epoch of every response the member
// can act on, so a member that takes as token the epoch of the response
// that brought the partition, and reports it in its very next heartbeat,
// holds the token the coordinator records from the first instant it may
// work or commit (commits of a provisional partition are checked against,
// and recorded with, the provisional token). When the report arrives, the
// token becomes the reported member epoch: normally the same, unless the
// coordinator answered an old duplicate of one of the member's requests in
// between, which the member ignored. A member that defers a partition
// until its revocations complete reports it only then, and takes its member
// epoch of that moment.
//
// Tokens still only grow from owner to owner: the reported epoch counts
// only if it is at or above the epoch at which the partition was given
// (the floor), which is above every earlier owner's token; the heartbeat's
// epoch is never above the member's epoch. Nor does it count below the
// token of the partition's last commit, if the member made it: the tokens
// of a partition's accepted commits never go down, and a member that
// committed under a provisional token and then reports at an earlier
// epoch (a client acting on a response it later disowns; a faithful one
// cannot commit under a token it has not seen) keeps the token it
// committed under. A member rejoining at epoch 0 reports nothing and has
// abandoned every partition it held: what it gets back is provisional
// again, as is what a static member's successor takes over.

// provisional is a partition given to a member that has not reported it
// yet, with its floor: the epoch at which it was given.
type provisional struct {
	tp    TopicPartition
	floor epoch.Token
}

func compareProvisional(p provisional, tp TopicPartition) int { return compareTP(p.tp, tp) }

// addProvisional marks the sorted tps, just given to mem at token floor, as
// not yet reported.
func (mem *consumerMember) addProvisional(tps []TopicPartition, floor epoch.Token) {
	for _, tp := range tps {
		i, found := slices.BinarySearchFunc(mem.unacked, tp, compareProvisional)
		if found {
			mem.unacked[i].floor = floor
			continue
		}
		mem.unacked = slices.Insert(mem.unacked, i, provisional{tp, floor})
	}
}

// forgetReports makes everything mem was assigned provisional again: it
// rejoined at epoch 0 and reported nothing. It reports whether that changed
// the member's AssignmentRecord.
func (mem *consumerMember) forgetReports() bool {
	before := mem.provisionalRecord()
	mem.unacked = mem.unacked[:0]
	for _, p := range mem.assigned {
		mem.unacked = append(mem.unacked, provisional{TopicPartition{p.Topic, p.Partition}, p.Token})
	}
	return !slices.Equal(before, mem.provisionalRecord())
}

// heldPartition returns mem's entry for tp in assigned or revoking, or nil.
func (mem *consumerMember) heldPartition(tp TopicPartition) (p *OwnedPartition, revoking bool) {
	if i, ok := indexOwned(mem.assigned, tp); ok {
		return &mem.assigned[i], false
	}
	if i, ok := indexOwned(mem.revoking, tp); ok {
		return &mem.revoking[i], true
	}
	return nil, false
}

// setToken moves one of mem's partitions to token, in its sets and in
// g.owners.
func (g *Group) setToken(mem *consumerMember, p *OwnedPartition, token epoch.Token) {
	p.Token = token
	g.owners.retoken(TopicPartition{p.Topic, p.Partition}, mem.id, token)
}

// acknowledge fixes the token of every provisional partition of mem that a
// heartbeat at member epoch reqEpoch reports (sorted), and forgets those
// mem no longer holds. It reports whether mem's AssignmentRecord changed:
// a token, or the set of partitions that are still provisional (a restored
// group must not take a fixed token for a provisional one, which would
// follow the next epoch).
func (g *Group) acknowledge(mem *consumerMember, reported []TopicPartition, reqEpoch int32) bool {
	if len(mem.unacked) == 0 {
		return false
	}
	changed := false
	t := tokenOf(reqEpoch)
	kept := mem.unacked[:0]
	for _, u := range mem.unacked {
		p, _ := mem.heldPartition(u.tp)
		switch {
		case p == nil:
			// Released meanwhile.
		case !containsTP(reported, u.tp):
			kept = append(kept, u)
		case t >= u.floor && t != p.Token && !g.committedAbove(mem, u.tp, t):
			g.setToken(mem, p, t)
			changed = true
		default:
			changed = true
		}
	}
	mem.unacked = kept
	return changed
}

// committedAbove reports whether the last commit of tp is mem's, under a
// token above t. Offsets are durable, so a restored group decides the
// same.
func (g *Group) committedAbove(mem *consumerMember, tp TopicPartition, t epoch.Token) bool {
	c, ok := g.offsets.m[tp]
	return ok && c.member == mem.id && c.token > t
}

// followEpoch moves the token of every provisional partition mem is
// assigned to its member epoch, and forgets those it no longer holds. It
// reports whether a token changed. Partitions being revoked keep theirs:
// the member stays at its epoch until it released them.
func (g *Group) followEpoch(mem *consumerMember) bool {
	if len(mem.unacked) == 0 || mem.epoch <= 0 {
		return false
	}
	changed := false
	t := tokenOf(mem.epoch)
	kept := mem.unacked[:0]
	for _, u := range mem.unacked {
		p, revoking := mem.heldPartition(u.tp)
		if p == nil {
			continue
		}
		kept = append(kept, u)
		if !revoking && p.Token < t {
			g.setToken(mem, p, t)
			changed = true
		}
	}
	mem.unacked = kept
	return changed
}

// provisionalRecord lists, for an AssignmentRecord, the partitions mem
// holds and has not reported yet, with their floors. It walks the sorted
// sets side by side: a member that was given many partitions at once
// writes this with every record.
func (mem *consumerMember) provisionalRecord() []ProvisionalPartition {
	if len(mem.unacked) == 0 {
		return nil
	}
	out := make([]ProvisionalPartition, 0, len(mem.unacked))
	a, r := mem.assigned, mem.revoking
	for _, u := range mem.unacked {
		var inA, inR bool
		a, inA = skipTo(a, u.tp)
		r, inR = skipTo(r, u.tp)
		if inA || inR {
			out = append(out, ProvisionalPartition{Topic: u.tp.Topic, Partition: u.tp.Partition, Floor: u.floor})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// skipTo drops the partitions of the sorted ps that come before tp and
// reports whether tp comes next.
func skipTo(ps []OwnedPartition, tp TopicPartition) ([]OwnedPartition, bool) {
	for len(ps) > 0 && compareTP(TopicPartition{ps[0].Topic, ps[0].Partition}, tp) < 0 {
		ps = ps[1:]
	}
	return ps, len(ps) > 0 && ps[0].Topic == tp.Topic && ps[0].Partition == tp.Partition
}

// provisionalTPs lists the partitions mem holds and has not reported yet.
func (mem *consumerMember) provisionalTPs() []TopicPartition {
	var tps []TopicPartition
	for _, u := range mem.unacked {
		if p, _ := mem.heldPartition(u.tp); p != nil {
			tps = append(tps, u.tp)
		}
	}
	return tps
}
