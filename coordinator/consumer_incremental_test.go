package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/assignor"
)

// TestIncrementalTarget drives a KIP-848 group through random joins,
// leaves, static leaves and rejoins, subscription changes (by name and by
// regex) and new topics, and checks the target after every step against
// the assignor and against the properties a uniform target must have,
// computed here independently:
//
//   - every partition of the assigned topics is in exactly one target and
//     no target holds anything else;
//   - the target is what assignor.Uniform computes from the members, with
//     the targets before the step as what they hold, whichever path
//     (incremental or full) computed it;
//   - with homogeneous subscriptions, the targets are balanced within one
//     and the number of partitions whose target owner changed is the
//     least any balanced target allows: every partition minus the most
//     the members can keep, which is Σ min(held, quota) with the larger
//     quotas given to the members that hold the most;
//   - the target index (when valid) files every member under its target's
//     size, and its free set is empty after a computation.
//
// It fails if no step took the incremental path, so it cannot pass
// vacuously.
func TestIncrementalTarget(t *testing.T) {
	var incremental int
	rapid.Check(t, func(rt *rapid.T) {
		incremental += incrementalRun(rt)
	})
	if incremental == 0 {
		t.Fatal("no step computed its target incrementally")
	}
	t.Logf("%d steps computed their target incrementally", incremental)
}

// incSubscriptions are the subscriptions the members choose from: mostly
// the same names, so that the group is often homogeneous.
var incSubscriptions = []struct {
	names []string
	regex string
}{
	{names: []string{"t"}},
	{names: []string{"t"}},
	{names: []string{"t"}},
	{names: []string{"t", "u"}},
	{names: []string{"u"}},
	{names: []string{}},
	{regex: "t|u"},
}

// incRun is one run of TestIncrementalTarget.
type incRun struct {
	t      *rapid.T
	topics *StaticTopics
	cfg    Config
	g      *Group
	added  int
	next   int
	// mixed runs draw every subscription; the others subscribe to t.
	mixed bool
}

func incrementalRun(t *rapid.T) int {
	r := &incRun{t: t, topics: NewStaticTopics(), cfg: DefaultConfig(), mixed: rapid.Bool().Draw(t, "mixed")}
	r.topics.Add("t", TopicID{15: 1}, int32(rapid.IntRange(0, 24).Draw(t, "partitions")))
	r.cfg.Topics = r.topics
	r.cfg.MaxGroupSize = 1000
	if err := r.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r.g = NewGroup("g", &r.cfg, rand.New(rand.NewPCG(1, 2)))
	incremental := 0
	steps := rapid.IntRange(1, 60).Draw(t, "steps")
	for range steps {
		before := r.targets()
		eligible := r.g.consumer.index.valid
		epoch, topics := r.g.epoch, maps.Clone(r.g.consumer.topics)
		membership := r.step()
		r.g.Advance(r.g.Ready())
		if r.g.typ != Consumer {
			continue
		}
		c := &r.g.consumer
		if membership && eligible && c.homogeneous() && r.g.epoch != epoch && maps.Equal(topics, c.topics) {
			incremental++
		}
		r.check(before, r.g.epoch != epoch)
	}
	return incremental
}

// step takes one random action and reports whether it was a join or a
// leave (which the incremental path serves when the group is eligible).
func (r *incRun) step() bool {
	t := r.t
	c := &r.g.consumer
	ids := slices.Sorted(maps.Keys(c.members))
	pick := func() *consumerMember {
		return c.members[rapid.SampledFrom(ids).Draw(t, "member")]
	}
	switch action := rapid.IntRange(0, 9).Draw(t, "action"); {
	case action < 4 || len(ids) == 0:
		id := fmt.Sprintf("m%03d", r.next)
		r.next++
		var inst string
		if rapid.IntRange(0, 3).Draw(t, "static") == 0 {
			inst = fmt.Sprintf("i%d", rapid.IntRange(0, 4).Draw(t, "instance"))
		}
		r.heartbeat(id, 0, inst, r.subscription())
		return true
	case action < 6:
		m := pick()
		if m.instanceID != "" && rapid.Bool().Draw(t, "static-leave") {
			r.heartbeat(m.id, staticLeftEpoch, m.instanceID, nil)
			return false
		}
		r.heartbeat(m.id, -1, m.instanceID, nil)
		return true
	case action < 8:
		// A static member that left comes back under a new member ID.
		var left []*consumerMember
		for _, id := range ids {
			if m := c.members[id]; m.epoch == staticLeftEpoch {
				left = append(left, m)
			}
		}
		if len(left) == 0 {
			return false
		}
		m := rapid.SampledFrom(left).Draw(t, "rejoin")
		id := fmt.Sprintf("m%03d", r.next)
		r.next++
		r.heartbeat(id, 0, m.instanceID, r.subscription())
		return true
	case action == 8:
		m := pick()
		if m.epoch <= 0 {
			return false
		}
		r.heartbeat(m.id, m.epoch, m.instanceID, r.subscription())
		return false
	default:
		if r.added == 0 {
			r.added++
			r.topics.Add("u", TopicID{15: 2}, int32(rapid.IntRange(1, 12).Draw(t, "u-partitions")))
		} else {
			// More partitions for t.
			id, parts, _ := r.topics.Lookup("t")
			r.topics.Add("t", id, parts+1)
		}
		r.g.Step(testEpoch, TopicsChanged{})
		return false
	}
}

// subscription draws a subscription for a join or heartbeat: in half the
// runs always the first, so that the group stays homogeneous for long.
func (r *incRun) subscription() *kmsg.ConsumerGroupHeartbeatRequest {
	s := incSubscriptions[0]
	if r.mixed {
		s = rapid.SampledFrom(incSubscriptions).Draw(r.t, "subscription")
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	if s.regex != "" {
		req.SubscribedTopicRegex = kmsg.StringPtr(s.regex)
		req.SubscribedTopicNames = []string{}
	} else {
		req.SubscribedTopicNames = s.names
		req.SubscribedTopicRegex = kmsg.StringPtr("")
	}
	return req
}

// heartbeat sends a heartbeat of member id at epoch; sub, when not nil,
// carries the subscription.
func (r *incRun) heartbeat(id string, epoch int32, inst string, sub *kmsg.ConsumerGroupHeartbeatRequest) {
	req := sub
	if req == nil {
		req = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	}
	req.Version = 1
	req.Group = "g"
	req.MemberID = id
	req.MemberEpoch = epoch
	if inst != "" {
		req.InstanceID = kmsg.StringPtr(inst)
	}
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	r.g.Step(testEpoch, Request{Ref: id, Msg: req})
	for _, rep := range r.g.Ready().Replies {
		if resp := rep.Msg.(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 && epoch != 0 {
			r.t.Fatalf("heartbeat of %s at epoch %d: %s", id, epoch, *resp.ErrorMessage)
		}
	}
}

// incTarget is a member's target and instance before a step.
type incTarget struct {
	target   []TopicPartition
	instance string
}

func (r *incRun) targets() map[string]incTarget {
	out := make(map[string]incTarget)
	if r.g.typ != Consumer {
		return out
	}
	for id, m := range r.g.consumer.members {
		out[id] = incTarget{slices.Clone(m.target), m.instanceID}
	}
	return out
}

// check checks the targets after a step; recomputed says whether the step
// bumped the epoch.
func (r *incRun) check(before map[string]incTarget, recomputed bool) {
	t := r.t
	g := r.g
	c := &g.consumer

	// What each member held going into the computation: its own target,
	// or, for a static member's successor, its predecessor's.
	held := make(map[string][]TopicPartition)
	for id, m := range c.members {
		if b, ok := before[id]; ok {
			held[id] = b.target
			continue
		}
		for oldID, b := range before {
			if _, still := c.members[oldID]; !still && b.instance != "" && b.instance == m.instanceID {
				held[id] = b.target
			}
		}
	}

	partitions := make(map[TopicPartition]bool)
	for name, tp := range c.topics {
		for p := range tp.partitions {
			partitions[TopicPartition{name, p}] = true
		}
	}
	owner := make(map[TopicPartition]string)
	for id, m := range c.members {
		for _, tp := range m.target {
			if !partitions[tp] {
				t.Fatalf("%s's target holds %v, which is not assigned\n%s", id, tp, g)
			}
			if o, dup := owner[tp]; dup {
				t.Fatalf("%v is in the targets of %s and %s\n%s", tp, o, id, g)
			}
			owner[tp] = id
		}
	}
	if len(c.members) > 0 && len(owner) != len(partitions) {
		t.Fatalf("%d of %d partitions have a target owner\n%s", len(owner), len(partitions), g)
	}

	if recomputed && c.homogeneous() {
		in := assignor.Input{}
		for name, tp := range c.topics {
			in.Topics = append(in.Topics, assignor.Topic{Name: name, Partitions: tp.partitions})
		}
		for id, m := range c.members {
			am := assignor.Member{ID: id, Topics: m.resolved}
			for _, tp := range held[id] {
				am.Owned = append(am.Owned, assignor.TopicPartition(tp))
			}
			in.Members = append(in.Members, am)
		}
		want, err := assignor.Uniform().Assign(in)
		if err != nil {
			t.Fatal(err)
		}
		for id, m := range c.members {
			got := make([]assignor.TopicPartition, len(m.target))
			for i, tp := range m.target {
				got[i] = assignor.TopicPartition(tp)
			}
			if !slices.Equal(got, want[id]) {
				t.Fatalf("%s's target is %v, the assignor's %v\n%s", id, m.target, want[id], g)
			}
		}
		checkMinimalMoves(t, c, held, len(partitions))
	}
	if err := targetIndexError(c); err != nil {
		t.Fatalf("%v\n%s", err, g)
	}
}

// checkMinimalMoves checks that the targets are balanced within one and
// moved the fewest partitions from held.
func checkMinimalMoves(t *rapid.T, c *consumerState, held map[string][]TopicPartition, total int) {
	n := len(c.members)
	if n == 0 {
		return
	}
	lo, hi := total, 0
	kept := 0
	var holds []int
	for id, m := range c.members {
		lo, hi = min(lo, len(m.target)), max(hi, len(m.target))
		h := 0
		for _, tp := range held[id] {
			if _, ok := c.topics[tp.Topic]; ok && tp.Partition < c.topics[tp.Topic].partitions {
				h++
			}
			if containsTP(m.target, tp) {
				kept++
			}
		}
		holds = append(holds, h)
	}
	if hi-lo > 1 {
		t.Fatalf("targets of %d to %d partitions", lo, hi)
	}
	q, r := total/n, total%n
	slices.Sort(holds)
	slices.Reverse(holds)
	most := 0
	for i, h := range holds {
		quota := q
		if i < r {
			quota++
		}
		most += min(h, quota)
	}
	if moves, least := total-kept, total-most; moves != least {
		t.Fatalf("%d partitions changed target owner, the least possible is %d", moves, least)
	}
}

// targetIndexError checks the target index against the members: a valid
// index files every member under its target's size, in ID order, in
// balanced trees; the targets and the free set together hold every
// partition of the assigned topics exactly once; and nothing is left free
// while the group has members, unless they wait for a coalesced bump
// (every removal is followed by a computation). An invalid index files
// nobody.
func targetIndexError(c *consumerState) error {
	x := &c.index
	if !x.valid {
		for id, m := range c.members {
			if m.idx != (indexNode{}) {
				return fmt.Errorf("%s is filed in an invalid index", id)
			}
		}
		return nil
	}
	filed := 0
	var err error
	for size, b := range x.buckets {
		var prev string
		n := 0
		avlAscend(b.root, func(m *consumerMember) bool {
			switch l, r := avlHeight(m.idx.left), avlHeight(m.idx.right); {
			case c.members[m.id] != m || len(m.target) != int(size) || m.idx.size != size:
				err = fmt.Errorf("%s filed under size %d with a target of %d", m.id, size, len(m.target))
			case n > 0 && m.id <= prev:
				err = fmt.Errorf("bucket %d out of order: %s after %s", size, m.id, prev)
			case l-r > 1 || r-l > 1 || m.idx.height != 1+max(l, r):
				err = fmt.Errorf("bucket %d unbalanced at %s: heights %d and %d, recorded %d", size, m.id, l, r, m.idx.height)
			}
			prev = m.id
			n++
			return err == nil
		})
		if err != nil {
			return err
		}
		if n != b.n || n == 0 {
			return fmt.Errorf("bucket %d counts %d members, holds %d", size, b.n, n)
		}
		filed += n
	}
	if filed != len(c.members) {
		return fmt.Errorf("index files %d of %d members", filed, len(c.members))
	}
	if len(c.members) > 0 && len(x.free) > 0 && !c.joinsWaiting() {
		return fmt.Errorf("%d partitions left free", len(x.free))
	}
	held := maps.Clone(x.free)
	for id, m := range c.members {
		for _, tp := range m.target {
			if _, dup := held[tp]; dup {
				return fmt.Errorf("%v held twice (by %s)", tp, id)
			}
			held[tp] = struct{}{}
		}
	}
	total := 0
	for name, t := range c.topics {
		total += int(t.partitions)
		for p := range t.partitions {
			if _, ok := held[TopicPartition{name, p}]; !ok {
				return fmt.Errorf("%s[%d] is in no target and not free", name, p)
			}
		}
	}
	if len(held) != total {
		return fmt.Errorf("targets and free hold %d partitions, the assigned topics have %d", len(held), total)
	}
	return nil
}
