package coordinator

import (
	"fmt"
	"maps"
	"slices"
)

// CheckInvariants returns an error if the group's state breaks an
// invariant its code keeps (consumerIndexError); nil otherwise. It walks
// every member and target, so it is for the simulator, which calls it after
// every input, and for tests; a build with the tenure_debug tag also checks
// after every Step, and panics on an error, as TigerBeetle asserts in live
// code.
func (g *Group) CheckInvariants() error {
	if err := consumerIndexError(g); err != nil {
		return fmt.Errorf("coordinator: group %s: %w", g.name, err)
	}
	return nil
}

// debugCheck is called at the end of every Step: with the tenure_debug
// build tag a broken invariant panics there, at the input that broke it.
func (g *Group) debugCheck() {
	if !debugChecks {
		return
	}
	if err := g.CheckInvariants(); err != nil {
		panic(err.Error())
	}
}

// consumerIndexError checks the KIP-848 indexes against the members: the
// instance map (whose entries lookupMember and consumerJoin dereference),
// the subscription and assignor counts, the regex members, and that no
// partition is in two members' targets. It also checks that no member is
// assigned a partition under a token above its member epoch: its client
// could not commit it (a commit below the token is refused).
func consumerIndexError(g *Group) error {
	if g.typ != Consumer {
		return nil
	}
	c := &g.consumer
	for inst, id := range c.static {
		if m := c.members[id]; m == nil || m.instanceID != inst {
			return fmt.Errorf("instance %s maps to %s, who is not its member", inst, id)
		}
	}
	subs, votes := map[string]int{}, map[string]int{}
	targets := map[TopicPartition]string{}
	for id, m := range c.members {
		if m.instanceID != "" && c.static[m.instanceID] != id {
			return fmt.Errorf("member %s of instance %s, which maps to %q", id, m.instanceID, c.static[m.instanceID])
		}
		for _, t := range m.topics {
			subs[t]++
		}
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
		if _, ok := c.regexMembers[m]; ok != (m.re != nil) {
			return fmt.Errorf("member %s with regex %q is a regex member: %t", id, m.regex, ok)
		}
		if !sortedStrings(m.topics) || !sortedStrings(m.resolved) || !slices.IsSortedFunc(m.target, compareTP) {
			return fmt.Errorf("member %s: unsorted topics %v, resolved %v or target %v", id, m.topics, m.resolved, m.target)
		}
		for _, p := range m.assigned {
			if m.epoch > 0 && p.Token > tokenOf(m.epoch) {
				return fmt.Errorf("member %s at epoch %d assigned %s[%d] under token %v", id, m.epoch, p.Topic, p.Partition, p.Token)
			}
		}
		for _, tp := range m.target {
			if other, dup := targets[tp]; dup {
				return fmt.Errorf("%s[%d] in the targets of %s and %s", tp.Topic, tp.Partition, other, id)
			}
			targets[tp] = id
		}
	}
	for m := range c.regexMembers {
		if c.members[m.id] != m {
			return fmt.Errorf("regex member %s is not a member", m.id)
		}
	}

	if !maps.Equal(subs, c.subscribers) {
		return fmt.Errorf("subscribers %v, counted %v", c.subscribers, subs)
	}
	for name, n := range c.assignorVotes {
		if n != votes[name] {
			return fmt.Errorf("assignor %s has %d votes, counted %d", name, n, votes[name])
		}
	}
	for name, n := range votes {
		if c.assignorVotes[name] != n {
			return fmt.Errorf("assignor %s has %d votes, counted %d", name, c.assignorVotes[name], n)
		}
	}
	return nil
}
