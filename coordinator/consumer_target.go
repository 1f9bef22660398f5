package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/assignor"
)

// bumpEpoch starts a new group epoch: the target assignment is recomputed
// with the assignor (or, with recompute false, kept as is), every member
// then reconciles towards it on its next heartbeat. A recomputation also
// serves the joins waiting for a coalesced bump (consumer_coalesce.go),
// whose reason then leads.
func (g *Group) bumpEpoch(reason string, recompute bool) {
	c := &g.consumer
	if recompute {
		reason = c.takeWaitingJoins(reason)
	}
	g.epoch++
	c.targetEpoch = g.epoch
	c.reconciled = 0
	if recompute {
		c.assignor = c.preferredAssignor(g.cfg)
	}
	least := 0
	if recompute {
		g.resolveTopics()
		least = g.consumerMinMoves()
		g.computeTarget()
	}
	// After the targets: the record carries the ones that changed.
	g.persistGroup()
	g.event(Event{Kind: EventRebalanceStarted, Reason: reason, Members: len(c.members)})
	g.consumerGeneration(reason, least)
}

// preferredAssignor is the server assignor most members name (ties go to
// the one listed first in Config.Assignors), or the default if none does.
func (c *consumerState) preferredAssignor(cfg *Config) string {
	best, votes := cfg.Assignors[0].Name(), 0
	for _, a := range cfg.Assignors {
		if n := c.assignorVotes[a.Name()]; n > votes {
			best, votes = a.Name(), n
		}
	}
	return best
}

// computeTarget runs the assignor over the members, with each member's
// current target as what it holds (so sticky assignors move as little as
// they can), and stores each member's new target. With the uniform
// assignor and homogeneous subscriptions it computes the same target from
// the index instead, visiting only the members whose target changes
// (consumer_incremental.go).
func (g *Group) computeTarget() {
	c := &g.consumer
	g.resolveTopics()
	a, ok := g.cfg.assignor(c.assignor)
	if !ok {
		a = g.cfg.Assignors[0]
		c.assignor = a.Name()
	}
	uniform := a == assignor.Uniform()
	if g.incrementalEligible(uniform) {
		g.incrementalTarget()
		return
	}
	c.index.reset(c.members)
	in := assignor.Input{
		Members: c.input[:0],
		Topics:  make([]assignor.Topic, 0, len(c.topics)),
	}
	for _, name := range slices.Sorted(maps.Keys(c.topics)) {
		in.Topics = append(in.Topics, assignor.Topic{Name: name, Partitions: c.topics[name].partitions})
	}
	for _, m := range c.members {
		am := assignor.Member{ID: m.id, InstanceID: m.instanceID, Rack: m.rack, Topics: m.resolved}
		if am.Topics == nil || m.drained {
			am.Topics = noTopics // nil would mean every topic
		}
		if len(m.target) > 0 {
			am.Owned = make([]assignor.TopicPartition, len(m.target))
			for i, tp := range m.target {
				am.Owned[i] = assignor.TopicPartition(tp)
			}
		}
		in.Members = append(in.Members, am)
	}
	c.input = in.Members
	out, err := a.Assign(in)
	clear(c.input) // drop references to member state
	if err != nil {
		// The input is built from validated state: member IDs are map
		// keys and topics have positive partition counts.
		panic(fmt.Sprintf("coordinator: assignor %s failed on group %s: %v", a.Name(), g.name, err))
	}
	for _, m := range c.members {
		tps := out[m.id]
		var target []TopicPartition
		if len(tps) > 0 {
			target = make([]TopicPartition, len(tps))
			for i, tp := range tps {
				target[i] = TopicPartition(tp)
			}
			slices.SortFunc(target, compareTP)
		}
		g.setTarget(m, target)
	}
	if uniform && c.homogeneous() && c.drained == 0 {
		// The uniform assignor left every partition in exactly one
		// target: the next join or leave can start from here.
		c.index.rebuild(c.members)
	}
}

// setTarget makes target (sorted) m's part of the target assignment.
// Every change of a member's target goes through here: it keeps the
// target index in step, notes the partitions that change target owner for
// the generation log and, when the target changed, owes the target to the
// store: the next GroupRecord carries it (takeTargets) unless the member
// writes its AssignmentRecord first.
func (g *Group) setTarget(m *consumerMember, target []TopicPartition) {
	c := &g.consumer
	c.index.retarget(m, target)
	if slices.Equal(target, m.target) {
		m.target = target
		return
	}
	if !m.targetDirty {
		m.targetDirty = true
		c.targetDirty = append(c.targetDirty, m)
	}
	c.targetsOwed = true
	c.noteTargetChange(m.id, m.target, target)
	if c.members[m.id] == m {
		c.countTarget(len(m.target), -1)
		c.countTarget(len(target), 1)
	}
	m.target = target
}

// noTopics is the subscription of a member that subscribes to nothing (a
// nil one means every topic to an assignor).
var noTopics = []string{}

// resolveTopics resolves every member's subscription (names and regex)
// against the existing topics and reports whether the set of assignable
// topics changed. It walks the subscribed names and the regex members, not
// every member.
func (g *Group) resolveTopics() bool {
	c := &g.consumer
	want := make(map[string]struct{}, len(c.subscribers))
	for t := range c.subscribers {
		want[t] = struct{}{}
	}
	if len(c.regexMembers) > 0 {
		var names []string
		if l, ok := g.cfg.Topics.(TopicLister); ok {
			names = l.Names()
		}
		matches := make(map[string][]string)
		for m := range c.regexMembers {
			got, ok := matches[m.regex]
			if !ok {
				for _, n := range names {
					if m.re.MatchString(n) {
						got = append(got, n)
					}
				}
				matches[m.regex] = got
			}
			resolved := append(slices.Clone(m.topics), got...)
			slices.Sort(resolved)
			m.resolved = slices.Compact(resolved)
			for _, t := range got {
				want[t] = struct{}{}
			}
		}
	}
	topics := make(map[string]resolvedTopic, len(want))
	for name := range want {
		if id, parts, ok := g.cfg.Topics.Lookup(name); ok && parts > 0 {
			topics[name] = resolvedTopic{id: id, partitions: parts}
		}
	}
	if maps.Equal(topics, c.topics) {
		return false
	}
	c.topics = topics
	c.sole, c.soleTopic = "", resolvedTopic{}
	if len(topics) == 1 {
		for name, t := range topics {
			c.sole, c.soleTopic = name, t
		}
	}
	// The targets no longer cover exactly the assigned partitions.
	c.index.reset(c.members)
	// topicIDs keeps the IDs of topics that are gone: a member may still
	// report (and must be able to release) partitions of a deleted topic.
	for name, t := range topics {
		c.topicIDs[t.id] = name
	}
	return true
}

// consumerTopicsChanged bumps the epoch when a topic some member subscribes
// to appeared or changed, so that its partitions get assigned.
func (g *Group) consumerTopicsChanged(now time.Time) {
	if len(g.consumer.members) == 0 || g.deleted {
		return
	}
	if g.resolveTopics() {
		g.bumpEpoch("topics-changed", true)
		g.consumerCheckStable()
	}
}
