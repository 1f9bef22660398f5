package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/coordinator"
)

// groupState is a group's live state as the Kafka protocol shows it, in
// the form an assignor takes: its members with their subscriptions and
// what each holds, and the partition counts of the topics they subscribe
// to. Read it with readGroupState.
type groupState struct {
	// Described is the describe result the state was read from.
	Described *groupDescription
	// Assignor names the group's assignor: a KIP-848 group's server-side
	// assignor, or the protocol a classic group's leader chose.
	Assignor string
	// Members are sorted by member ID.
	Members []stateMember
	// Topics are the existing topics some member subscribes to, sorted,
	// with their partition counts.
	Topics []assignor.Topic
	// Missing lists subscribed topics the cluster does not have.
	Missing []string
}

type stateMember struct {
	ID         string
	InstanceID string
	// Topics is the subscription: the topic names the member gives and
	// the existing topics its regex matches, sorted.
	Topics []string
	// Held is what the group's assignor takes the member to hold: a
	// KIP-848 member's target assignment (the coordinator recomputes the
	// target from the previous target), a classic member's assignment.
	Held []assignor.TopicPartition
}

// readGroupState describes group (describeAnyGroup) and looks up the
// partition counts of the topics its members subscribe to.
func readGroupState(ctx context.Context, adm *kadm.Client, group string) (*groupState, error) {
	c, g, err := describeAnyGroup(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	st := &groupState{}
	if c != nil {
		st.Described, st.Assignor = consumerDescription(c), c.AssignorName
	} else {
		st.Described, st.Assignor = classicDescription(g), g.Protocol
	}
	named := map[string]bool{}
	regexes := map[string]*regexp.Regexp{} // by member ID
	for _, m := range st.Described.Members {
		for _, t := range m.SubscribedTopics {
			named[t] = true
		}
		if m.SubscribedTopicRegex != nil {
			re, err := coordinator.CompileTopicRegex(*m.SubscribedTopicRegex)
			if err != nil {
				return nil, fmt.Errorf("member %s subscribes to the regex %q, which does not compile: %w", m.MemberID, *m.SubscribedTopicRegex, err)
			}
			regexes[m.MemberID] = re
		}
	}
	var all kadm.TopicDetails
	switch {
	case len(regexes) > 0: // a regex needs every topic's name
		all, err = adm.ListTopics(ctx)
	case len(named) > 0:
		all, err = adm.ListTopics(ctx, slices.Sorted(maps.Keys(named))...)
	}
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	parts := map[string]int32{}
	for name, d := range all {
		if d.Err == nil && len(d.Partitions) > 0 {
			parts[name] = int32(len(d.Partitions))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(named)) {
		if parts[name] == 0 {
			st.Missing = append(st.Missing, name)
		}
	}
	subscribed := map[string]bool{}
	for _, m := range st.Described.Members {
		sm := stateMember{ID: m.MemberID, InstanceID: deref(m.InstanceID)}
		for _, t := range m.SubscribedTopics {
			if parts[t] > 0 {
				sm.Topics = append(sm.Topics, t)
			}
		}
		if re := regexes[m.MemberID]; re != nil {
			for name := range parts {
				if re.MatchString(name) {
					sm.Topics = append(sm.Topics, name)
				}
			}
		}
		slices.Sort(sm.Topics)
		sm.Topics = slices.Compact(sm.Topics)
		if sm.Topics == nil {
			sm.Topics = []string{} // nil would subscribe to every topic
		}
		for _, t := range sm.Topics {
			subscribed[t] = true
		}
		held := m.Assignment
		if m.TargetAssignment != nil {
			held = m.TargetAssignment
		}
		for _, tp := range held {
			for _, p := range tp.Partitions {
				sm.Held = append(sm.Held, assignor.TopicPartition{Topic: tp.Topic, Partition: p})
			}
		}
		st.Members = append(st.Members, sm)
	}
	slices.SortFunc(st.Members, func(a, b stateMember) int { return cmp.Compare(a.ID, b.ID) })
	for _, name := range slices.Sorted(maps.Keys(subscribed)) {
		st.Topics = append(st.Topics, assignor.Topic{Name: name, Partitions: parts[name]})
	}
	return st, nil
}

// input is the assignor input of the state's members and topics.
func (s *groupState) input() assignor.Input {
	in := assignor.Input{Topics: slices.Clone(s.Topics)}
	for _, m := range s.Members {
		in.Members = append(in.Members, assignor.Member{ID: m.ID, InstanceID: m.InstanceID, Topics: m.Topics, Owned: m.Held})
	}
	return in
}

// partitions counts the partitions of the subscribed topics.
func (s *groupState) partitions() int {
	n := 0
	for _, t := range s.Topics {
		n += int(t.Partitions)
	}
	return n
}

// held returns who holds each assignable partition, as an Assignment in
// which each appears once: a partition listed by several members goes to
// the least member ID, as Uniform and assignor.Moves resolve it, and
// partitions of topics nobody subscribes to, or out of range, are left out.
// Every member has an entry.
func (s *groupState) held() assignor.Assignment {
	size := map[string]int32{}
	for _, t := range s.Topics {
		size[t.Name] = t.Partitions
	}
	owner := map[assignor.TopicPartition]string{}
	for _, m := range s.Members { // sorted by ID: the first claim wins
		for _, tp := range m.Held {
			if _, taken := owner[tp]; !taken && tp.Partition >= 0 && tp.Partition < size[tp.Topic] {
				owner[tp] = m.ID
			}
		}
	}
	out := assignor.Assignment{}
	for _, m := range s.Members {
		out[m.ID] = []assignor.TopicPartition{}
	}
	for tp, id := range owner {
		out[id] = append(out[id], tp)
	}
	for _, tps := range out {
		slices.SortFunc(tps, compareTP)
	}
	return out
}

func compareTP(a, b assignor.TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}
