package coordinator

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzConsumerGroup drives a KIP-848 group with request sequences whose
// every field comes from the fuzzer: ConsumerGroupHeartbeat v0 and v1 from
// known, unknown, empty and blank member IDs at any member epoch (0, -1,
// -2, the member's current, previous or a stale one, the group's, huge),
// with or without instance IDs and racks, any rebalance timeout,
// subscriptions by names and by regex (valid or not), reported partitions
// that are subsets, supersets, unknown topic IDs, duplicates or out of
// range, valid and invalid server assignors; OffsetCommit at every version
// (v9 with member epochs, v10 with topic IDs, older ones with generations),
// OffsetDelete, Group.Delete, topics created under the group
// (TopicsChanged), OffsetFetch and ConsumerGroupDescribe, time jumps short
// of and past the session and rebalance timeouts and the join coalescing
// window, and coordinator restarts (the group replaced by its Restore from
// what it persisted), each of which switches the join coalescing window on
// or off, as a restart with new settings would.
//
// Every request is decoded from its own encoding first, so it carries only
// what its version can say on the wire. After every step groupFuzz.check
// holds: see there.
func FuzzConsumerGroup(f *testing.F) {
	for _, s := range consumerFuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newGroupFuzz(t, data)
		for ops := 0; h.r.more() && ops < 200; ops++ {
			h.consumerOp(h.r.byte() % fuzzConsumerOps)
		}
		h.finish()
	})
}

// FuzzMixedGroup drives one group with both protocols: classic JoinGroup,
// SyncGroup, Heartbeat and LeaveGroup beside everything FuzzConsumerGroup
// sends, so that an empty group changes type back and forth, and requests
// of one protocol reach a group of the other. The checks are
// FuzzConsumerGroup's, with the classic group's invariants when it is
// classic.
func FuzzMixedGroup(f *testing.F) {
	for _, s := range mixedFuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newGroupFuzz(t, data)
		for ops := 0; h.r.more() && ops < 200; ops++ {
			switch op := h.r.byte() % fuzzMixedOps; {
			case op < fuzzConsumerOps:
				h.consumerOp(op)
			case op < opClassicSync, op > opClassicLeave:
				h.classicJoinOp()
			case op < opClassicBeat:
				h.classicSyncOp()
			case op < opClassicLeave:
				h.classicHeartbeatOp()
			default:
				h.classicLeaveOp()
			}
		}
		h.finish()
	})
}

// fuzzTrace logs every step of a fuzz input, to read a crash:
// go test -run 'FuzzConsumerGroup/<name>' -fuzztrace -v ./coordinator/
var fuzzTrace = flag.Bool("fuzztrace", false, "log the steps of the fuzz targets")

// The fuzzer's byte layout. Every operation starts with one byte that
// chooses it (consumerOp) and reads a fixed number of bytes after it, one
// per field, each choosing from a table; a zero byte, which is also what
// the reader hands out once the input is exhausted, chooses the ordinary
// value. An operation that leaves a timer due (a rebalance timeout of 0)
// is followed by one more byte, which says whether to tick at once. The
// seeds below spell sequences in this layout.
const (
	fuzzConsumerOps = 21 // FuzzConsumerGroup's operations
	fuzzMixedOps    = 33 // FuzzMixedGroup's

	opHeartbeat    = 0  // 0-7, 19, 20: 12 bytes, see heartbeatOp
	opCommit       = 8  // 8-10: 8 bytes, see commitOp
	opTick         = 11 // 11-13: 1 byte, the time jump
	opOffsetDelete = 14 // 2 bytes: topic, partition mask
	opAddTopic     = 15 // no bytes
	opDelete       = 16 // no bytes
	opRead         = 17 // 3 bytes: version, member, epoch
	opRestart      = 18 // no bytes

	opClassicJoin  = 21 // 21-24, 31, 32: 8 bytes, see classicJoinOp
	opClassicSync  = 25 // 25-27: 6 bytes, see classicSyncOp
	opClassicBeat  = 28 // 28-29: 4 bytes, see classicHeartbeatOp
	opClassicLeave = 30 // 4 bytes, see classicLeaveOp
)

// Member choices: 0-5 are the member IDs seen so far (in order of first
// sight; a fixed label while there are fewer), then the fixed labels a v1
// client may choose, the empty ID, a blank one and an unknown one.
const (
	fzM1 = 6 + iota
	fzM2
	fzM3
	fzNoID
	fzBlankID
	fzGhost
	fzMembers
)

// Epoch choices, against the member the request names (0 if unknown) and
// what its client last heard.
const (
	fzEpJoin = iota
	fzEpLeave
	fzEpStaticLeave
	fzEpCurrent
	fzEpPrevious
	fzEpStale
	fzEpGroup
	fzEpAboveGroup
	fzEpHuge
	fzEpBelowStatic
	fzEpClient
	fzEpMin
	fzEpClient2
	fzEpochs
)

// Topic modes of a heartbeat's Topics (what the member says it owns).
const (
	fzOwnClient     = iota // what its client last heard it was assigned
	fzOwnNull              // nil: unchanged
	fzOwnNone              // []
	fzOwnHeld              // what the group says it holds (assigned and revoking)
	fzOwnAssigned          // the group's assigned only: revoked partitions released
	fzOwnSubset            // the client's, filtered by the mask
	fzOwnSuperset          // the client's plus t partitions of the mask
	fzOwnUnknownID         // the client's plus a topic nobody knows
	fzOwnDuplicates        // the client's, every topic and partition twice
	fzOwnOutOfRange        // the client's plus negative and too large partitions
	fzOwnModes
)

var (
	fuzzInstances  = []*string{nil, nil, kmsg.StringPtr("i1"), kmsg.StringPtr("i2"), kmsg.StringPtr("")}
	fuzzRacks      = []*string{nil, nil, kmsg.StringPtr("r1"), kmsg.StringPtr("r2"), kmsg.StringPtr("")}
	fuzzRebalances = []int32{30000, -1, 5000, 0, 1, -2, math.MinInt32, math.MaxInt32}
	fuzzNames      = [][]string{{"t"}, nil, {}, {"t", "u"}, {"u", "t", "t"}, {"x"}, {"u"}, {"t", "v", "w"}}
	fuzzRegexes    = []*string{nil, nil, kmsg.StringPtr(""), kmsg.StringPtr("t|u"), kmsg.StringPtr(".*"),
		kmsg.StringPtr("["), kmsg.StringPtr("v.*"), kmsg.StringPtr("(?i)T")}
	fuzzAssignors = []*string{nil, nil, kmsg.StringPtr("uniform"), kmsg.StringPtr("range"),
		kmsg.StringPtr("rendezvous"), kmsg.StringPtr(""), kmsg.StringPtr("bogus"), nil}
	fuzzMetadata = []*string{nil, kmsg.StringPtr(""), kmsg.StringPtr("m"), kmsg.StringPtr("123456789")}
	// fuzzTopicsLater are created, in order, by opAddTopic.
	fuzzTopicsLater = []struct {
		name  string
		parts int32
	}{{"u", 4}, {"v", 2}, {"w", 3}}
)

// fuzzSession is the KIP-848 session timeout of the fuzzed groups; the
// jumps of opTick go short of it, just past it and past the default
// rebalance timeout of the joins (30 s).
const fuzzSession = 10 * time.Second

// fuzzCoalesce is the join coalescing window restarts switch on and off:
// the jumps of opTick go short of it and past it.
const fuzzCoalesce = 1500 * time.Millisecond

var fuzzJumps = []time.Duration{time.Second, 100 * time.Millisecond, 0, 5 * time.Second,
	fuzzSession + time.Millisecond, 31 * time.Second, 10 * time.Minute, 2 * time.Second}

// groupFuzz is one fuzz run: the group, the fuzzer's bytes, and what the
// checks remember from step to step.
type groupFuzz struct {
	t      *testing.T
	r      classicFuzzReader
	topics *StaticTopics
	cfg    Config
	g      *Group
	now    time.Time

	// ids are the member IDs the group gave out or took, in order of
	// first sight; clients is what the client of each member ID last
	// heard (a faithful client's view).
	ids     []string
	clients map[string]*fuzzClient
	added   int

	seq  int
	sent map[int]sentRequest
	// reuse holds a response of each API key already sent, handed back
	// as Request.Resp as a server that pools responses would.
	reuse map[int16]kmsg.Response

	// model replays the persisted records; members are the members the
	// records say exist.
	model   recordModel
	members map[string]bool
	// lastEpoch is the group epoch after the last step; history the
	// owners seen of every partition that has had one.
	lastEpoch int32
	history   map[TopicPartition]ownerHistory
	// store holds what the group persisted, as a store would
	// (restoreChecker); restarts counts the groups restored from it.
	store    *restoreChecker
	restarts int
	// wasDeleted is set once a drained Ready found the group deleted:
	// it must not write anything after its deletion records.
	wasDeleted bool
	// replaced are the classic members replaced by a static successor in
	// the Ready being drained: the successor keeps their tokens.
	replaced map[string]bool
}

// ownerHistory is the last owner seen of a partition (cur) and the one
// before it (prev), whose token every later token of cur must exceed.
type ownerHistory struct {
	cur, prev      owner
	owned, hadPrev bool
}

type fuzzClient struct {
	epoch int32
	held  []TopicPartition
}

type sentRequest struct {
	msg kmsg.Request
	// immediate requests are answered in the Ready of their own step;
	// the others (JoinGroup, SyncGroup) may be parked.
	immediate bool
}

func newGroupFuzz(t *testing.T, data []byte) *groupFuzz {
	h := &groupFuzz{
		t:       t,
		r:       classicFuzzReader{data: data},
		topics:  NewStaticTopics(),
		cfg:     DefaultConfig(),
		now:     testEpoch,
		clients: map[string]*fuzzClient{},
		sent:    map[int]sentRequest{},
		reuse:   map[int16]kmsg.Response{},
		model:   newRecordModel(),
		members: map[string]bool{},
		history: map[TopicPartition]ownerHistory{},
		store:   newRestoreChecker(),
	}
	h.topics.Add("t", TopicID{15: 1}, 8)
	h.cfg.Topics = h.topics
	h.cfg.MaxGroupSize = 4
	h.cfg.MaxMetadataBytes = 8
	h.cfg.ConsumerSessionTimeout = fuzzSession
	if err := h.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h.g = NewGroup("g", &h.cfg, rand.New(rand.NewPCG(1, 2)))
	return h
}

// consumerOp runs operation op of FuzzConsumerGroup (0 to fuzzConsumerOps-1).
func (h *groupFuzz) consumerOp(op byte) {
	switch {
	case op < opCommit, op > opRestart:
		h.heartbeatOp()
	case op < opTick:
		h.commitOp()
	case op < opOffsetDelete:
		h.now = h.now.Add(fuzzJumps[int(h.r.byte())%len(fuzzJumps)])
		h.tick()
	case op == opOffsetDelete:
		h.offsetDeleteOp()
	case op == opAddTopic:
		if h.added < len(fuzzTopicsLater) {
			nt := fuzzTopicsLater[h.added]
			h.added++
			h.topics.Add(nt.name, TopicID{15: byte(1 + h.added)}, nt.parts)
			h.g.Step(h.now, TopicsChanged{})
			h.drain()
		}
	case op == opDelete:
		empty, deleted := h.g.Empty(), h.g.Deleted()
		err := stepAdmin(h.t, h.g, h.now, func(ref any) Input { return DeleteGroup{Ref: ref} })
		if (err == nil) != (empty && !deleted) {
			h.t.Fatalf("Delete of a group (empty %t, deleted %t) answered %v", empty, deleted, err)
		}
		h.drain()
		if err == nil && (!h.g.Deleted() || len(h.g.offsets.m) > 0) {
			h.t.Fatalf("deleted group still has state:\n%s", h.g)
		}
	case op == opRead:
		h.readOp()
	case op == opRestart:
		h.restart()
	}
	if next := h.g.Ready().NextTick; !next.IsZero() && !next.After(h.now) && h.r.byte()%2 == 0 {
		h.tick()
	}
}

func (h *groupFuzz) tick() {
	if *fuzzTrace {
		h.t.Logf("at %s: tick", rel(h.now))
	}
	h.g.Step(h.now, Tick{})
	h.drain()
	if next := h.g.Ready().NextTick; !next.IsZero() && !next.After(h.now) {
		h.t.Fatalf("after a tick at %s the group asks for one at %s\n%s", rel(h.now), rel(next), h.g)
	}
}

// member chooses a member ID.
func (h *groupFuzz) member() string {
	switch i := int(h.r.byte()) % fzMembers; i {
	case fzM1, fzM2, fzM3:
		return fmt.Sprintf("m%d", i-fzM1+1)
	case fzNoID:
		return ""
	case fzBlankID:
		return " "
	case fzGhost:
		return "ghost"
	default:
		if i < len(h.ids) {
			return h.ids[i]
		}
		return fmt.Sprintf("m%d", i%3+1)
	}
}

// memberEpoch chooses a member epoch for a request naming id.
func (h *groupFuzz) memberEpoch(id string) int32 {
	var cur, prev, client int32
	if m := h.g.consumer.members[id]; m != nil && h.g.typ == Consumer {
		cur, prev = m.epoch, m.prevEpoch
	}
	if c := h.clients[id]; c != nil {
		client = c.epoch
	}
	switch h.r.byte() % fzEpochs {
	case fzEpJoin:
		return 0
	case fzEpLeave:
		return -1
	case fzEpStaticLeave:
		return staticLeftEpoch
	case fzEpCurrent:
		return cur
	case fzEpPrevious:
		return prev
	case fzEpStale:
		return cur - 1
	case fzEpGroup:
		return h.g.epoch
	case fzEpAboveGroup:
		return h.g.epoch + 1
	case fzEpHuge:
		return math.MaxInt32
	case fzEpBelowStatic:
		return -3
	case fzEpMin:
		return math.MinInt32
	}
	return client
}

// heartbeatOp sends a ConsumerGroupHeartbeat. Bytes: version, member,
// epoch, instance, rack, rebalance timeout, names, regex, assignor, topics
// mode, mask, extra (bit 0: reuse a response, bit 1: another client ID).
func (h *groupFuzz) heartbeatOp() {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(h.r.byte() % 2)
	req.Group = "g"
	req.MemberID = h.member()
	req.MemberEpoch = h.memberEpoch(req.MemberID)
	req.InstanceID = fuzzInstances[int(h.r.byte())%len(fuzzInstances)]
	req.RackID = fuzzRacks[int(h.r.byte())%len(fuzzRacks)]
	req.RebalanceTimeoutMillis = fuzzRebalances[int(h.r.byte())%len(fuzzRebalances)]
	req.SubscribedTopicNames = slices.Clone(fuzzNames[int(h.r.byte())%len(fuzzNames)])
	req.SubscribedTopicRegex = fuzzRegexes[int(h.r.byte())%len(fuzzRegexes)]
	req.ServerAssignor = fuzzAssignors[int(h.r.byte())%len(fuzzAssignors)]
	mode, mask := h.r.byte()%fzOwnModes, h.r.byte()
	req.Topics = h.reported(req.MemberID, mode, mask)
	extra := h.r.byte()
	clientID := "c"
	if extra&2 != 0 {
		clientID = "k"
	}
	h.step(req, h.reused(req, extra), clientID, true)
}

// reported builds a heartbeat's Topics.
func (h *groupFuzz) reported(id string, mode, mask byte) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	var client []TopicPartition
	if c := h.clients[id]; c != nil {
		client = c.held
	}
	var held, assigned []TopicPartition
	if m := h.g.consumer.members[id]; m != nil && h.g.typ == Consumer {
		held = withoutTokens(mergeOwned(m.assigned, m.revoking))
		assigned = withoutTokens(m.assigned)
	}
	masked := func(p int32) bool { return mask&(1<<(uint32(p)%8)) != 0 }
	var tps []TopicPartition
	var extra []kmsg.ConsumerGroupHeartbeatRequestTopic
	switch mode {
	case fzOwnNull:
		return nil
	case fzOwnNone:
		return []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case fzOwnHeld:
		tps = held
	case fzOwnAssigned:
		tps = assigned
	case fzOwnSubset:
		for _, tp := range client {
			if masked(tp.Partition) {
				tps = append(tps, tp)
			}
		}
	case fzOwnSuperset:
		tps = slices.Clone(client)
		for p := range int32(8) {
			if masked(p) {
				tps = append(tps, TopicPartition{"t", p})
			}
		}
	case fzOwnUnknownID:
		tps = client
		extra = append(extra, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: TopicID{0: 0xee}, Partitions: []int32{0, 1}})
	case fzOwnDuplicates:
		for _, tp := range client {
			tps = append(tps, tp, tp)
		}
		tps = append(tps, client...)
	case fzOwnOutOfRange:
		tps = append(slices.Clone(client), TopicPartition{"t", -1}, TopicPartition{"t", 8}, TopicPartition{"t", math.MaxInt32})
	default:
		tps = client
	}
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, tp := range tps {
		id, _, ok := h.topics.Lookup(tp.Topic)
		if !ok {
			id = TopicID{0: 0xee, 1: 1}
		}
		// Duplicates keep a topic in two entries.
		i := slices.IndexFunc(out, func(t kmsg.ConsumerGroupHeartbeatRequestTopic) bool { return t.TopicID == id })
		if i < 0 || mode == fzOwnDuplicates && len(out[i].Partitions) > 0 && out[i].Partitions[len(out[i].Partitions)-1] == tp.Partition {
			out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id})
			i = len(out) - 1
		}
		out[i].Partitions = append(out[i].Partitions, tp.Partition)
	}
	return append(out, extra...)
}

// reused returns a response already sent of req's kind, reset to req's
// version, if extra asks for one.
func (h *groupFuzz) reused(req kmsg.Request, extra byte) kmsg.Response {
	if extra&1 == 0 {
		return nil
	}
	r := h.reuse[req.Key()]
	if r != nil {
		r.SetVersion(req.GetVersion())
	}
	return r
}

// commitOp sends an OffsetCommit. Bytes: version, member, generation,
// instance, partitions mode, mask, metadata, extra (bit 0: reuse).
func (h *groupFuzz) commitOp() {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = int16(h.r.byte() % 11)
	req.Group = "g"
	req.MemberID = h.member()
	req.Generation = h.memberEpoch(req.MemberID)
	req.InstanceID = fuzzInstances[int(h.r.byte())%len(fuzzInstances)]
	mode, mask := h.r.byte()%6, h.r.byte()
	meta := fuzzMetadata[int(h.r.byte())%len(fuzzMetadata)]
	masked := func(p int32) bool { return mask&(1<<(uint32(p)%8)) != 0 }
	var tps []TopicPartition
	switch mode {
	case 0:
		if c := h.clients[req.MemberID]; c != nil {
			tps = c.held
		}
	case 1:
		if m := h.g.consumer.members[req.MemberID]; m != nil {
			tps = withoutTokens(mergeOwned(m.assigned, m.revoking))
		}
	case 2:
		for p := range int32(8) {
			if masked(p) {
				tps = append(tps, TopicPartition{"t", p})
			}
		}
	case 3:
		for p := range int32(4) {
			if masked(p) {
				tps = append(tps, TopicPartition{"u", p})
			}
			if masked(p + 4) {
				tps = append(tps, TopicPartition{"v", p})
			}
		}
	case 4:
		tps = []TopicPartition{{"x", 0}, {"t", int32(mask % 8)}}
	case 5:
		tps = []TopicPartition{{"t", -1}, {"t", 8}, {"t", int32(mask % 8)}, {"t", int32(mask % 8)}}
	}
	for _, tp := range tps {
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == tp.Topic })
		if i < 0 {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = tp.Topic
			if id, _, ok := h.topics.Lookup(tp.Topic); ok {
				rt.TopicID = id
			} else {
				rt.TopicID = TopicID{0: 0xee}
			}
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = int64(h.seq)
		p.Metadata = meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	h.step(req, h.reused(req, h.r.byte()), "c", true)
}

// offsetDeleteOp sends an OffsetDelete. Bytes: topics, partition mask.
func (h *groupFuzz) offsetDeleteOp() {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	names := [][]string{{"t"}, {"u"}, {"x"}, {"t", "u"}}[h.r.byte()%4]
	mask := h.r.byte()
	for _, n := range names {
		rt := kmsg.OffsetDeleteRequestTopic{Topic: n}
		for p := int32(-1); p < 9; p++ {
			if mask&(1<<((p+8)%8)) != 0 {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	h.step(req, nil, "admin", true)
}

// readOp calls FetchOffsets, DescribeConsumer, DescribeClassic, Listing
// and Stats, and checks that their answers encode. Bytes: version,
// member, epoch.
func (h *groupFuzz) readOp() {
	version := int16(8 + h.r.byte()%3)
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "g"
	if id := h.member(); id != "" {
		fg.MemberID = &id
	}
	fg.MemberEpoch = h.memberEpoch(fuzzDeref(fg.MemberID))
	if h.seq%2 == 0 {
		fg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", TopicID: TopicID{15: 1}, Partitions: []int32{0, 1, 9}}}
	}
	fetch := kmsg.NewPtrOffsetFetchResponse()
	fetch.Version = version
	fetch.Groups = []kmsg.OffsetFetchResponseGroup{h.g.FetchOffsets(h.now, version, fg, true)}
	classicCheckEncodes(h.t, fetch)
	describe := kmsg.NewPtrConsumerGroupDescribeResponse()
	describe.Version = int16(h.seq % 2)
	describe.Groups = []kmsg.ConsumerGroupDescribeResponseGroup{h.g.DescribeConsumer()}
	classicCheckEncodes(h.t, describe)
	classic := kmsg.NewPtrDescribeGroupsResponse()
	classic.Version = int16(h.seq % 7)
	classic.Groups = []kmsg.DescribeGroupsResponseGroup{h.g.DescribeClassic()}
	classicCheckEncodes(h.t, classic)
	list := kmsg.NewPtrListGroupsResponse()
	list.Version = int16(h.seq % 6)
	list.Groups = []kmsg.ListGroupsResponseGroup{h.g.Listing()}
	classicCheckEncodes(h.t, list)
	if st := h.g.Stats(); st.Owned != h.g.owners.owned() || st.Epoch != h.g.epoch || st.Unowned < 0 {
		h.t.Fatalf("stats %+v", st)
	}
}

func fuzzDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// classicJoinOp sends a JoinGroup. Bytes: version, member, instance,
// session, rebalance, protocol type, protocols, extra (unused).
func (h *groupFuzz) classicJoinOp() {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = int16(h.r.byte() % 10)
	req.Group = "g"
	req.MemberID = h.member()
	req.InstanceID = fuzzInstances[int(h.r.byte())%len(fuzzInstances)]
	req.SessionTimeoutMillis = []int32{10000, 6000, -1, 1 << 30}[h.r.byte()%4]
	req.RebalanceTimeoutMillis = []int32{20000, 1, 0, -5}[h.r.byte()%4]
	req.ProtocolType = []string{"consumer", "connect", ""}[h.r.byte()%3]
	var meta kmsg.ConsumerMemberMetadata
	meta.Topics = []string{"t"}
	sub := meta.AppendTo(nil)
	switch h.r.byte() % 4 {
	case 0:
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub}}
	case 1:
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "sticky", Metadata: sub}, {Name: "range", Metadata: sub}}
	case 2:
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "x", Metadata: []byte{0xde, 0xad}}}
	}
	h.r.byte()
	h.step(req, nil, "c", false)
}

// classicSyncOp sends a SyncGroup. Bytes: version, member, instance,
// generation, plan, mask.
func (h *groupFuzz) classicSyncOp() {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = int16(h.r.byte() % 6)
	req.Group = "g"
	req.MemberID = h.member()
	req.InstanceID = fuzzInstances[int(h.r.byte())%len(fuzzInstances)]
	req.Generation = []int32{h.g.epoch, h.g.epoch - 1, -1}[h.r.byte()%3]
	plan, mask := h.r.byte()%4, h.r.byte()
	members := slices.Sorted(maps.Keys(h.g.classic.members))
	switch {
	case plan == 1:
		for _, id := range members {
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte{0, 1, mask}})
		}
	case plan == 2:
	case len(members) > 0:
		// Round robin over the members, or everything to the first
		// (plan 3), leaving out the partitions of the mask.
		parts := make([][]int32, len(members))
		for p := range int32(8) {
			if mask&(1<<p) != 0 {
				continue
			}
			i := int(p) % len(members)
			if plan == 3 {
				i = 0
			}
			parts[i] = append(parts[i], p)
		}
		for i, id := range members {
			var a kmsg.ConsumerMemberAssignment
			a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: parts[i]}}
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)})
		}
	}
	h.step(req, nil, "c", false)
}

// classicHeartbeatOp sends a Heartbeat. Bytes: version, member, instance,
// generation.
func (h *groupFuzz) classicHeartbeatOp() {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = int16(h.r.byte() % 5)
	req.Group = "g"
	req.MemberID = h.member()
	req.InstanceID = fuzzInstances[int(h.r.byte())%len(fuzzInstances)]
	req.Generation = []int32{h.g.epoch, h.g.epoch - 1, -1}[h.r.byte()%3]
	h.step(req, nil, "c", true)
}

// classicLeaveOp sends a LeaveGroup. Bytes: version, member, instance,
// a second member.
func (h *groupFuzz) classicLeaveOp() {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = int16(h.r.byte() % 6)
	req.Group = "g"
	req.MemberID = h.member()
	inst := fuzzInstances[int(h.r.byte())%len(fuzzInstances)]
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID, InstanceID: inst}, {MemberID: h.member()}}
	h.step(req, nil, "c", true)
}

// step hands the group msg as the server would decode it from the wire,
// and drains the Ready.
func (h *groupFuzz) step(msg kmsg.Request, resp kmsg.Response, clientID string, immediate bool) {
	wire := kmsg.RequestForKey(msg.Key())
	wire.SetVersion(msg.GetVersion())
	if err := wire.ReadFrom(msg.AppendTo(nil)); err != nil {
		h.t.Fatalf("%T v%d does not decode: %v", msg, msg.GetVersion(), err)
	}
	h.seq++
	ref := h.seq
	h.sent[ref] = sentRequest{msg: wire, immediate: immediate}
	if *fuzzTrace {
		h.t.Logf("at %s: request %d: %s", rel(h.now), ref, fuzzRender(wire))
	}
	h.g.Step(h.now, Request{Ref: ref, Msg: wire, Resp: resp, ClientID: clientID, ClientHost: "/10.0.0.1"})
	h.drain()
	if _, waiting := h.sent[ref]; waiting && immediate {
		h.t.Fatalf("request %d (%T) not answered at once", ref, wire)
	}
}

// drain checks and applies one Ready.
func (h *groupFuzz) drain() {
	rd := h.g.Ready()
	if h.wasDeleted && len(rd.Persist) > 0 {
		h.t.Fatalf("a deleted group persists %s", renderRecord(rd.Persist[0]))
	}
	h.wasDeleted = h.g.Deleted()
	if *fuzzTrace {
		renderEnv = &testEnv{cfg: h.cfg, topics: h.topics}
		for _, r := range rd.Persist {
			h.t.Logf("  persist: %s", renderRecord(r))
		}
		for _, r := range rd.Replies {
			if r.Msg == nil {
				h.t.Logf("  answer to %T: %v", r.Ref, r.Err)
				continue
			}
			h.t.Logf("  reply to %v: %s", r.Ref, renderResponse(r.Msg))
		}
		for _, ev := range rd.Events {
			h.t.Logf("  event: %s", renderEvent(ev))
		}
	}
	h.replaced = map[string]bool{}
	if h.g.typ == Classic {
		for _, ev := range rd.Events {
			if ev.Kind == EventMemberRemoved && ev.Reason == "static-member-replaced" {
				h.replaced[ev.MemberID] = true
			}
		}
	}
	h.store.apply(h.t, rd)
	for _, rec := range rd.Persist {
		h.apply(rec)
	}
	for _, rep := range rd.Replies {
		h.checkReply(rep)
	}
	h.g.Advance(rd)
	h.check()
}

// restart replaces the group by its Restore from what it persisted, as a
// coordinator restart or fail-over does, after checking that the store
// holds the group's exact state (restoreChecker). What the group had
// parked is lost with its connections; the clients carry on.
func (h *groupFuzz) restart() {
	if *fuzzTrace {
		h.t.Logf("at %s: restart", rel(h.now))
	}
	h.store.check(h.t, h.g, h.now)
	if h.cfg.ConsumerJoinCoalesce == 0 {
		h.cfg.ConsumerJoinCoalesce = fuzzCoalesce
	} else {
		h.cfg.ConsumerJoinCoalesce = 0
	}
	g, err := Restore("g", &h.cfg, rand.New(rand.NewPCG(uint64(h.restarts), 5)), h.now, h.store.set.Group("g"))
	if err != nil {
		h.t.Fatalf("at %s: restore: %v", rel(h.now), err)
	}
	h.restarts++
	h.g = g
	clear(h.sent)
	h.wasDeleted = false
	h.drain()
}

// apply replays one record into the model (recordModel, with the two
// exceptions classic groups are documented to make).
func (h *groupFuzz) apply(rec Record) {
	switch r := rec.(type) {
	case *AssignmentRecord:
		held := h.model.byMember[r.MemberID]
		for _, p := range r.Owned {
			tp := TopicPartition{p.Topic, p.Partition}
			// A classic static successor keeps its predecessor's
			// tokens.
			if l, ok := h.model.last[tp]; ok && h.replaced[l.member] && l.token == p.Token {
				delete(h.model.last, tp)
			}
			// A KIP-848 partition's token is provisional until its
			// owner reports it, and then becomes the reported epoch,
			// which may be lower (consumer_tokens.go): the owner keeps
			// it. recordModel would take that for a release and a new
			// grant; check then checks the token against the
			// previous owner's.
			if i, ok := indexOwned(held, tp); ok && held[i].Token != p.Token && h.model.cur[tp].member == r.MemberID {
				held[i].Token = p.Token
				h.model.cur[tp] = owner{r.MemberID, p.Token}
			}
		}
	case *OffsetRecord:
		// A classic group of another protocol type has no owners: its
		// members' commits carry no token.
		if r.Token.IsNone() && h.g.typ == Classic && h.g.classic.protocolType != consumerProtocolType {
			return
		}
	case *MemberRecord:
		if r.Deleted {
			delete(h.members, r.MemberID)
		} else {
			h.members[r.MemberID] = true
			h.see(r.MemberID)
		}
	}
	if err := h.model.apply(rec); err != nil {
		h.t.Fatalf("at %s: record %s: %v\n%s", rel(h.now), renderRecord(rec), err, h.g)
	}
}

func (h *groupFuzz) see(id string) {
	if id != "" && !slices.Contains(h.ids, id) {
		h.ids = append(h.ids, id)
	}
}

// checkReply checks one reply against the request it answers and the
// group's state, and tells the request's client what it heard.
func (h *groupFuzz) checkReply(rep Reply) {
	if _, ok := rep.Ref.(*answer); ok {
		return // an admin input's, checked where it is stepped
	}
	ref := rep.Ref.(int)
	s, ok := h.sent[ref]
	if !ok {
		h.t.Fatalf("reply to request %d, which is answered already or was never sent", ref)
	}
	delete(h.sent, ref)
	if rep.Msg.Key() != s.msg.Key() || rep.Msg.GetVersion() != s.msg.GetVersion() {
		h.t.Fatalf("request %d (%T v%d) answered with %T v%d", ref, s.msg, s.msg.GetVersion(), rep.Msg, rep.Msg.GetVersion())
	}
	classicCheckEncodes(h.t, rep.Msg)
	h.reuse[rep.Msg.Key()] = rep.Msg
	switch resp := rep.Msg.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		h.checkHeartbeatReply(s.msg.(*kmsg.ConsumerGroupHeartbeatRequest), resp)
	case *kmsg.OffsetCommitResponse:
		h.checkCommitReply(s.msg.(*kmsg.OffsetCommitRequest), resp)
	case *kmsg.OffsetDeleteResponse:
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if _, ok := h.g.offsets.m[TopicPartition{t.Topic, p.Partition}]; ok && p.ErrorCode == 0 {
					h.t.Fatalf("offset of %s[%d] deleted, still there", t.Topic, p.Partition)
				}
			}
		}
	case *kmsg.JoinGroupResponse:
		h.see(resp.MemberID)
	}
}

func (h *groupFuzz) checkHeartbeatReply(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if resp.ErrorCode != 0 {
		if resp.MemberID != nil || resp.MemberEpoch != 0 || resp.Assignment != nil {
			h.t.Fatalf("error %d with member %v epoch %d assignment %v", resp.ErrorCode, resp.MemberID, resp.MemberEpoch, resp.Assignment)
		}
		return
	}
	if resp.MemberID == nil {
		h.t.Fatalf("heartbeat of %q at %d accepted without a member ID", req.MemberID, req.MemberEpoch)
	}
	id := *resp.MemberID
	h.see(id)
	if req.MemberID != "" && id != req.MemberID {
		h.t.Fatalf("heartbeat of %q answered for %q", req.MemberID, id)
	}
	mem := h.g.consumer.members[id]
	if h.g.typ != Consumer {
		h.t.Fatalf("heartbeat of %q accepted by a %s group", id, h.g.typ)
	}
	if req.MemberEpoch < 0 {
		if resp.MemberEpoch != req.MemberEpoch || mem != nil && mem.epoch != staticLeftEpoch {
			h.t.Fatalf("leave of %q at %d answered %d, member now %v", id, req.MemberEpoch, resp.MemberEpoch, mem)
		}
		delete(h.clients, id)
		return
	}
	if mem == nil || resp.MemberEpoch != mem.epoch || resp.HeartbeatIntervalMillis <= 0 {
		h.t.Fatalf("heartbeat of %q answered epoch %d interval %d, member now %+v", id, resp.MemberEpoch, resp.HeartbeatIntervalMillis, mem)
	}
	if req.MemberEpoch == 0 && resp.Assignment == nil {
		h.t.Fatalf("join of %q answered without an assignment", id)
	}
	c := h.clients[id]
	if c == nil {
		c = &fuzzClient{}
		h.clients[id] = c
	}
	c.epoch = resp.MemberEpoch
	if resp.Assignment == nil {
		return
	}
	var tps []TopicPartition
	for _, t := range resp.Assignment.Topics {
		name, ok := h.topics.Name(t.TopicID)
		if !ok {
			h.t.Fatalf("%q assigned unknown topic %x", id, t.TopicID)
		}
		for _, p := range t.Partitions {
			tps = append(tps, TopicPartition{name, p})
		}
	}
	tps = sortTPs(tps)
	if !slices.Equal(tps, withoutTokens(mem.assigned)) && !(len(tps) == 0 && len(mem.assigned) == 0) {
		h.t.Fatalf("%q was sent %v, holds %v", id, tps, mem.assigned)
	}
	c.held = tps
}

// checkCommitReply checks that every accepted partition was committed by
// the request's member under the token the owners give it (or by an
// admin without one), never by a KIP-848 member that is gone or at an
// epoch below the token.
func (h *groupFuzz) checkCommitReply(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	for _, t := range resp.Topics {
		name := t.Topic
		if resp.Version >= 10 {
			name, _ = h.topics.Name(t.TopicID)
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				continue
			}
			tp := TopicPartition{name, p.Partition}
			c, ok := h.g.offsets.m[tp]
			if !ok || c.member != "" && c.member != req.MemberID {
				h.t.Fatalf("commit of %v by %q accepted, offsets say %+v (%t)", tp, req.MemberID, c, ok)
			}
			if c.member == "" {
				if !c.token.IsNone() || !h.g.Empty() {
					h.t.Fatalf("admin commit of %v at token %v to a group with members", tp, c.token)
				}
				continue
			}
			if h.g.typ == Consumer {
				if h.g.consumer.members[c.member] == nil || req.Version < 9 {
					h.t.Fatalf("commit of %v by %q (v%d) accepted, not a member", tp, c.member, req.Version)
				}
				if tokenOf(req.Generation) < c.token {
					h.t.Fatalf("commit of %v at epoch %d accepted under token %v", tp, req.Generation, c.token)
				}
			}
			if c.token.IsNone() && h.g.typ == Classic && h.g.classic.protocolType != consumerProtocolType {
				continue
			}
			if tok, ok := h.g.owners.commitToken(tp, c.member); !ok || tok != c.token {
				h.t.Fatalf("commit of %v by %q under token %v, owners give %v (%t)", tp, c.member, c.token, tok, ok)
			}
		}
	}
}

// check is what holds after every step:
//   - the core's invariants (consumerInvariantError, classicInvariants)
//     and the consistency of the KIP-848 indexes (consumerIndexError);
//   - the group epoch never decreases;
//   - a partition that changes owner gets a token strictly above its
//     previous owner's (a classic static successor keeps its
//     predecessor's);
//   - the records replay (recordModel) to the group's owners and tokens,
//     epoch and members.
func (h *groupFuzz) check() {
	g := h.g
	for _, err := range []error{consumerInvariantError(g), classicInvariants(g), consumerIndexError(g)} {
		if err != nil {
			h.t.Fatalf("at %s: %v\n%s", rel(h.now), err, g)
		}
	}
	if g.epoch < h.lastEpoch {
		h.t.Fatalf("group epoch went from %d to %d", h.lastEpoch, g.epoch)
	}
	h.lastEpoch = g.epoch
	for tp, o := range g.owners.cur {
		hist := h.history[tp]
		// A classic static successor takes its predecessor's place,
		// token included.
		inherited := h.replaced[hist.cur.member] && o.token == hist.cur.token
		if hist.owned && hist.cur.member != o.member && !inherited {
			hist.prev, hist.hadPrev = hist.cur, true
		}
		if hist.hadPrev && o.token <= hist.prev.token {
			h.t.Fatalf("at %s: %s[%d] passed from %s@%v to %s@%v\n%s", rel(h.now), tp.Topic, tp.Partition,
				hist.prev.member, hist.prev.token, o.member, o.token, g)
		}
		hist.cur, hist.owned = o, true
		h.history[tp] = hist
	}
	if !maps.Equal(h.model.cur, g.owners.cur) {
		h.t.Fatalf("at %s: owners replayed from the records %v, the group's %v\n%s", rel(h.now), h.model.cur, g.owners.cur, g)
	}
	if h.model.epoch != g.epoch {
		h.t.Fatalf("at %s: epoch replayed from the records %d, the group's %d", rel(h.now), h.model.epoch, g.epoch)
	}
	var ids []string
	switch g.typ {
	case Consumer:
		ids = slices.Collect(maps.Keys(g.consumer.members))
	case Classic:
		ids = slices.Collect(maps.Keys(g.classic.members))
	}
	if !g.deleted && !maps.Equal(h.members, setOf(ids)) {
		h.t.Fatalf("at %s: members replayed from the records %v, the group's %v", rel(h.now), slices.Sorted(maps.Keys(h.members)), slices.Sorted(slices.Values(ids)))
	}
}

// fuzzRender renders a request for the trace.
func fuzzRender(r kmsg.Request) string {
	switch r := r.(type) {
	case *kmsg.ConsumerGroupHeartbeatRequest:
		s := fmt.Sprintf("heartbeat v%d member=%q epoch=%d", r.Version, r.MemberID, r.MemberEpoch)
		if r.InstanceID != nil {
			s += fmt.Sprintf(" instance=%q", *r.InstanceID)
		}
		if r.RackID != nil {
			s += fmt.Sprintf(" rack=%q", *r.RackID)
		}
		s += fmt.Sprintf(" rebalance=%d", r.RebalanceTimeoutMillis)
		if r.SubscribedTopicNames != nil {
			s += fmt.Sprintf(" topics=%q", r.SubscribedTopicNames)
		}
		if r.SubscribedTopicRegex != nil {
			s += fmt.Sprintf(" regex=%q", *r.SubscribedTopicRegex)
		}
		if r.ServerAssignor != nil {
			s += fmt.Sprintf(" assignor=%q", *r.ServerAssignor)
		}
		if r.Topics == nil {
			return s + " owned=null"
		}
		s += " owned=["
		for i, t := range r.Topics {
			if i > 0 {
				s += " "
			}
			s += fmt.Sprintf("%x:%v", t.TopicID[len(t.TopicID)-1], t.Partitions)
		}
		return s + "]"
	case *kmsg.OffsetCommitRequest:
		s := fmt.Sprintf("commit v%d member=%q generation=%d", r.Version, r.MemberID, r.Generation)
		for _, t := range r.Topics {
			s += fmt.Sprintf(" %s/%x:", t.Topic, t.TopicID[len(t.TopicID)-1])
			for _, p := range t.Partitions {
				s += fmt.Sprintf("%d,", p.Partition)
			}
		}
		return s
	}
	return fmt.Sprintf("%T %+v", r, r)
}

func setOf(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// finish lets time run until no timer is left and checks that every
// request was answered and that the store holds the group's state.
func (h *groupFuzz) finish() {
	for range 100 {
		next := h.g.Ready().NextTick
		if next.IsZero() {
			break
		}
		if next.After(h.now) {
			h.now = next
		}
		h.tick()
	}
	if len(h.sent) > 0 {
		h.t.Fatalf("requests never answered: %v\n%s", slices.Sorted(maps.Keys(h.sent)), h.g)
	}
	h.store.check(h.t, h.g, h.now)
}

// Seeds. Each helper spells one operation in the fuzzer's layout.

// seedBeat is a heartbeatOp: every field is an index into its table, so
// the zero value is a v1 join of member choice 0 subscribing to t.
type seedBeat struct {
	v0                                                      bool
	member, ep, inst, rack, rebalance, names, regex, assign byte
	own, mask, extra                                        byte
}

func (b seedBeat) bytes() []byte {
	version := byte(1)
	if b.v0 {
		version = 0
	}
	return []byte{opHeartbeat, version, b.member, b.ep, b.inst, b.rack, b.rebalance, b.names, b.regex, b.assign, b.own, b.mask, b.extra}
}

func seedTick(jump byte) []byte { return []byte{opTick, jump} }

func seedCommit(version, member, gen, mode, mask byte) []byte {
	return []byte{opCommit, version, member, gen, 0, mode, mask, 2, 0}
}

// Indexes into the tables, for the seeds.
const (
	fzNamesNil   = 1
	fzNamesNone  = 2
	fzNamesTU    = 3
	fzNamesU     = 6
	fzNamesTVW   = 7
	fzInstI1     = 2
	fzInstI2     = 3
	fzRebalance5 = 2
	fzRegexTU    = 3
	fzRegexEmpty = 2
	fzRegexBad   = 5
	fzRange      = 3
	fzRendezvous = 4
	fzJump5s     = 3
	fzJumpSess   = 4
	fzJumpReb    = 5
	fzJump10m    = 6
)

func consumerFuzzSeeds() [][]byte {
	j := slices.Concat[[]byte]
	m1, m2, m3 := byte(fzM1), byte(fzM2), byte(fzM3)
	return [][]byte{
		// Two members share t, reconcile and commit; one crashes and
		// expires, and the other commits what it held.
		j(seedBeat{member: m1}.bytes(), seedBeat{member: m2}.bytes(),
			seedBeat{member: m1, ep: fzEpClient}.bytes(), seedBeat{member: m1, ep: fzEpClient}.bytes(),
			seedBeat{member: m2, ep: fzEpClient}.bytes(), seedCommit(9, m1, fzEpClient, 0, 0),
			seedCommit(9, m2, fzEpClient, 2, 0xff), seedTick(0), seedBeat{member: m1, ep: fzEpClient, names: fzNamesNil}.bytes(),
			seedTick(fzJumpSess), seedTick(fzJumpSess), seedCommit(9, m2, fzEpClient, 0, 0)),
		// A static member leaves with -2 and its successor (a new member
		// ID, same instance) takes over; the old ID then heartbeats.
		j(seedBeat{member: m1, inst: fzInstI1}.bytes(), seedBeat{member: m2}.bytes(),
			seedBeat{member: m1, ep: fzEpClient, inst: fzInstI1}.bytes(),
			seedBeat{member: m1, ep: fzEpStaticLeave, inst: fzInstI1, own: fzOwnNull}.bytes(), []byte{opRestart},
			seedBeat{member: m3, inst: fzInstI1}.bytes(), seedBeat{member: m1, ep: fzEpClient, inst: fzInstI1}.bytes(),
			seedBeat{member: m1, ep: fzEpLeave, own: fzOwnNull}.bytes(),
			seedBeat{member: m3, ep: fzEpStaticLeave, inst: fzInstI1, own: fzOwnNull}.bytes(),
			seedBeat{member: m3, inst: fzInstI1, names: fzNamesTU}.bytes(), seedCommit(9, m3, fzEpClient, 1, 0)),
		// Revocation: the member keeps reporting what it must give up,
		// unsubscribes meanwhile and is evicted at its rebalance timeout;
		// then the group fills up.
		j(seedBeat{member: m1}.bytes(), seedBeat{member: m2}.bytes(),
			seedBeat{member: m1, ep: fzEpClient, rebalance: fzRebalance5}.bytes(),
			seedBeat{member: m1, ep: fzEpClient, own: fzOwnHeld}.bytes(), []byte{opRestart},
			seedBeat{member: m1, ep: fzEpClient, own: fzOwnHeld, names: fzNamesU}.bytes(),
			seedCommit(9, m1, fzEpClient, 1, 0), seedTick(fzJump5s), seedBeat{member: m2, ep: fzEpClient}.bytes(),
			seedBeat{member: m2, ep: fzEpClient}.bytes(), seedCommit(9, m2, fzEpClient, 2, 0xff),
			seedBeat{v0: true, member: fzNoID}.bytes(), seedBeat{v0: true, member: fzNoID}.bytes(),
			seedBeat{v0: true, member: fzNoID}.bytes(), seedBeat{v0: true, member: fzNoID}.bytes(),
			seedBeat{member: m3, inst: fzInstI2}.bytes()),
		// Static edge cases: a retried static leave, a member changing
		// its instance, a successor, a dynamic rejoin in place, a leave
		// by instance.
		j(seedBeat{member: m1, inst: fzInstI1}.bytes(),
			seedBeat{member: m1, ep: fzEpStaticLeave, inst: fzInstI1, own: fzOwnNull}.bytes(),
			seedBeat{member: m1, ep: fzEpStaticLeave, inst: fzInstI1, own: fzOwnNull}.bytes(),
			seedBeat{member: m1, inst: fzInstI2}.bytes(), seedBeat{member: m2, inst: fzInstI1}.bytes(),
			seedBeat{member: m1, ep: fzEpClient}.bytes(), seedBeat{member: m2}.bytes(),
			seedBeat{member: m2, ep: fzEpLeave, inst: fzInstI1, own: fzOwnNull}.bytes()),
		// Assignors, racks and regexes; a topic appears; an admin
		// deletes offsets and, once the group is empty, the group.
		j(seedBeat{member: m1, assign: fzRange, rack: 2}.bytes(),
			seedBeat{member: m2, names: fzNamesNone, regex: fzRegexTU}.bytes(), []byte{opAddTopic},
			seedBeat{member: m1, ep: fzEpClient, assign: fzRendezvous}.bytes(),
			seedBeat{member: m2, ep: fzEpClient, names: fzNamesNil, regex: fzRegexBad}.bytes(),
			seedBeat{member: m2, ep: fzEpClient, names: fzNamesNil}.bytes(), seedCommit(10, m2, fzEpClient, 0, 0),
			seedBeat{member: m2, ep: fzEpClient, names: fzNamesNil, regex: fzRegexEmpty}.bytes(),
			[]byte{opRead, 1, m2, fzEpClient}, []byte{opOffsetDelete, 3, 0xff}, seedTick(fzJump10m), []byte{opDelete},
			seedBeat{member: m1}.bytes()),
		// A response is lost: the member reports at its previous epoch
		// what it got at the one before, and commits; the coordinator
		// restarts in between.
		j(seedBeat{member: m1}.bytes(), seedBeat{member: m1, ep: fzEpClient, own: fzOwnSubset, mask: 0x30, names: fzNamesTVW}.bytes(),
			seedCommit(9, m1, fzEpCurrent, 1, 0), []byte{opRestart}, seedBeat{member: m1, ep: fzEpPrevious, own: fzOwnHeld}.bytes(),
			seedCommit(9, m1, fzEpCurrent, 1, 0)),
		// Coalesced joins (the first restart switches the window on):
		// m2 and m3 wait for the bump, which survives two restarts and
		// comes at the first tick; then a join waits again and a leave's
		// bump serves it.
		j([]byte{opRestart}, seedBeat{member: m1}.bytes(), seedBeat{member: m2}.bytes(), seedBeat{member: m3}.bytes(),
			[]byte{opRestart, 1, opRestart, 0},
			seedBeat{member: m1, ep: fzEpClient}.bytes(), seedBeat{member: m2, ep: fzEpClient}.bytes(),
			seedBeat{member: m3, ep: fzEpClient}.bytes(), seedBeat{member: m1, ep: fzEpClient}.bytes(),
			seedBeat{member: m3, ep: fzEpLeave, own: fzOwnNull}.bytes(), seedBeat{member: m3}.bytes(),
			seedBeat{member: m2, ep: fzEpLeave, own: fzOwnNull}.bytes(), seedTick(0), seedTick(fzJump5s)),
		// The window on, a group empties and a join soon after waits
		// for its bump with every partition free.
		j([]byte{opRestart}, seedBeat{member: m1}.bytes(), seedBeat{member: m1, ep: fzEpLeave, own: fzOwnNull}.bytes(),
			seedBeat{member: m2}.bytes(), []byte{opRestart, 1}, seedBeat{member: m2, ep: fzEpClient}.bytes(), []byte{0},
			seedBeat{member: m2, ep: fzEpClient}.bytes()),
	}
}

func seedJoin(version, member, inst byte) []byte {
	return []byte{opClassicJoin, version, member, inst, 0, 0, 0, 0, 0}
}

func seedSync(member, plan byte) []byte {
	return []byte{opClassicSync, 5, member, 0, 0, plan, 0}
}

func mixedFuzzSeeds() [][]byte {
	j := slices.Concat[[]byte]
	return [][]byte{
		// A classic group forms, commits, restarts, empties; a KIP-848
		// member takes it over, leaves; a classic member comes back.
		j(seedJoin(3, fzNoID, 0), seedTick(fzJump5s), seedSync(0, 0), []byte{opRestart}, seedCommit(7, 0, fzEpGroup, 0, 0),
			seedCommit(7, 0, fzEpGroup, 2, 0xff), []byte{opClassicLeave, 3, 0, 0, fzGhost},
			seedBeat{member: fzM1}.bytes(), seedBeat{member: fzM1, ep: fzEpClient}.bytes(),
			seedCommit(9, fzM1, fzEpClient, 2, 0xff), seedJoin(5, fzNoID, 0),
			seedBeat{member: fzM1, ep: fzEpLeave, own: fzOwnNull}.bytes(), seedJoin(5, fzNoID, 0), seedJoin(5, 2, 0),
			seedTick(fzJump5s), seedSync(2, 3), []byte{opClassicBeat, 4, 2, 0, 0}),
		// Static classic members (the coordinator restarts while they
		// join), then a KIP-848 static member with the same instance ID
		// once the classic group is empty.
		j(seedJoin(5, fzNoID, fzInstI1), seedJoin(5, fzNoID, fzInstI2), []byte{opRestart}, seedJoin(5, 0, fzInstI1),
			seedJoin(5, 1, fzInstI2), seedTick(fzJump5s), seedSync(0, 0), seedSync(1, 0),
			seedJoin(5, fzNoID, fzInstI1), seedBeat{member: fzM1, inst: fzInstI1}.bytes(),
			seedTick(fzJumpSess), seedTick(fzJumpReb), seedBeat{member: fzM1, inst: fzInstI1}.bytes(),
			seedBeat{member: fzM1, ep: fzEpStaticLeave, inst: fzInstI1, own: fzOwnNull}.bytes(), seedJoin(5, fzNoID, fzInstI1)),
	}
}
