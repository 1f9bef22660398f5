package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/epoch"
)

// TestClassicRandomized drives a classic group with simulated clients that
// behave like kgo consumers (eager or cooperative, dynamic or static) and
// misbehave in the ways real ones do: they pause past their session (some
// with their connection closed under them, so they are expelled a
// connection-loss grace later), restart, crash without leaving (closing
// their connection, or not) and retry requests. Time advances in
// random steps. After every step it checks:
//
//   - replaying the records the group emitted gives its members, its
//     generation and its partition owners, and in that replay no partition
//     ever has two owners, and a partition that changes hands gets a token
//     higher than every earlier one (equal only when a static member is
//     replaced);
//   - every accepted commit came from the partition's owner, or from its
//     last owner before anyone else got it (the hand-off), under that
//     owner's token; the accepted tokens of a partition never decrease;
//     and the client that committed believed it held the partition from a
//     generation at or after that token;
//   - the generation never decreases; the group's internal counters and
//     cached deadlines agree with its members;
//   - every request is answered exactly once, with a response that encodes
//     and decodes at its version (checked to the end, after the clients
//     stop and the group drains).
func TestClassicRandomized(t *testing.T) {
	seeds := 120
	steps := 400
	if testing.Short() {
		seeds = 20
	}
	var total classicSimStats
	for seed := range seeds {
		s := newClassicSim(t, uint64(seed))
		for range steps {
			s.step()
			if t.Failed() {
				t.Fatalf("seed %d failed at %s (mode %s)", seed, rel(s.now), s.mode)
			}
		}
		s.drainAll()
		if t.Failed() {
			t.Fatalf("seed %d failed while draining", seed)
		}
		total.add(&s.stats)
	}
	t.Logf("%+v", total)
	// The run must have exercised what it checks.
	for name, v := range map[string]int{
		"accepted commits": total.accepted, "refused commits": total.refused,
		"hand-off commits": total.handoffs, "generations": total.generations,
		"static replacements": total.replacements, "fenced": total.fenced,
		"expiries": total.expiries, "moves": total.moves, "restarts": total.restarts,
	} {
		if v == 0 {
			t.Errorf("no %s in %d seeds", name, seeds)
		}
	}
}

type classicSimStats struct {
	accepted, refused, handoffs, generations, replacements, fenced, expiries, moves, restarts int
}

func (s *classicSimStats) add(o *classicSimStats) {
	s.accepted += o.accepted
	s.refused += o.refused
	s.handoffs += o.handoffs
	s.generations += o.generations
	s.replacements += o.replacements
	s.fenced += o.fenced
	s.expiries += o.expiries
	s.moves += o.moves
	s.restarts += o.restarts
}

const classicSimPartitions = 12

type classicSimPhase uint8

const (
	simIdle    classicSimPhase = iota // must (re)join
	simJoining                        // JoinGroup parked
	simJoined                         // must sync
	simSyncing                        // SyncGroup parked
	simStable
)

// classicSimClient is one process: a new incarnation of a static member
// or a restarted dynamic member is a new client.
type classicSimClient struct {
	n         int
	instance  string
	id        string
	dead      bool // stopped sending; replies are still absorbed
	zombie    bool // replaced static incarnation that may still send
	session   time.Duration
	rebalance time.Duration

	phase   classicSimPhase
	waiting simRef // the JoinGroup or SyncGroup it waits for
	gen     int32
	// syncedGen is the generation of the last assignment it received.
	syncedGen int32
	leader    bool
	skip      bool
	members   []kmsg.JoinGroupResponseMember

	// assigned is the last assignment synced to this member ID, with the
	// generation from which the client holds each partition; held is what
	// it holds now (eager clients drop everything when they rejoin);
	// handoff are partitions it just lost and may commit once.
	assigned map[TopicPartition]epoch.Token
	held     map[TopicPartition]bool
	handoff  map[TopicPartition]epoch.Token

	pausedUntil time.Time
}

type simRef struct {
	client int
	seq    int
	kind   string
}

func (r simRef) String() string { return fmt.Sprintf("%s#%d(c%d)", r.kind, r.seq, r.client) }

type simCommit struct {
	client *classicSimClient
	tps    []TopicPartition
}

type classicSim struct {
	t           *testing.T
	rng         *rand.Rand
	mode        string // "eager" or "cooperative"
	cfg         Config
	g           *Group
	now         time.Time
	clients     []*classicSimClient
	nextInst    int
	seq         int
	outstanding map[simRef]bool
	commits     map[simRef]simCommit
	nextCommit  simCommit
	stats       classicSimStats

	// The replayed records.
	recMembers map[string]map[TopicPartition]epoch.Token
	recEpoch   int32
	holder     map[TopicPartition]owner
	last       map[TopicPartition]owner
	committed  map[TopicPartition]epoch.Token
	lastEpoch  int32
	// replacedGrants are the grants a static incarnation took over from
	// its predecessor, by its member ID, as the group recorded them.
	replacedGrants map[string]map[TopicPartition]epoch.Token

	// later holds what clients do in reaction to a reply; it runs once
	// the Ready that carried the reply has been advanced.
	later []func()

	// store follows what the group persisted; restartRng replaces the
	// group by its restored copy now and then (a coordinator restart).
	store      *restoreChecker
	checks     int
	restartRng *rand.Rand
}

func newClassicSim(t *testing.T, seed uint64) *classicSim {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	topics := NewStaticTopics()
	topics.Add("t", TopicID{15: 1}, classicSimPartitions)
	cfg := DefaultConfig()
	cfg.Topics = topics
	cfg.InitialRebalanceDelay = time.Duration(rng.IntN(4)) * time.Second
	if rng.IntN(4) == 0 {
		cfg.MaxGroupSize = 3 + rng.IntN(3)
	}
	s := &classicSim{
		t:           t,
		rng:         rng,
		mode:        []string{"eager", "cooperative"}[rng.IntN(2)],
		cfg:         cfg,
		now:         testEpoch,
		outstanding: map[simRef]bool{},
		commits:     map[simRef]simCommit{},
		recMembers:  map[string]map[TopicPartition]epoch.Token{},
		holder:      map[TopicPartition]owner{},
		last:        map[TopicPartition]owner{},
		committed:   map[TopicPartition]epoch.Token{},

		replacedGrants: map[string]map[TopicPartition]epoch.Token{},

		store:      newRestoreChecker(),
		restartRng: rand.New(rand.NewPCG(seed, 0xbad)),
	}
	s.g = NewGroup("g", &s.cfg, rand.New(rand.NewPCG(seed, 7)))
	for range 3 + rng.IntN(4) {
		s.newClient("")
	}
	return s
}

func (s *classicSim) newClient(instance string) *classicSimClient {
	if instance == "" && s.rng.IntN(2) == 0 {
		s.nextInst++
		instance = fmt.Sprintf("i%d", s.nextInst)
	}
	c := &classicSimClient{
		n:         len(s.clients),
		instance:  instance,
		session:   time.Duration(6+s.rng.IntN(7)) * time.Second,
		rebalance: time.Duration(4+s.rng.IntN(17)) * time.Second,
		assigned:  map[TopicPartition]epoch.Token{},
		held:      map[TopicPartition]bool{},
		handoff:   map[TopicPartition]epoch.Token{},
	}
	s.clients = append(s.clients, c)
	return c
}

func (s *classicSim) step() {
	if s.restartRng.IntN(200) == 0 {
		s.restartCoordinator()
	}
	if s.rng.IntN(3) == 0 {
		s.advance(time.Duration(s.rng.IntN(2000)) * time.Millisecond)
		return
	}
	if s.rng.IntN(40) == 0 {
		s.newClient("")
	}
	live := slices.DeleteFunc(slices.Clone(s.clients), func(c *classicSimClient) bool { return c.dead })
	if len(live) == 0 {
		s.newClient("")
		return
	}
	c := live[s.rng.IntN(len(live))]
	if c.zombie {
		// A replaced incarnation that has not noticed yet.
		if s.rng.IntN(2) == 0 {
			s.heartbeat(c)
		} else {
			s.commitSome(c)
		}
		return
	}
	if s.now.Before(c.pausedUntil) {
		return
	}
	switch c.phase {
	case simIdle:
		s.join(c)
	case simJoining:
		switch s.rng.IntN(20) {
		case 0, 1:
			s.join(c) // a retry on a new connection
		case 2:
			s.closeConn(c) // its connection drops while it waits
		}
	case simJoined:
		s.sync(c)
	case simSyncing:
		if s.rng.IntN(10) == 0 {
			s.sync(c)
		}
	case simStable:
		switch r := s.rng.IntN(100); {
		case r < 55:
			s.heartbeat(c)
		case r < 80:
			s.commitSome(c)
		case r < 84:
			c.pausedUntil = s.now.Add(time.Duration(1+s.rng.IntN(15)) * time.Second)
			if s.rng.IntN(2) == 0 {
				// Its connection closes under it (a proxy's idle
				// close): expelled a grace later, it wakes a zombie.
				s.closeConn(c)
			}
		case r < 87:
			s.restart(c)
		case r < 89:
			if c.instance == "" {
				if s.rng.IntN(2) == 0 {
					s.send(c, "leave", s.leaveReq(c))
				} else {
					s.closeConn(c) // killed: its kernel closes the connection
				}
			}
			c.dead = true
		case r < 91:
			s.join(c) // e.g. the leader noticing new topics
		default:
			s.heartbeat(c)
		}
	}
}

// restartCoordinator replaces the group by one restored from what it
// persisted. The requests parked in the old group are answered as the
// server answers them when it drops a group, COORDINATOR_NOT_AVAILABLE,
// and their clients retry.
func (s *classicSim) restartCoordinator() {
	g, err := Restore("g", &s.cfg, rand.New(rand.NewPCG(uint64(s.stats.restarts), 9)), s.now, s.store.set.Group("g"))
	if err != nil {
		s.t.Fatalf("at %s: restore: %v", rel(s.now), err)
	}
	s.stats.restarts++
	s.g = g
	refs := slices.SortedFunc(maps.Keys(s.outstanding), func(a, b simRef) int { return a.seq - b.seq })
	for _, ref := range refs {
		var resp kmsg.Response
		switch ref.kind {
		case "join":
			resp = &kmsg.JoinGroupResponse{ErrorCode: kerr.CoordinatorNotAvailable.Code, Generation: -1}
		case "sync":
			resp = &kmsg.SyncGroupResponse{ErrorCode: kerr.CoordinatorNotAvailable.Code}
		default:
			s.t.Fatalf("%v is still outstanding between steps", ref)
		}
		delete(s.outstanding, ref)
		s.deliver(ref, resp)
	}
	s.process()
}

// restart replaces c by a new process: a static member comes back under
// its instance ID (the old one becomes a zombie), a dynamic one leaves and
// a new member joins.
func (s *classicSim) restart(c *classicSimClient) {
	if c.instance == "" {
		s.send(c, "leave", s.leaveReq(c))
		c.dead = true
		s.newClient("")
		return
	}
	c.zombie = true
	nc := s.newClient(c.instance)
	nc.session, nc.rebalance = c.session, c.rebalance
	s.join(nc)
}

func (s *classicSim) leaveReq(c *classicSimClient) *kmsg.LeaveGroupRequest {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = "g"
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = c.id
	req.Members = append(req.Members, m)
	return req
}

func (s *classicSim) protocol() string {
	if s.mode == "eager" {
		return "range"
	}
	return "cooperative-sticky"
}

func (s *classicSim) join(c *classicSimClient) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = int16(4 + s.rng.IntN(6))
	req.Group = "g"
	req.SessionTimeoutMillis = int32(c.session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(c.rebalance.Milliseconds())
	req.MemberID = c.id
	if c.instance != "" {
		req.InstanceID = kmsg.StringPtr(c.instance)
	}
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	if s.mode == "cooperative" {
		meta.Version = 1
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = "t"
		for _, tp := range sortedTPs(c.held) {
			owned.Partitions = append(owned.Partitions, tp.Partition)
		}
		if len(owned.Partitions) > 0 {
			meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
		}
	}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: s.protocol(), Metadata: meta.AppendTo(nil)}}
	c.phase = simJoining
	s.send(c, "join", req)
}

func (s *classicSim) sync(c *classicSimClient) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = int16(s.rng.IntN(6))
	req.Group = "g"
	req.Generation = c.gen
	req.MemberID = c.id
	if c.instance != "" && req.Version >= 3 {
		req.InstanceID = kmsg.StringPtr(c.instance)
	}
	if c.leader && !c.skip {
		req.GroupAssignment = s.plan(c)
	}
	c.phase = simSyncing
	s.send(c, "sync", req)
}

// plan is the leader's assignment: assignor.Uniform over the members, and
// for cooperative clients without the partitions another member still
// reports owning (they are revoked first and assigned next generation).
func (s *classicSim) plan(c *classicSimClient) []kmsg.SyncGroupRequestGroupAssignment {
	in := assignor.Input{Topics: []assignor.Topic{{Name: "t", Partitions: classicSimPartitions}}}
	ownedBy := map[int32]string{}
	for _, m := range c.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			s.t.Errorf("leader got undecodable metadata for %s: %v", m.MemberID, err)
		}
		am := assignor.Member{ID: m.MemberID}
		for _, o := range meta.OwnedPartitions {
			for _, p := range o.Partitions {
				am.Owned = append(am.Owned, assignor.TopicPartition{Topic: o.Topic, Partition: p})
				if _, ok := ownedBy[p]; !ok {
					ownedBy[p] = m.MemberID
				}
			}
		}
		in.Members = append(in.Members, am)
	}
	target, err := assignor.Uniform().Assign(in)
	if err != nil {
		s.t.Fatalf("uniform: %v", err)
	}
	var out []kmsg.SyncGroupRequestGroupAssignment
	for _, id := range slices.Sorted(maps.Keys(target)) {
		var a kmsg.ConsumerMemberAssignment
		at := kmsg.ConsumerMemberAssignmentTopic{Topic: "t"}
		for _, tp := range target[id] {
			if o, ok := ownedBy[tp.Partition]; ok && o != id && s.mode == "cooperative" {
				continue
			}
			at.Partitions = append(at.Partitions, tp.Partition)
		}
		if len(at.Partitions) > 0 {
			a.Topics = append(a.Topics, at)
		}
		out = append(out, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)})
	}
	return out
}

func (s *classicSim) heartbeat(c *classicSimClient) {
	if c.id == "" {
		return
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = int16(s.rng.IntN(5))
	req.Group = "g"
	req.Generation = c.gen
	req.MemberID = c.id
	if c.instance != "" && req.Version >= 3 {
		req.InstanceID = kmsg.StringPtr(c.instance)
	}
	s.send(c, "heartbeat", req)
}

// commitSome commits some of what c holds and, first, its hand-offs.
func (s *classicSim) commitSome(c *classicSimClient) {
	tps := sortedTPs(c.held)
	s.rng.Shuffle(len(tps), func(i, j int) { tps[i], tps[j] = tps[j], tps[i] })
	tps = tps[:s.rng.IntN(len(tps)+1)]
	tps = append(tps, sortedTPs(c.handoff)...)
	s.commit(c, tps)
}

func (s *classicSim) commit(c *classicSimClient, tps []TopicPartition) {
	if len(tps) == 0 || c.id == "" {
		return
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = int16(7 + s.rng.IntN(3))
	req.Group = "g"
	req.Generation = c.gen
	req.MemberID = c.id
	if c.instance != "" {
		req.InstanceID = kmsg.StringPtr(c.instance)
	}
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for _, tp := range tps {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = int64(s.seq)
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	s.nextCommit = simCommit{c, tps}
	s.send(c, "commit", req)
}

func (s *classicSim) send(c *classicSimClient, kind string, msg kmsg.Request) simRef {
	s.seq++
	ref := simRef{client: c.n, seq: s.seq, kind: kind}
	s.outstanding[ref] = true
	switch kind {
	case "commit":
		s.commits[ref] = s.nextCommit
	case "join", "sync":
		c.waiting = ref
	}
	s.g.Step(s.now, Request{Ref: ref, Msg: msg, ClientID: fmt.Sprintf("c%d", c.n), ClientHost: "/10.0.0.1"})
	s.process()
	return ref
}

// advance moves the clock by d, ticking at every due instant.
func (s *classicSim) advance(d time.Duration) {
	end := s.now.Add(d)
	for {
		next := s.g.Ready().NextTick
		if next.IsZero() || next.After(end) {
			break
		}
		if next.After(s.now) {
			s.now = next
		}
		s.g.Step(s.now, Tick{})
		s.process()
		if n := s.g.Ready().NextTick; !n.IsZero() && !n.After(s.now) {
			s.t.Fatalf("the group asks to be ticked at %s again after a tick at %s", rel(n), rel(s.now))
		}
	}
	s.now = end
}

// drainAll stops the clients and lets the group run out of members: every
// parked request must then have been answered.
// closeConn tells the group that c's connection closed.
func (s *classicSim) closeConn(c *classicSimClient) {
	if c.id != "" {
		s.g.Step(s.now, ConnectionClosed{MemberID: c.id})
		s.process()
	}
}

func (s *classicSim) drainAll() {
	for _, c := range s.clients {
		c.dead = true
	}
	for range 20 {
		s.advance(time.Minute)
	}
	if len(s.outstanding) > 0 {
		s.t.Errorf("requests never answered: %v", slices.Collect(maps.Keys(s.outstanding)))
	}
	if !s.g.Empty() || len(s.g.owners.cur) > 0 {
		s.t.Errorf("group not empty after draining:\n%s", s.g)
	}
}

// process takes the group's Ready: replays the records, checks them,
// delivers the replies and checks the group's invariants.
func (s *classicSim) process() {
	rd := s.g.Ready()
	s.replay(rd)
	for _, ev := range rd.Events {
		switch ev.Kind {
		case EventMemberExpired:
			s.stats.expiries++
		case EventRebalanceCompleted:
			s.stats.moves += ev.Moves
		case EventMemberRemoved:
			if ev.Reason == "static-member-replaced" {
				s.stats.replacements++
			}
		}
	}
	for _, r := range rd.Replies {
		ref := r.Ref.(simRef)
		if !s.outstanding[ref] {
			s.t.Errorf("%v answered twice or never asked", ref)
		}
		delete(s.outstanding, ref)
		classicCheckEncodes(s.t, r.Msg)
		s.deliver(ref, r.Msg)
	}
	s.g.Advance(rd)
	if err := classicInvariants(s.g); err != nil {
		s.t.Errorf("invariant: %v\n%s", err, s.g)
	}
	s.store.apply(s.t, rd)
	// A restore check costs fifty steps; every few steps still covers
	// every kind of state.
	if s.checks++; s.checks%8 == 0 {
		if err := s.store.checkErr(s.g, s.now); err != nil {
			s.t.Errorf("at %s: %v\n%s", rel(s.now), err, s.g)
		}
	}
	if s.g.Epoch() < s.lastEpoch {
		s.t.Errorf("epoch went back from %d to %d", s.lastEpoch, s.g.Epoch())
	}
	s.lastEpoch = s.g.Epoch()
	for len(s.later) > 0 {
		f := s.later[0]
		s.later = s.later[1:]
		f()
	}
}

// replay applies the records of one Ready to the replayed state and checks
// it against the group.
func (s *classicSim) replay(rd Ready) {
	before := maps.Clone(s.holder)
	replaced := map[string]bool{}
	for _, ev := range rd.Events {
		if ev.Kind == EventMemberRemoved && ev.Reason == "static-member-replaced" {
			replaced[ev.MemberID] = true
		}
	}
	for _, r := range rd.Persist {
		switch r := r.(type) {
		case *GroupRecord:
			if r.Epoch < s.recEpoch {
				s.t.Errorf("group record epoch %d after %d", r.Epoch, s.recEpoch)
			}
			if r.Epoch > s.recEpoch {
				s.stats.generations++
			}
			s.recEpoch = r.Epoch
		case *MemberRecord:
			if r.Deleted {
				delete(s.recMembers, r.MemberID)
			} else if s.recMembers[r.MemberID] == nil {
				s.recMembers[r.MemberID] = map[TopicPartition]epoch.Token{}
			}
		case *AssignmentRecord:
			if s.recMembers[r.MemberID] == nil {
				s.t.Errorf("assignment record for unknown member %s", r.MemberID)
				continue
			}
			owned := map[TopicPartition]epoch.Token{}
			for _, o := range r.Owned {
				owned[TopicPartition{o.Topic, o.Partition}] = o.Token
			}
			s.recMembers[r.MemberID] = owned
			if len(replaced) > 0 {
				s.replacedGrants[r.MemberID] = maps.Clone(owned)
			}
		case *OffsetRecord:
			tp := TopicPartition{r.Topic, r.Partition}
			if r.Token < s.committed[tp] {
				s.t.Errorf("commit of %v under token %v after one under %v", tp, r.Token, s.committed[tp])
			}
			s.committed[tp] = r.Token
			h, held := s.holder[tp]
			l := s.last[tp]
			if !(held && h.member == r.MemberID && h.token == r.Token) && !(!held && l.member == r.MemberID && l.token == r.Token) {
				s.t.Errorf("commit of %v by %s under %v, but the records say holder %v (held %t), last %v", tp, r.MemberID, r.Token, h, held, l)
			}
			if !held {
				s.stats.handoffs++
			}
		}
	}
	// The replayed owners after the Ready.
	holder := map[TopicPartition]owner{}
	for id, owned := range s.recMembers {
		for tp, tok := range owned {
			if h, ok := holder[tp]; ok {
				s.t.Errorf("records give %v to both %s and %s", tp, h.member, id)
			}
			holder[tp] = owner{id, tok}
		}
	}
	for tp, b := range before {
		if h, ok := holder[tp]; !ok || h.member != b.member {
			s.last[tp] = b
		}
	}
	for tp, h := range holder {
		b, had := before[tp]
		if had && b.member == h.member {
			if b.token != h.token {
				s.t.Errorf("%v kept by %s changed token %v -> %v", tp, h.member, b.token, h.token)
			}
			continue
		}
		prev, ok := s.last[tp]
		if had {
			prev, ok = b, true
		}
		if ok && !(h.token > prev.token || h.token == prev.token && replaced[prev.member]) {
			s.t.Errorf("%v passed from %s@%v to %s@%v", tp, prev.member, prev.token, h.member, h.token)
		}
	}
	s.holder = holder
	// The replay agrees with the group.
	if !maps.Equal(holder, s.g.owners.cur) {
		s.t.Errorf("replayed owners %v, group owners %v", holder, s.g.owners.cur)
	}
	if s.g.typ == Classic && !slices.Equal(slices.Sorted(maps.Keys(s.recMembers)), slices.Sorted(maps.Keys(s.g.classic.members))) {
		s.t.Errorf("replayed members %v, group members %v", slices.Sorted(maps.Keys(s.recMembers)), slices.Sorted(maps.Keys(s.g.classic.members)))
	}
	if s.recEpoch != s.g.Epoch() {
		s.t.Errorf("replayed epoch %d, group epoch %d", s.recEpoch, s.g.Epoch())
	}
}

// deliver hands a reply to the client that sent the request.
func (s *classicSim) deliver(ref simRef, msg kmsg.Response) {
	c := s.clients[ref.client]
	switch resp := msg.(type) {
	case *kmsg.JoinGroupResponse:
		if ref != c.waiting {
			return // superseded by a retry
		}
		switch resp.ErrorCode {
		case 0:
			c.id, c.gen, c.members, c.skip = resp.MemberID, resp.Generation, resp.Members, resp.SkipAssignment
			c.leader = resp.LeaderID == c.id
			c.phase = simJoined
		case kerr.MemberIDRequired.Code:
			c.id = resp.MemberID
			c.phase = simIdle
		case kerr.RebalanceInProgress.Code:
			c.phase = simIdle
		case kerr.GroupMaxSizeReached.Code:
			c.dead = true
		case kerr.CoordinatorNotAvailable.Code:
			c.phase = simIdle // it finds the coordinator again and retries
		default:
			s.lost(c, resp.ErrorCode)
		}
	case *kmsg.SyncGroupResponse:
		if ref != c.waiting {
			return
		}
		switch resp.ErrorCode {
		case 0:
			s.synced(c, resp.MemberAssignment)
		case kerr.RebalanceInProgress.Code, kerr.CoordinatorNotAvailable.Code:
			c.phase = simIdle
		default:
			s.lost(c, resp.ErrorCode)
		}
	case *kmsg.HeartbeatResponse:
		switch resp.ErrorCode {
		case 0:
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			if c.zombie || c.phase != simStable {
				return
			}
			s.later = append(s.later, func() {
				if c.dead || c.phase != simStable {
					return
				}
				if s.mode == "eager" {
					// Eager clients commit what they hold
					// while revoking, before they rejoin.
					s.commit(c, sortedTPs(c.held))
					clear(c.held)
				}
				s.join(c)
			})
		default:
			s.lost(c, resp.ErrorCode)
		}
	case *kmsg.OffsetCommitResponse:
		s.committedBy(ref, resp)
	case *kmsg.LeaveGroupResponse:
	}
}

// lost handles an error that ends the client's membership.
func (s *classicSim) lost(c *classicSimClient, code int16) {
	switch code {
	case kerr.FencedInstanceID.Code:
		s.stats.fenced++
		c.dead = true
	case kerr.UnknownMemberID.Code:
		if c.zombie {
			c.dead = true
			return
		}
		c.id = ""
		clear(c.assigned)
		clear(c.held)
		clear(c.handoff)
		c.phase = simIdle
	case kerr.IllegalGeneration.Code:
		c.phase = simIdle
	default:
		s.t.Errorf("client %d: unexpected error %v", c.n, kerr.ErrorForCode(code))
	}
}

// synced applies an assignment: partitions the member was already assigned
// keep the generation from which it holds them, new ones date from this
// generation (or, for a static incarnation, from its predecessor's grant).
func (s *classicSim) synced(c *classicSimClient, raw []byte) {
	inherit := s.replacedGrants[c.id]
	delete(s.replacedGrants, c.id)
	// A client that missed a generation's assignment cannot know what it
	// held through it: it then dates everything from this generation,
	// which is never below the group's token.
	continuous := c.syncedGen == c.gen || c.syncedGen == c.gen-1
	c.syncedGen = c.gen
	now := map[TopicPartition]epoch.Token{}
	for _, tp := range decodeConsumerAssignment(raw) {
		switch tok, ok := c.assigned[tp]; {
		case ok && continuous:
			now[tp] = tok
		case inherit[tp] != 0:
			now[tp] = inherit[tp]
		default:
			now[tp] = epoch.Token(c.gen)
		}
	}
	clear(c.handoff)
	for tp, tok := range c.assigned {
		if _, ok := now[tp]; !ok && c.held[tp] {
			c.handoff[tp] = tok
		}
	}
	c.assigned = now
	clear(c.held)
	for tp := range now {
		c.held[tp] = true
	}
	c.phase = simStable
	if len(c.handoff) > 0 {
		s.later = append(s.later, func() {
			if c.dead {
				return
			}
			s.commit(c, sortedTPs(c.handoff))
			clear(c.handoff)
			if s.mode == "cooperative" && c.phase == simStable {
				s.join(c) // rejoin with the new owned set
			}
		})
	}
}

// committedBy checks a commit's answer against what the client believed.
func (s *classicSim) committedBy(ref simRef, resp *kmsg.OffsetCommitResponse) {
	sc := s.commits[ref]
	delete(s.commits, ref)
	c := sc.client
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			tp := TopicPartition{rt.Topic, rp.Partition}
			if rp.ErrorCode != 0 {
				s.stats.refused++
				if rp.ErrorCode == kerr.FencedInstanceID.Code {
					s.stats.fenced++
				}
				continue
			}
			s.stats.accepted++
			// The replay checked the token against the records; the
			// client must have believed it held tp from that token on.
			tok := s.committed[tp]
			believed, ok := c.handoff[tp]
			if !ok {
				believed, ok = c.assigned[tp]
			}
			if !ok || tok > believed {
				s.t.Errorf("client %d committed %v under token %v but holds it from generation %v (%t)", c.n, tp, tok, believed, ok)
			}
		}
	}
}

func sortedTPs[V any](m map[TopicPartition]V) []TopicPartition {
	tps := slices.Collect(maps.Keys(m))
	slices.SortFunc(tps, compareTP)
	return tps
}

// classicCheckEncodes encodes a response at its version and decodes it.
func classicCheckEncodes(t *testing.T, r kmsg.Response) {
	fresh := kmsg.ResponseForKey(r.Key())
	fresh.SetVersion(r.GetVersion())
	if err := fresh.ReadFrom(r.AppendTo(nil)); err != nil {
		t.Errorf("%T v%d does not decode: %v", r, r.GetVersion(), err)
	}
}

// classicInvariants checks the classic state's counters, caches and
// cross-references against its members.
func classicInvariants(g *Group) error {
	if g.typ != Classic {
		return nil
	}
	c := &g.classic
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	joined, pendingSyncs := 0, 0
	protocols := map[string]int{}
	for id, m := range c.members {
		if m.id != id {
			bad("member %s stored under %s", m.id, id)
		}
		if m.join != nil {
			joined++
			if c.phase != classicPreparing {
				bad("%s has a parked join in %s", id, c.phase)
			}
		}
		if m.sync != nil && c.phase != classicCompleting {
			bad("%s has a parked sync in %s", id, c.phase)
		}
		if m.pendingSync {
			pendingSyncs++
		}
		if !m.parked() && (c.sessNext.IsZero() || m.deadline.Before(c.sessNext)) {
			bad("%s expires at %s, before the cached %s", id, rel(m.deadline), rel(c.sessNext))
		}
		if m.static && c.static[m.instanceID] != id {
			bad("static %s not mapped from %s", id, m.instanceID)
		}
		for _, p := range m.protocols {
			protocols[p.name]++
		}
		for _, tp := range m.owned {
			if o, ok := g.owners.owner(tp); !ok || o.member != id {
				bad("%s believes it owns %v, owners say %v", id, tp, o)
			}
		}
	}
	for tp, o := range g.owners.cur {
		m, ok := c.members[o.member]
		if !ok {
			bad("%v owned by %s, who is no member", tp, o.member)
		} else if _, ok := slices.BinarySearchFunc(m.owned, tp, compareTP); !ok {
			bad("%v owned by %s, not in its owned list", tp, o.member)
		}
	}
	for inst, id := range c.static {
		if m, ok := c.members[id]; !ok || m.instanceID != inst {
			bad("instance %s maps to %s, who is not its member", inst, id)
		}
	}
	for _, p := range c.pending {
		if c.pendingNext.IsZero() || p.deadline.Before(c.pendingNext) {
			bad("pending member expires at %s, before the cached %s", rel(p.deadline), rel(c.pendingNext))
		}
	}
	if joined != c.joined || pendingSyncs != c.pendingSyncs {
		bad("counted %d joined and %d pending syncs, cached %d and %d", joined, pendingSyncs, c.joined, c.pendingSyncs)
	}
	if !maps.Equal(protocols, c.protocols) {
		bad("protocol counts %v, cached %v", protocols, c.protocols)
	}
	switch c.phase {
	case classicEmpty:
		if len(c.members) > 0 {
			bad("Empty with %d members", len(c.members))
		}
	case classicPreparing:
		if c.joinDeadline.IsZero() {
			bad("PreparingRebalance without a join deadline")
		}
	case classicCompleting, classicStable:
		if _, ok := c.members[c.leader]; !ok {
			bad("%s without a leader", c.phase)
		}
		if c.pendingSyncs > 0 && c.syncDeadline.IsZero() {
			bad("pending syncs without a sync deadline")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
