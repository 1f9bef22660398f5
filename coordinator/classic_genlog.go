package coordinator

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// classicGeneration opens the generation log entry of the generation
// classicCompleteJoin just started. Its moves come with the leader's plan
// (classicPlanMoves); an empty group has none.
func (g *Group) classicGeneration(now time.Time) {
	c := &g.classic
	reason := joinReasons(g.log.reasons)
	g.log.reasons = g.log.reasons[:0]
	e := g.beginGeneration(now, reason, len(c.members), -1)
	if len(c.members) == 0 {
		g.setMoves(now, e, nil)
		return
	}
	c.logEpoch = g.epoch
	g.emitEntry(now, e)
}

// classicPlanMoves fills the open entry of the generation being synced
// with the moves of the leader's plan, before the plan is applied (the
// ownership table then times the hand-offs): ms are the members in ID
// order, owned their planned partitions, same whether a member's
// assignment is unchanged.
func (g *Group) classicPlanMoves(now time.Time, ms []*classicMember, owned [][]TopicPartition, same []bool) {
	e, ok := g.log.open[g.classic.logEpoch]
	if !ok || e.rec.Assigned || g.classic.logEpoch != g.epoch {
		return
	}
	e.rec.MinMoves = g.classicMinMoves(ms)
	token := epoch.Token(g.epoch)
	planned := make(map[TopicPartition]string)
	var moves []Move
	for i, mem := range ms {
		if same[i] {
			for _, tp := range mem.owned {
				planned[tp] = mem.id
			}
			continue
		}
		for _, tp := range owned[i] {
			if _, dup := planned[tp]; dup {
				continue // a plan that gives it twice: the first keeps it
			}
			planned[tp] = mem.id
			o, had := g.owners.lastOwner(tp)
			if had && o.member == mem.id {
				continue
			}
			moves = append(moves, Move{Topic: tp.Topic, Partition: tp.Partition,
				From: o.member, OldToken: o.token, To: mem.id, NewToken: token})
		}
	}
	for i, mem := range ms {
		if same[i] {
			continue
		}
		for _, tp := range mem.owned {
			if _, ok := planned[tp]; !ok {
				o, _ := g.owners.owner(tp)
				moves = append(moves, Move{Topic: tp.Topic, Partition: tp.Partition, From: mem.id, OldToken: o.token})
			}
		}
	}
	g.setMoves(now, e, moves)
}

// classicPlanApplied ends the moves the plan named but did not carry out
// (a partition planned for two members goes to the one holding it).
func (g *Group) classicPlanApplied(now time.Time) {
	e, ok := g.log.open[g.classic.logEpoch]
	if !ok {
		return
	}
	for _, m := range e.rec.Moves {
		tp := m.tp()
		if mp, moving := g.log.moving[tp]; moving && mp.epoch == e.rec.Epoch {
			if o, _ := g.owners.owner(tp); o.member != m.To {
				g.endMove(now, tp, mp, false)
			}
		}
	}
}

// classicMinMoves is consumerMinMoves for a classic group of consumers
// whose members all subscribe to the same topics; -1 otherwise.
func (g *Group) classicMinMoves(ms []*classicMember) int {
	c := &g.classic
	if c.protocolType != consumerProtocolType {
		return -1
	}
	var topics []string
	for i, mem := range ms {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(mem.metadata(c.protocol)); err != nil {
			return -1
		}
		t := slices.Compact(slices.Sorted(slices.Values(meta.Topics)))
		if i == 0 {
			topics = t
		} else if !slices.Equal(t, topics) {
			return -1
		}
	}
	partitions := 0
	for _, t := range topics {
		if _, n, ok := g.cfg.Topics.Lookup(t); ok {
			partitions += int(n)
		}
	}
	// The plan is not applied yet: each member owns what it synced last.
	sizes := make(map[int]int)
	for _, mem := range ms {
		if n := len(mem.owned); n > 0 {
			sizes[n]++
		}
	}
	return minMoves(partitions, len(ms), sizes)
}
