package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// restoreClassic rebuilds the classic half of a group from its records
// (Restore).
func (g *Group) restoreClassic(now time.Time, gr *GroupRecord, rg *recordGroup) error {
	c := &g.classic
	if len(rg.members) == 0 {
		return nil // Empty, as init left it
	}
	lost, err := resolveClaims(g.name, ownedClaims(rg))
	if err != nil {
		return err
	}
	c.protocolType, c.protocol = gr.ProtocolType, gr.Protocol
	// Join order is not durable: members rank by ID for the next leader
	// election, which only matters if the leader does not rejoin.
	for _, id := range slices.Sorted(maps.Keys(rg.members)) {
		r := rg.members[id]
		if len(r.Protocols) == 0 {
			return fmt.Errorf("%w: group %q: classic member %q has no protocols", ErrCorruptRecords, g.name, id)
		}
		c.seq++
		m := &classicMember{
			id:         id,
			instanceID: r.InstanceID,
			static:     r.InstanceID != "",
			clientID:   r.ClientID,
			clientHost: r.ClientHost,
			seq:        c.seq,
			session:    r.SessionTimeout,
			rebalance:  r.RebalanceTimeout,
			protocols:  make([]classicProtocol, len(r.Protocols)),
		}
		for i, p := range r.Protocols {
			m.protocols[i] = classicProtocol{name: p.Name, metadata: p.Metadata}
		}
		if m.static {
			if other, dup := c.static[m.instanceID]; dup {
				return fmt.Errorf("%w: group %q: members %q and %q share instance %q", ErrCorruptRecords, g.name, other, id, m.instanceID)
			}
			c.static[m.instanceID] = id
		}
		if a := rg.assignments[id]; a != nil {
			m.assignment, m.assignedAt = a.Raw, a.MemberEpoch
			for _, p := range a.Owned {
				tp := TopicPartition{p.Topic, p.Partition}
				if containsTP(lost[id], tp) {
					continue
				}
				g.owners.assign(tp, id, p.Token)
				m.owned = append(m.owned, tp)
			}
		}
		c.members[id] = m
		c.countProtocols(m, 1)
		c.setDeadline(m, g.cfg.restoredDeadline(now, id, m.session))
		m.graced = g.cfg.TakeoverGrace > 0
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(c.protocols)), func(n int) bool { return n == len(c.members) }) {
		// selectProtocol relies on one protocol every member supports.
		return fmt.Errorf("%w: group %q: no protocol is supported by all %d members", ErrCorruptRecords, g.name, len(c.members))
	}
	if _, ok := c.members[gr.Leader]; ok {
		c.leader = gr.Leader
	}
	// The phase comes back as it was, its deadline starting now, so a
	// group that was rebalancing finishes that rebalance.
	switch gr.State {
	case classicStable.String():
		c.phase = classicStable
	case classicCompleting.String():
		c.phase = classicCompleting
		for _, m := range c.members {
			m.pendingSync = true
		}
		c.pendingSyncs = len(c.members)
		c.syncDeadline = now.Add(c.maxRebalance())
	default:
		// PreparingRebalance, or a group whose members were recorded
		// before its state was.
		c.phase = classicPreparing
		c.joinDeadline = now.Add(c.maxRebalance())
	}
	return nil
}
