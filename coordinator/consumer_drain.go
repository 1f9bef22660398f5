package coordinator

import (
	"errors"
	"fmt"
)

// drain (input Drain) is the planned-deploy path: the member's partitions
// move away gracefully while it stays in the group. Its part of the target becomes
// empty and the epoch is bumped (reason "drain"), so the member revokes
// its partitions on its next heartbeat, and each is granted to its new
// owner, under a fresh token, only once the member has released it:
// revocation before assignment, as in any KIP-848 rebalance, with no
// unowned time beyond that hand-off. A drained member is assigned nothing
// until Undrain. With remove, the member is removed (reason
// "admin-removal") once it holds nothing, as Kafka's admin removal does;
// a client that is still running then rejoins as a new member, so remove
// is for a process about to stop.
//
// Only KIP-848 groups can be drained: a classic group's assignment is
// computed by its leader client, which the coordinator cannot steer; the
// way to move work off a classic member is LeaveGroup (an admin removal).
func (g *Group) drain(memberID string, remove bool) error {
	mem, err := g.drainable(memberID)
	if err != nil {
		return err
	}
	mem.removeWhenDrained = mem.removeWhenDrained || remove
	if !mem.drained {
		mem.drained = true
		g.consumer.drained++
		g.persistMember(mem)
		g.bumpEpoch("drain", true)
	} else if remove {
		g.persistMember(mem)
	}
	g.removeIfDrained(mem)
	g.consumerCheckStable()
	return nil
}

// undrain lets a drained member be assigned partitions again (input
// Undrain).
func (g *Group) undrain(memberID string) error {
	mem, err := g.drainable(memberID)
	if err != nil {
		return err
	}
	if !mem.drained {
		return nil
	}
	mem.drained, mem.removeWhenDrained = false, false
	g.consumer.drained--
	g.persistMember(mem)
	g.bumpEpoch("undrain", true)
	g.consumerCheckStable()
	return nil
}

// Errors of Drain and Undrain.
var (
	ErrUnknownMember  = errors.New("coordinator: no such member")
	ErrNotDrainable   = errors.New("coordinator: only KIP-848 (consumer) groups can be drained; remove a classic member with LeaveGroup")
	ErrGroupIsDeleted = errors.New("coordinator: the group was deleted")
)

func (g *Group) drainable(memberID string) (*consumerMember, error) {
	switch {
	case g.deleted:
		return nil, ErrGroupIsDeleted
	case g.typ != Consumer:
		return nil, ErrNotDrainable
	}
	mem, ok := g.consumer.members[memberID]
	if !ok {
		return nil, fmt.Errorf("%w %q in group %q", ErrUnknownMember, memberID, g.name)
	}
	return mem, nil
}

// removeIfDrained removes a member drained with remove once it holds
// nothing.
func (g *Group) removeIfDrained(mem *consumerMember) {
	if !mem.removeWhenDrained || len(mem.assigned) > 0 || len(mem.revoking) > 0 {
		return
	}
	if g.consumer.members[mem.id] != mem {
		return // already gone
	}
	g.removeMember(mem, EventMemberRemoved, "admin-removal")
	g.bumpEpoch("admin-removal", true)
}

// Drained reports whether the member was drained (and not undrained).
func (g *Group) Drained(memberID string) bool {
	mem, ok := g.consumer.members[memberID]
	return ok && g.typ == Consumer && mem.drained
}
