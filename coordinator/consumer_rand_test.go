package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// TestConsumerRandomized drives a KIP-848 group with simulated clients that
// join, heartbeat (releasing revoked partitions faithfully but sometimes
// late, sometimes sending keepalives), lose responses (the coordinator
// acted on the heartbeat, the client never hears of it and retries with
// everything), pause (and get evicted, some a connection-loss grace after
// their connection closed), leave, restart as static members,
// and commit: their own partitions, partitions they are handing off,
// partitions they do not own, with current and old epochs, and as zombies
// after a pause. Midway a topic is created, later deleted and created
// again with a new ID. Clients take tokens as tenure's member does: a partition
// new to the client takes the member epoch of the response that brought
// it, and the next heartbeat reports it. After every step it checks:
//
//   - the coordinator's invariants (checkConsumerInvariants: one owner per
//     partition in g.owners and in the members' own sets, which agree);
//   - a replay of the persisted records: it rebuilds owners and tokens from
//     AssignmentRecords and MemberRecords alone, must find them equal to
//     g.owners, must never see a partition given to a second owner or a new
//     owner's token not above the previous owner's;
//   - every accepted commit (OffsetRecord) was made by the partition's owner
//     at the recorded token, or by its last owner with nobody given it since
//     (a hand-off), and the tokens of a partition's accepted commits never
//     decrease;
//   - the group epoch never decreases, and a zombie (evicted member) never
//     gets a commit accepted;
//   - every partition a member's client holds has, in g.owners, the token
//     the client holds it under, whenever the coordinator has the client
//     as its owner (the member's token is the coordinator's).
//
// Every step also checks that the store (a RecordSet fed the persisted
// records) holds the group's exact state and that Restore rebuilds it
// (restoreChecker); with restarts on, the group is now and then replaced
// by its restored copy, as a coordinator restart or fail-over does, and
// the clients carry on against it. The last variant coalesces joins
// (Config.ConsumerJoinCoalesce), and must see joins wait for their bump.
//
// The variant with grants (Config.IssueGrants) also checks that every
// grant a reply carries is its member's ownership at the token g.owners
// holds, and that a client holds every partition under a token some reply
// it received granted it: what a member needs to sign its writes. Now and
// then the group is asked to reissue every grant, as after a key rotation.
func TestConsumerRandomized(t *testing.T) {
	for _, v := range []struct {
		restarts bool
		coalesce time.Duration
		grants   bool
		// targetsOff: SetGroupTargets(false), as a node of a set with
		// older nodes runs its groups.
		targetsOff bool
	}{{false, 0, false, false}, {true, 0, false, false}, {true, time.Second, false, false}, {true, 0, true, false}, {true, 0, false, true}} {
		name := fmt.Sprintf("restarts=%t,coalesce=%v,grants=%t", v.restarts, v.coalesce, v.grants)
		if v.targetsOff {
			name += ",targets=off"
		}
		t.Run(name, func(t *testing.T) {
			consumerRandomized(t, v.restarts, v.coalesce, v.grants, v.targetsOff)
		})
	}
}

func consumerRandomized(t *testing.T, restarts bool, coalesce time.Duration, grants, targetsOff bool) {
	seeds, steps := 12, 1000
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := newRandRun(t, uint64(seed))
			r.env.cfg.ConsumerJoinCoalesce = coalesce
			r.env.cfg.IssueGrants = grants
			r.env.targetsOff = targetsOff
			r.env.g.SetGroupTargets(!targetsOff)
			if restarts {
				r.restartRng = rand.New(rand.NewPCG(uint64(seed), 100))
			}
			waited := 0
			for step := range steps {
				r.step(step)
				if r.env.g.typ == Consumer && r.env.g.consumer.joinsWaiting() {
					waited++
				}
			}
			t.Logf("epoch %d, %d commits accepted, %d rejected, %d evictions, %d releases seen, %d members, %d responses lost, %d tokens checked, %d given in a lost response, %d restarts, %d held when deleted, %d steps with joins waiting",
				r.env.g.epoch, r.accepted, r.rejected, r.evictions, r.model.releases, len(r.env.g.consumer.members),
				r.lost, r.tokensChecked, r.lateTokens, r.restarts, r.deletedHeld, waited)
			if coalesce > 0 && waited == 0 {
				t.Fatal("no join waited for a coalesced bump")
			}
			if grants && (r.grantsChecked == 0 || r.reissues == 0) {
				t.Fatalf("run exercised too little: %d held tokens checked against grants, %d reissues", r.grantsChecked, r.reissues)
			}
			// Restarts resend whole assignments, which leaves fewer
			// partitions first heard of late.
			if r.accepted == 0 || r.rejected == 0 || r.evictions == 0 || (!restarts && r.lateTokens == 0) || (restarts && r.restarts == 0) || r.deletedHeld == 0 {
				t.Fatalf("run exercised too little: %d commits accepted, %d rejected, %d evictions, %d partitions given in a lost response, %d restarts, %d held when deleted",
					r.accepted, r.rejected, r.evictions, r.lateTokens, r.restarts, r.deletedHeld)
			}
		})
	}
}

type randClient struct {
	label    string
	id       string
	gen      int
	instance string
	topics   []string
	joined   bool
	epoch    int32
	// held is what the client works on; revoking what it was told to
	// give up and has not released yet.
	held, revoking map[TopicPartition]bool
	// deleted are the partitions of a deleted topic the client has not
	// released yet: it reports them under the deleted topic's ID, and they
	// are not the partitions of a topic created again under the name.
	deleted map[TopicPartition]bool
	// tokens are the tokens of held and revoking partitions; unreported
	// the partitions no heartbeat has reported yet.
	tokens      map[TopicPartition]epoch.Token
	unreported  map[TopicPartition]bool
	pausedUntil time.Time
	wasPaused   bool
	// full: the last response was lost; the next heartbeat says
	// everything (as tenure's member does after a failure).
	full bool
	// given remembers, for the partitions of a lost response, the epoch
	// at which the coordinator gave them.
	given map[TopicPartition]int32
	// granted are the tokens replies it received granted it, per
	// partition (Config.IssueGrants).
	granted map[TopicPartition]map[epoch.Token]bool
}

type randRun struct {
	t       *testing.T
	rng     *rand.Rand
	env     *testEnv
	clients []*randClient
	model   recordModel

	lastEpoch                     int32
	accepted, rejected, evictions int
	topicAdded                    bool
	// deletedHeld counts the partitions clients held when their topic
	// was deleted.
	deletedHeld int
	// lost counts lost responses; lateTokens the partitions a client first
	// heard of at a later epoch than the lost response that gave them;
	// tokensChecked the client tokens compared with g.owners.
	lost, lateTokens, tokensChecked int
	// store follows what the group persisted; restarts counts the times
	// the group was replaced by its restored copy, which happens at random
	// (restartRng) when restarts are on.
	store      *restoreChecker
	checks     int
	restarts   int
	restartRng *rand.Rand
	// replyGrants are the grants of the last reply to each client (by
	// label); grantsChecked counts held tokens found granted, reissues
	// the ReissueGrants calls.
	replyGrants             map[string]*Grants
	grantsChecked, reissues int
	// reissued are the members asked to be granted everything again,
	// until their next successful reply.
	reissued map[string]bool
}

func newRandRun(t *testing.T, seed uint64) *randRun {
	cfg := DefaultConfig()
	topics := NewStaticTopics()
	topics.Add("t", TopicID{15: 1}, 16)
	cfg.Topics = topics
	cfg.MaxGroupSize = 8
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, cfg: cfg, topics: topics, now: testEpoch, nextTopicID: 1}
	e.g = NewGroup("g", &e.cfg, rand.New(rand.NewPCG(seed, 7)))
	r := &randRun{t: t, rng: rand.New(rand.NewPCG(seed, 99)), env: e, model: newRecordModel(), store: newRestoreChecker(),
		replyGrants: map[string]*Grants{}, reissued: map[string]bool{}}
	for i := range 10 {
		c := &randClient{label: fmt.Sprintf("c%d", i), topics: []string{"t"}}
		if i%3 == 0 {
			c.instance = fmt.Sprintf("i%d", i)
		}
		if i%4 == 1 {
			c.topics = []string{"t", "u"}
		}
		c.id = fmt.Sprintf("%s.%d", c.label, c.gen)
		c.held, c.revoking, c.deleted = map[TopicPartition]bool{}, map[TopicPartition]bool{}, map[TopicPartition]bool{}
		c.tokens, c.unreported = map[TopicPartition]epoch.Token{}, map[TopicPartition]bool{}
		c.given = map[TopicPartition]int32{}
		c.granted = map[TopicPartition]map[epoch.Token]bool{}
		r.clients = append(r.clients, c)
	}
	return r
}

func (r *randRun) step(n int) {
	e := r.env
	// Time passes; due timers fire.
	e.now = e.now.Add(time.Duration(r.rng.IntN(300)) * time.Millisecond)
	if next := e.g.Ready().NextTick; !next.IsZero() && !next.After(e.now) {
		e.g.Step(e.now, Tick{})
		r.drain(nil)
	}
	if !r.topicAdded && n == 400 {
		r.topicAdded = true
		e.topics.Add("u", deletedU, 4)
		e.g.Step(e.now, TopicsChanged{})
		r.drain(nil)
	}
	// u is deleted, then created again with a new ID and more partitions.
	switch n {
	case 650:
		e.topics.Remove("u")
		e.g.Step(e.now, TopicsDeleted{Names: []string{"u"}})
		r.drain(nil)
		for _, c := range r.clients {
			r.deletedHeld += c.deleteTopic("u")
		}
	case 800:
		e.topics.Add("u", TopicID{15: 3}, 6)
		e.g.Step(e.now, TopicsChanged{})
		r.drain(nil)
	}
	c := r.clients[r.rng.IntN(len(r.clients))]
	switch {
	case e.now.Before(c.pausedUntil):
		// A paused process does nothing.
	case c.wasPaused:
		// It wakes up and, before it heartbeats, commits what it
		// believes it owns: a zombie if it was evicted meanwhile.
		c.wasPaused = false
		r.commit(c, true)
	default:
		switch x := r.rng.IntN(100); {
		case x < 55:
			r.heartbeat(c)
		case x < 80:
			if c.joined {
				r.commit(c, false)
			}
		case x < 84:
			if c.joined {
				c.pausedUntil = e.now.Add(time.Duration(r.rng.IntN(20000)) * time.Millisecond)
				c.wasPaused = true
				if r.rng.IntN(2) == 0 {
					// Its connection closes under it: expelled a
					// grace later unless it wakes first.
					e.g.Step(e.now, ConnectionClosed{MemberID: c.id})
					r.drain(nil)
				}
			}
		case x < 88:
			if c.joined {
				r.leave(c, c.instance != "" && r.rng.IntN(2) == 0)
			}
		default:
			r.heartbeat(c)
		}
	}
	if r.restartRng != nil && r.restartRng.IntN(100) == 0 {
		r.restartCoordinator()
	}
	if e.cfg.IssueGrants && r.rng.IntN(100) == 0 {
		r.reissues++
		e.g.Step(e.now, ReissueGrants{})
		for id := range e.g.consumer.members {
			r.reissued[id] = true
		}
	}
	r.check()
}

// heartbeat sends c's next ConsumerGroupHeartbeat and applies the answer.
func (r *randRun) heartbeat(c *randClient) {
	e := r.env
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = c.id
	if c.instance != "" {
		req.InstanceID = kmsg.StringPtr(c.instance)
	}
	if !c.joined {
		req.MemberEpoch = 0
		req.RebalanceTimeoutMillis = int32(3000 + r.rng.IntN(10000))
		req.SubscribedTopicNames = c.topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else {
		req.MemberEpoch = c.epoch
		// Revoked partitions are released faithfully, sometimes late.
		for _, tp := range slices.SortedFunc(maps.Keys(c.revoking), compareTP) {
			if r.rng.IntN(3) == 0 {
				delete(c.revoking, tp)
				delete(c.tokens, tp)
				delete(c.unreported, tp)
			}
		}
		for _, tp := range slices.SortedFunc(maps.Keys(c.deleted), compareTP) {
			if r.rng.IntN(3) == 0 {
				delete(c.deleted, tp)
			}
		}
		// A keepalive only when there is nothing new to report: tenure's
		// member reports new partitions in its very next heartbeat.
		if c.full || len(c.unreported) > 0 || r.rng.IntN(4) > 0 {
			var owned []TopicPartition
			for tp := range c.held {
				owned = append(owned, tp)
			}
			for tp := range c.revoking {
				owned = append(owned, tp)
			}
			slices.SortFunc(owned, compareTP)
			req.Topics = e.heartbeatTopics(owned)
			if len(c.deleted) > 0 {
				old := kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: deletedU}
				for _, tp := range slices.SortedFunc(maps.Keys(c.deleted), compareTP) {
					old.Partitions = append(old.Partitions, tp.Partition)
				}
				req.Topics = append(req.Topics, old)
			}
			if c.full || r.rng.IntN(5) == 0 {
				req.RebalanceTimeoutMillis = 10000
				req.SubscribedTopicNames = c.topics
			}
		}
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	e.g.Step(e.now, Request{Ref: c.label, Msg: req, Resp: resp, ClientID: c.label})
	r.drain(nil)
	if resp.ErrorCode == 0 && req.Topics != nil {
		clear(c.unreported)
	}
	if r.rng.IntN(8) == 0 {
		// The response is lost: the coordinator acted on the heartbeat,
		// the client retries with everything.
		r.lost++
		c.full = true
		if resp.ErrorCode == 0 && resp.Assignment != nil {
			for _, tp := range e.assignmentTPs(resp.Assignment) {
				if !c.held[tp] {
					if _, ok := c.given[tp]; !ok {
						c.given[tp] = resp.MemberEpoch
					}
				}
			}
		}
		return
	}
	c.full = false
	switch resp.ErrorCode {
	case 0:
		c.joined = true
		c.epoch = resp.MemberEpoch
		if r.reissued[c.id] {
			// The first reply after a reissue grants all it holds.
			delete(r.reissued, c.id)
			var got []TopicPartition
			if gr := r.replyGrants[c.label]; gr != nil {
				for _, p := range gr.Partitions {
					got = append(got, TopicPartition{p.Topic, p.Partition})
				}
			}
			var want []TopicPartition
			if mem := e.g.consumer.members[c.id]; mem != nil {
				want = withoutTokens(mem.assigned)
			}
			if !slices.Equal(got, want) {
				r.t.Fatalf("at %s: the first reply to %s after a reissue grants %v, it holds %v", rel(e.now), c.id, got, want)
			}
		}
		if gr := r.replyGrants[c.label]; gr != nil {
			for _, p := range gr.Partitions {
				tp := TopicPartition{p.Topic, p.Partition}
				if c.granted[tp] == nil {
					c.granted[tp] = map[epoch.Token]bool{}
				}
				c.granted[tp][p.Token] = true
			}
		}
		if resp.Assignment != nil {
			next := map[TopicPartition]bool{}
			for _, tp := range e.assignmentTPs(resp.Assignment) {
				next[tp] = true
				if !c.held[tp] {
					// New to the client: its token is this epoch.
					c.tokens[tp] = tokenOf(resp.MemberEpoch)
					c.unreported[tp] = true
					if at, ok := c.given[tp]; ok && at < resp.MemberEpoch {
						r.lateTokens++
					}
				}
				delete(c.revoking, tp)
			}
			for tp := range c.held {
				if !next[tp] {
					c.revoking[tp] = true
				}
			}
			c.held = next
			clear(c.given)
		}
	case kerr.UnknownMemberID.Code:
		r.restart(c)
	case kerr.FencedMemberEpoch.Code:
		// Abandon everything; rejoin with the same member ID.
		c.joined = false
		c.forget()
	case kerr.UnreleasedInstanceID.Code, kerr.GroupMaxSizeReached.Code:
		c.joined = false
	default:
		r.t.Fatalf("%s: unexpected heartbeat error %v", c.label, kerr.ErrorForCode(resp.ErrorCode))
	}
}

// deletedU is the ID of the topic u the randomized runs delete.
var deletedU = TopicID{15: 2}

// deleteTopic makes what c holds or revokes of topic the partitions of a
// deleted topic: it will release them, and reports them until then.
// It returns how many there are.
func (c *randClient) deleteTopic(topic string) int {
	for _, set := range []map[TopicPartition]bool{c.held, c.revoking} {
		for tp := range set {
			if tp.Topic == topic {
				c.deleted[tp] = true
				delete(set, tp)
				delete(c.tokens, tp)
				delete(c.unreported, tp)
				delete(c.given, tp)
			}
		}
	}
	return len(c.deleted)
}

// restart makes c a new incarnation: a new member ID, nothing held.
func (r *randRun) restart(c *randClient) {
	if r.rng.IntN(3) == 0 {
		// The next incarnation subscribes differently.
		if len(c.topics) == 1 {
			c.topics = []string{"t", "u"}
		} else {
			c.topics = []string{"u"}
		}
	}
	c.gen++
	c.id = fmt.Sprintf("%s.%d", c.label, c.gen)
	c.joined = false
	c.epoch = 0
	c.forget()
}

// forget drops everything c holds.
func (c *randClient) forget() {
	clear(c.held)
	clear(c.revoking)
	clear(c.deleted)
	clear(c.tokens)
	clear(c.unreported)
	clear(c.given)
	clear(c.granted)
}

func (r *randRun) leave(c *randClient, static bool) {
	e := r.env
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = c.id
	req.MemberEpoch = -1
	if c.instance != "" {
		req.InstanceID = kmsg.StringPtr(c.instance)
	}
	if static {
		req.MemberEpoch = -2
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	e.g.Step(e.now, Request{Ref: c.label, Msg: req, Resp: resp, ClientID: c.label})
	r.drain(nil)
	if resp.ErrorCode != 0 && resp.ErrorCode != kerr.UnknownMemberID.Code {
		r.t.Fatalf("%s: unexpected leave error %v", c.label, kerr.ErrorForCode(resp.ErrorCode))
	}
	r.restart(c)
}

// commit sends an OffsetCommit for some of what c holds or is handing off,
// sometimes with an older epoch, sometimes for a partition it does not own.
func (r *randRun) commit(c *randClient, zombie bool) {
	e := r.env
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = "g"
	req.MemberID = c.id
	req.Generation = c.epoch
	if r.rng.IntN(4) == 0 {
		req.Generation -= int32(1 + r.rng.IntN(2))
	}
	var tps []TopicPartition
	for _, set := range []map[TopicPartition]bool{c.held, c.revoking} {
		for _, tp := range slices.SortedFunc(maps.Keys(set), compareTP) {
			if r.rng.IntN(2) == 0 {
				tps = append(tps, tp)
			}
		}
	}
	if r.rng.IntN(3) == 0 {
		tps = append(tps, TopicPartition{"t", int32(r.rng.IntN(16))})
	}
	if len(tps) == 0 {
		return
	}
	for _, tp := range sortTPs(tps) {
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == tp.Topic })
		if i < 0 {
			req.Topics = append(req.Topics, kmsg.OffsetCommitRequestTopic{Topic: tp.Topic})
			i = len(req.Topics) - 1
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = r.rng.Int64N(1000)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	_, member := e.g.consumer.members[c.id]
	resp := kmsg.NewPtrOffsetCommitResponse()
	e.g.Step(e.now, Request{Ref: c.label, Msg: req, Resp: resp, ClientID: c.label})
	r.drain(nil)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				r.accepted++
				if !member {
					r.t.Fatalf("%s (zombie=%v) had a commit of %s[%d] accepted though it is not a member", c.id, zombie, t.Topic, p.Partition)
				}
				// KIP-1251: never below the epoch at which the member
				// got the partition.
				if tok := e.g.offsets.m[TopicPartition{t.Topic, p.Partition}].token; tokenOf(req.Generation) < tok {
					r.t.Fatalf("%s committed %s[%d] at epoch %d, below its token %v", c.id, t.Topic, p.Partition, req.Generation, tok)
				}
			} else {
				r.rejected++
			}
		}
	}
}

// restartCoordinator replaces the group by one restored from what it
// persisted, as a coordinator restart or fail-over does; the clients carry
// on.
func (r *randRun) restartCoordinator() {
	g, err := Restore("g", &r.env.cfg, rand.New(rand.NewPCG(uint64(r.restarts), 5)), r.env.now, r.store.set.Group("g"))
	if err != nil {
		r.t.Fatalf("at %s: restore: %v", rel(r.env.now), err)
	}
	r.restarts++
	r.env.g = g
	g.SetGroupTargets(!r.env.targetsOff)
	if len(r.reissued) > 0 {
		// A restored group takes its members to hold grants of what they
		// own; the server reissues after a load while a rotation is
		// recent, as here.
		g.Step(r.env.now, ReissueGrants{})
	}
	r.drain(nil)
	r.store.check(r.t, g, r.env.now)
}

// drain applies a Ready to the record model and advances the group.
func (r *randRun) drain(_ any) {
	g := r.env.g
	rd := g.Ready()
	r.store.apply(r.t, rd)
	if r.env.targetsOff {
		for _, rec := range rd.Persist {
			if gr, ok := rec.(*GroupRecord); ok && gr.Targets != nil {
				r.t.Fatalf("at %s: targets off wrote %s", rel(r.env.now), renderRecord(rec))
			}
		}
	}
	clear(r.replyGrants)
	for _, rep := range rd.Replies {
		if rep.Grants == nil {
			continue
		}
		if !g.cfg.IssueGrants {
			r.t.Fatalf("at %s: a reply grants %+v without IssueGrants", rel(r.env.now), rep.Grants)
		}
		for _, p := range rep.Grants.Partitions {
			tp := TopicPartition{p.Topic, p.Partition}
			id, _, _ := r.env.topics.Lookup(p.Topic)
			if o, ok := g.owners.owner(tp); !ok || o.member != rep.Grants.Member || o.token != p.Token || p.TopicID != id {
				r.t.Fatalf("at %s: a reply grants %s[%d] (topic ID %v) at token %v to %s; g.owners holds %+v (%v), topic ID %v\n%s",
					rel(r.env.now), tp.Topic, tp.Partition, p.TopicID, p.Token, rep.Grants.Member, o, ok, id, g)
			}
		}
		r.replyGrants[rep.Ref.(string)] = rep.Grants
	}
	for _, rec := range rd.Persist {
		if err := r.model.apply(rec); err != nil {
			r.t.Fatalf("at %s: record %s: %v\n%s", rel(r.env.now), renderRecord(rec), err, g)
		}
	}
	for _, ev := range rd.Events {
		if ev.Kind == EventMemberExpired || ev.Kind == EventMemberRemoved {
			r.evictions++
		}
	}
	g.Advance(g.Ready())
}

func (r *randRun) check() {
	g := r.env.g
	// A restore check costs fifty steps; every few steps still covers
	// every kind of state.
	if r.checks++; r.checks%16 == 0 {
		r.store.check(r.t, g, r.env.now)
	}
	if err := consumerInvariantError(g); err != nil {
		r.t.Fatalf("at %s: %v\n%s", rel(r.env.now), err, g)
	}
	if g.epoch < r.lastEpoch {
		r.t.Fatalf("group epoch went from %d to %d", r.lastEpoch, g.epoch)
	}
	r.lastEpoch = g.epoch
	// What the clients that are members believe they hold (or are still
	// handing off) never overlaps.
	holder := map[TopicPartition]string{}
	for _, c := range r.clients {
		if _, ok := g.consumer.members[c.id]; !ok {
			continue
		}
		for _, set := range []map[TopicPartition]bool{c.held, c.revoking} {
			for tp := range set {
				if other, ok := holder[tp]; ok {
					r.t.Fatalf("at %s: %s[%d] held by clients %s and %s\n%s", rel(r.env.now), tp.Topic, tp.Partition, other, c.id, g)
				}
				holder[tp] = c.id
			}
		}
	}
	// The client's token of every partition it holds is the
	// coordinator's, while the coordinator has it as the owner.
	for _, c := range r.clients {
		if _, ok := g.consumer.members[c.id]; !ok {
			continue
		}
		for tp, tok := range c.tokens {
			if o, ok := g.owners.owner(tp); ok && o.member == c.id {
				r.tokensChecked++
				if o.token != tok {
					r.t.Fatalf("at %s: %s holds %s[%d] at token %v, the coordinator records %v\n%s",
						rel(r.env.now), c.id, tp.Topic, tp.Partition, tok, o.token, g)
				}
			}
		}
	}
	// Every partition a client holds was granted to it at its token.
	for _, c := range r.clients {
		if _, ok := g.consumer.members[c.id]; !ok || !g.cfg.IssueGrants {
			continue
		}
		for tp := range c.held {
			tok, ok := c.tokens[tp]
			if !ok {
				continue
			}
			if !c.granted[tp][tok] {
				r.t.Fatalf("at %s: %s holds %s[%d] at token %v, which no reply it received granted (granted %v)\n%s",
					rel(r.env.now), c.id, tp.Topic, tp.Partition, tok, c.granted[tp], g)
			}
			r.grantsChecked++
		}
	}
	if !maps.Equal(r.model.cur, g.owners.cur) {
		r.t.Fatalf("at %s: owners rebuilt from records %v differ from g.owners %v", rel(r.env.now), r.model.cur, g.owners.cur)
	}
}

// recordModel rebuilds partition ownership from persisted records alone.
type recordModel struct {
	epoch    int32
	cur      map[TopicPartition]owner
	last     map[TopicPartition]owner
	byMember map[string][]OwnedPartition
	// committed is the token of each partition's last accepted commit.
	committed map[TopicPartition]epoch.Token
	releases  int
}

func newRecordModel() recordModel {
	return recordModel{
		cur:       map[TopicPartition]owner{},
		last:      map[TopicPartition]owner{},
		byMember:  map[string][]OwnedPartition{},
		committed: map[TopicPartition]epoch.Token{},
	}
}

func (m *recordModel) release(member string, tp TopicPartition) {
	if o, ok := m.cur[tp]; ok && o.member == member {
		m.releases++
		delete(m.cur, tp)
		m.last[tp] = o
	}
}

func (m *recordModel) apply(rec Record) error {
	switch rec := rec.(type) {
	case *GroupRecord:
		if rec.Epoch < m.epoch {
			return fmt.Errorf("epoch went back from %d", m.epoch)
		}
		m.epoch = rec.Epoch
	case *MemberRecord:
		if rec.Deleted {
			for _, p := range m.byMember[rec.MemberID] {
				m.release(rec.MemberID, TopicPartition{p.Topic, p.Partition})
			}
			delete(m.byMember, rec.MemberID)
		}
	case *AssignmentRecord:
		id := rec.MemberID
		for _, p := range m.byMember[id] {
			tp := TopicPartition{p.Topic, p.Partition}
			if !slices.ContainsFunc(rec.Owned, func(q OwnedPartition) bool {
				return q.Topic == p.Topic && q.Partition == p.Partition && q.Token == p.Token
			}) {
				m.release(id, tp)
			}
		}
		for _, p := range rec.Owned {
			tp := TopicPartition{p.Topic, p.Partition}
			if p.Token > tokenOf(m.epoch) {
				return fmt.Errorf("token %v above the epoch %d", p.Token, m.epoch)
			}
			if o, ok := m.cur[tp]; ok {
				if o.member != id || o.token != p.Token {
					return fmt.Errorf("%s[%d] given to %s@%v while %s@%v holds it", tp.Topic, tp.Partition, id, p.Token, o.member, o.token)
				}
				continue
			}
			if l, ok := m.last[tp]; ok {
				if l.member != id && p.Token <= l.token || p.Token < l.token {
					return fmt.Errorf("%s[%d] given to %s@%v after %s@%v: tokens must grow", tp.Topic, tp.Partition, id, p.Token, l.member, l.token)
				}
			}
			delete(m.last, tp)
			m.cur[tp] = owner{id, p.Token}
		}
		m.byMember[id] = slices.Clone(rec.Owned)
	case *OffsetRecord:
		if rec.Deleted {
			return nil
		}
		tp := TopicPartition{rec.Topic, rec.Partition}
		if rec.Token.IsNone() {
			if rec.MemberID != "" {
				return fmt.Errorf("commit by %s without a token", rec.MemberID)
			}
			return nil
		}
		o, ok := m.cur[tp]
		if !ok {
			o, ok = m.last[tp]
		}
		if !ok || o.member != rec.MemberID || o.token != rec.Token {
			return fmt.Errorf("commit of %s[%d] by %s@%v, but the records say %+v", tp.Topic, tp.Partition, rec.MemberID, rec.Token, o)
		}
		if rec.Token < m.committed[tp] {
			return fmt.Errorf("commit of %s[%d] at token %v after one at %v", tp.Topic, tp.Partition, rec.Token, m.committed[tp])
		}
		m.committed[tp] = rec.Token
	}
	return nil
}
