package coordinator

import (
	"slices"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

func tokenOf(e int32) epoch.Token { return epoch.Token(e) }

// reconcile moves mem towards its target on one of its heartbeats.
// reported is what the member says it owns, sorted (known is false when it
// did not say: the member is then assumed to still hold everything);
// subChanged says its subscription changed in this request; retokened
// that the request fixed a provisional token (acknowledge). It writes an
// AssignmentRecord if anything of the member's assignment changed.
func (g *Group) reconcile(now time.Time, mem *consumerMember, reported []TopicPartition, known, subChanged, retokened bool) {
	c := &g.consumer
	if mem.epoch == staticLeftEpoch || (mem.state == memberStable && mem.epoch == c.targetEpoch && !subChanged) {
		// The steady state: nothing to do (the member epoch does not
		// change, so neither do provisional tokens).
		if retokened {
			g.persistAssignment(mem)
		}
		return
	}
	oldEpoch := mem.epoch
	oldPending := mem.pending
	changed := retokened

	// Revoked partitions the member no longer reports are released, one
	// by one: each is free for its next owner at once.
	if known && len(mem.revoking) > 0 {
		kept := mem.revoking[:0:0]
		for _, p := range mem.revoking {
			tp := TopicPartition{p.Topic, p.Partition}
			if containsTP(reported, tp) {
				kept = append(kept, p)
				continue
			}
			g.owners.release(tp, mem.id)
			changed = true
		}
		if len(kept) == 0 {
			kept = nil
		}
		mem.revoking = kept
	}

	if mem.state == memberUnrevoked {
		if subChanged && g.revokeUnsubscribed(mem) {
			changed = true
		}
		if len(mem.revoking) > 0 {
			// Still revoking: the member stays at its epoch and gets
			// nothing new until it has released everything.
			if changed {
				g.persistAssignment(mem)
			}
			return
		}
		mem.revokeDeadline = time.Time{}
	}
	if g.nextAssignment(now, mem, reported, known) {
		changed = true
	}
	if g.followEpoch(mem) {
		changed = true
	}
	c.recount(mem)
	if changed || mem.epoch != oldEpoch || !slices.Equal(oldPending, mem.pending) {
		g.persistAssignment(mem)
	}
}

// revokeUnsubscribed moves the partitions of topics mem no longer
// subscribes to from assigned to revoking (Kafka's
// CurrentAssignmentBuilder.updateCurrentAssignment): a member still
// revoking must stop consuming a topic it unsubscribed at once.
func (g *Group) revokeUnsubscribed(mem *consumerMember) bool {
	var keep, revoke []OwnedPartition
	for _, p := range mem.assigned {
		if _, ok := slices.BinarySearch(mem.resolved, p.Topic); ok {
			keep = append(keep, p)
		} else {
			revoke = append(revoke, p)
		}
	}
	if len(revoke) == 0 {
		return false
	}
	mem.assigned = keep
	mem.revoking = mergeOwned(mem.revoking, revoke)
	mem.assignmentChanged = true
	return true
}

// nextAssignment is Kafka's CurrentAssignmentBuilder.computeNextAssignment
// for a member that holds no revoked partition: keep owned ∩ target; if
// owned − target is not empty and the member (as far as we know) still
// holds some of it, ask for its revocation and stay at the current epoch;
// otherwise advance to the target epoch and give the member every target
// partition nobody holds, under the target epoch as token. It reports
// whether the member's partitions changed. What it gives is provisional
// until the member reports it (consumer_tokens.go).
func (g *Group) nextAssignment(now time.Time, mem *consumerMember, reported []TopicPartition, known bool) bool {
	c := &g.consumer
	var keep, revoke []OwnedPartition
	for _, p := range mem.assigned {
		if containsTP(mem.target, TopicPartition{p.Topic, p.Partition}) {
			keep = append(keep, p)
		} else {
			revoke = append(revoke, p)
		}
	}
	var give, blocked []TopicPartition
	for _, tp := range mem.target {
		if containsOwned(mem.assigned, tp) {
			continue
		}
		if o, held := g.owners.owner(tp); held {
			if o.member == mem.id {
				panic("coordinator: member " + mem.id + " owns " + tp.Topic + " without having it assigned")
			}
			blocked = append(blocked, tp)
			continue
		}
		give = append(give, tp)
	}
	mem.pending = blocked

	if len(revoke) > 0 && (!known || intersectsOwned(reported, revoke)) {
		mem.assigned = keep
		mem.revoking = revoke
		mem.state = memberUnrevoked
		mem.assignmentChanged = true
		mem.revokeDeadline = now.Add(mem.rebalanceTimeout)
		c.lowerDeadline(mem.revokeDeadline)
		return true
	}
	// The member does not hold what it is to revoke (or there is
	// nothing): it is released at once.
	for _, p := range revoke {
		g.owners.release(TopicPartition{p.Topic, p.Partition}, mem.id)
	}
	changed := len(revoke) > 0 || len(give) > 0
	if len(give) > 0 {
		token := tokenOf(c.targetEpoch)
		granted := make([]OwnedPartition, len(give))
		for i, tp := range give {
			if _, wasOwner := g.owners.commitToken(tp, mem.id); !wasOwner {
				c.moves++
			}
			g.owners.assign(tp, mem.id, token)
			granted[i] = OwnedPartition{tp.Topic, tp.Partition, token}
		}
		keep = mergeOwned(keep, granted)
		mem.addProvisional(give, token)
	}
	if changed {
		mem.assigned = keep
		mem.assignmentChanged = true
	}
	if mem.epoch != c.targetEpoch {
		mem.prevEpoch, mem.epoch = mem.epoch, c.targetEpoch
	}
	if len(blocked) > 0 {
		mem.state = memberUnreleased
	} else {
		mem.state = memberStable
	}
	return changed
}

// intersectsOwned reports whether some partition of ps is in the sorted
// tps.
func intersectsOwned(tps []TopicPartition, ps []OwnedPartition) bool {
	for _, p := range ps {
		if containsTP(tps, TopicPartition{p.Topic, p.Partition}) {
			return true
		}
	}
	return false
}
