package coordinator

import (
	"maps"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/epoch"
)

// noteTargetChange records, for the generation log, the partitions whose
// target owner changes from id's old target to its new one: each gets the
// member now targeted, or "" until another member's change claims it.
// The cost is in the partitions that change, not in the group's size.
func (c *consumerState) noteTargetChange(id string, old, cur []TopicPartition) {
	if c.targetMoves == nil {
		c.targetMoves = make(map[TopicPartition]string)
	}
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur) || i < len(old) && compareTP(old[i], cur[j]) < 0:
			if _, claimed := c.targetMoves[old[i]]; !claimed {
				c.targetMoves[old[i]] = ""
			}
			i++
		case i == len(old) || compareTP(cur[j], old[i]) < 0:
			c.targetMoves[cur[j]] = id
			j++
		default:
			i++
			j++
		}
	}
}

// consumerGeneration writes the generation log entry of the epoch
// bumpEpoch just started: the partitions whose target owner changed move
// from their owner (or last owner) to it, under the new epoch as token.
func (g *Group) consumerGeneration(reason string, least int) {
	c := &g.consumer
	e := g.beginGeneration(g.now, reason, len(c.members), least)
	moves := make([]Move, 0, len(c.targetMoves))
	for tp, to := range c.targetMoves {
		mv := Move{Topic: tp.Topic, Partition: tp.Partition, To: to}
		if o, ok := g.owners.lastOwner(tp); ok {
			mv.From, mv.OldToken = o.member, o.token
		}
		if mv.From == mv.To {
			continue // moved back before anyone let go of it
		}
		if to != "" {
			mv.NewToken = epoch.Token(g.epoch)
		}
		moves = append(moves, mv)
	}
	// A new map rather than clear: a map keeps its largest size, and a
	// cold join's would make every later iteration pay for it.
	c.targetMoves = nil
	g.setMoves(g.now, e, moves)
}

// consumerMinMoves is the fewest target moves any assignment balanced
// within one over the members needs from the current target (what the
// sticky assignors start from), with drained members keeping nothing; -1
// unless the uniform assignor runs over members that all subscribe to the
// same topics, the case in which balance is what it aims for. It costs
// the number of distinct target sizes, not the group's size.
func (g *Group) consumerMinMoves() int {
	c := &g.consumer
	if len(c.regexMembers) > 0 || c.assignor != assignor.UniformName {
		return -1
	}
	for _, n := range c.subscribers {
		if n != len(c.members) {
			return -1
		}
	}
	partitions := 0
	for _, t := range c.topics {
		partitions += int(t.partitions)
	}
	sizes := c.targetSizes
	if c.drained > 0 {
		sizes = maps.Clone(sizes)
		for _, m := range c.members {
			if n := len(m.target); m.drained && n > 0 {
				if sizes[n]--; sizes[n] == 0 {
					delete(sizes, n)
				}
			}
		}
	}
	return minMoves(partitions, len(c.members)-c.drained, sizes)
}
