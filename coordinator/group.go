package coordinator

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupType is the protocol a group's members speak.
type GroupType uint8

const (
	_ GroupType = iota
	// Classic groups use JoinGroup/SyncGroup/Heartbeat/LeaveGroup; the
	// leader member computes the assignment.
	Classic
	// Consumer groups use KIP-848's ConsumerGroupHeartbeat; the
	// coordinator computes the assignment.
	Consumer
)

func (t GroupType) String() string {
	switch t {
	case Classic:
		return "classic"
	case Consumer:
		return "consumer"
	}
	return "grouptype(" + itoa(int(t)) + ")"
}

// Request is one decoded request addressed to a group.
type Request struct {
	// Ref identifies the request to the caller; the group never inspects
	// it and returns it in the Reply that answers the request.
	Ref any
	// Msg is the request: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
	// ConsumerGroupHeartbeat, OffsetCommit or OffsetDelete.
	Msg kmsg.Request
	// Resp, if not nil, is a response of Msg's kind for the group to
	// reset to Msg's version and fill, so a caller can reuse responses;
	// otherwise the group allocates one with Msg.ResponseKind().
	Resp kmsg.Response
	// ClientID and ClientHost describe the connection, for member IDs and
	// DescribeGroups.
	ClientID   string
	ClientHost string
}

// Group is the state machine of one group: its members, generation
// (epoch), assignments, partition owners with their tokens, and committed
// offsets. It is pure: time comes in as an argument, effects go out through
// Ready, and it never reads a clock, starts a goroutine or performs I/O.
//
// A Group is not safe for concurrent use: one goroutine (or lock holder)
// owns it at a time. The TCP server, the simulator and the tests all drive
// this same code.
type Group struct {
	name string
	cfg  *Config
	rng  *rand.Rand

	typ GroupType
	// epoch is the classic generation or the KIP-848 group epoch. One
	// counter serves both so that tokens keep growing when an empty group
	// changes type.
	epoch   int32
	deleted bool
	// tombstone is set when the group was restored from the tombstone of
	// a deleted group of its name: the store's GroupRecord says deleted
	// until the group writes one of its own, which it does before its
	// first offset (an admin commit needs no other record).
	tombstone bool

	// resume is set from Rebuild until Resume starts the group's clocks.
	resume *resumeState
	// noGroupTargets: the shell's SetGroupTargets(false).
	noGroupTargets bool

	owners  ownership
	offsets offsetTable
	log     genLog
	// expelledEmpty: the group's last member was expelled (its session
	// or its connection-loss grace ended), not left: its consumers may
	// still be working on the partitions it committed (Stats.Unowned).
	// A member's join or leave clears it. Not persisted: a coordinator
	// that takes the group over does not know it.
	expelledEmpty bool
	// conn marks the members whose connection closed (connloss.go).
	conn connLoss
	// now is the time of the input being stepped (Step), for the
	// callbacks that do not take it (ownership changes).
	now time.Time

	classic  classicState
	consumer consumerState

	ready Ready
	// advanced is the Seq of the last Ready retired by Advance; lastNext
	// its NextTick.
	advanced uint64
	lastNext time.Time
}

// NewGroup returns an empty classic group. cfg must be valid (see
// Config.Validate) and is not copied; rng generates member IDs and is owned
// by the group from now on (seed it from a secure source in production and
// from the scenario seed in the simulator).
func NewGroup(name string, cfg *Config, rng *rand.Rand) *Group {
	g := &Group{name: name, cfg: cfg, rng: rng, typ: Classic}
	g.owners.init()
	g.owners.changed = g.ownerChanged
	g.offsets.init()
	g.log.init()
	g.classic.init()
	g.consumer.init()
	return g
}

// Name returns the group ID.
func (g *Group) Name() string { return g.name }

// Type returns the group's protocol type.
func (g *Group) Type() GroupType { return g.typ }

// Epoch returns the classic generation or KIP-848 group epoch.
func (g *Group) Epoch() int32 { return g.epoch }

// HasReady reports whether Ready has anything new for the caller.
func (g *Group) HasReady() bool {
	return len(g.ready.Persist) > 0 || len(g.ready.Replies) > 0 || len(g.ready.Events) > 0 ||
		!g.nextTick().Equal(g.lastNext)
}

// Ready returns what the caller must do now (see Ready for the order). It
// returns the same Seq until Advance retires it. The records are the
// caller's for good; the Replies and Events slices are valid until Advance.
func (g *Group) Ready() Ready {
	rd := g.ready
	rd.Seq = g.advanced + 1
	rd.NextTick = g.nextTick()
	return rd
}

// Advance tells the group the caller has taken rd, which Ready returned.
// Only what rd held is retired: records, replies and events added by a Step
// after that Ready stay for the next one (raft's rule). The group never
// touches rd's records again; it reuses the memory of the Replies and
// Events slices.
func (g *Group) Advance(rd Ready) {
	if rd.Seq != g.advanced+1 {
		panic(fmt.Sprintf("coordinator: Advance of Ready %d, but the group's next Ready is %d", rd.Seq, g.advanced+1))
	}
	g.advanced = rd.Seq
	g.ready.Persist = retire(g.ready.Persist, len(rd.Persist), false)
	g.ready.Replies = retire(g.ready.Replies, len(rd.Replies), true)
	g.ready.Events = retire(g.ready.Events, len(rd.Events), true)
	g.lastNext = rd.NextTick
}

// retire drops the first n elements of s. With reuse, s's memory holds what
// is left; without, what is left moves to new memory (or none), so the
// caller may keep the retired elements' backing array.
func retire[T any](s []T, n int, reuse bool) []T {
	rest := s[n:]
	if !reuse {
		if len(rest) == 0 {
			return nil
		}
		return append([]T(nil), rest...)
	}
	k := copy(s, rest)
	clear(s[k:])
	return s[:k]
}

// nextTick is the earliest instant a timer of the group may be due; it may
// be earlier than the true next deadline (a Tick then finds nothing to do
// and recomputes), never later.
func (g *Group) nextTick() time.Time {
	switch g.typ {
	case Classic:
		return g.classicNext()
	case Consumer:
		return g.consumerNext()
	}
	return time.Time{}
}

// Empty reports whether the group has no members.
func (g *Group) Empty() bool {
	switch g.typ {
	case Classic:
		return g.classic.empty()
	case Consumer:
		return g.consumer.empty()
	}
	return true
}

// Deleted reports whether the group was deleted; a deleted Group accepts
// no more requests and the caller should drop it.
func (g *Group) Deleted() bool { return g.deleted }

func (g *Group) reply(req Request, resp kmsg.Response) { g.replyGranting(req, resp, nil) }

// replyGranting queues a reply that tells its member of grants (nil:
// none), for the caller to sign (grants.go).
func (g *Group) replyGranting(req Request, resp kmsg.Response, gr *Grants) {
	g.ready.Replies = append(g.ready.Replies, Reply{Ref: req.Ref, Msg: resp, Grants: gr})
}

func (g *Group) persist(r Record) { g.ready.Persist = append(g.ready.Persist, r) }

// SetGroupTargets says whether the group's GroupRecords may carry the
// KIP-848 targets of its epoch bumps (GroupRecord.Targets), as they do
// from NewGroup, Restore and Rebuild on, or must leave every target to its
// member's AssignmentRecord, as before they could: a store that a
// tenure of that time still reads (an HA set upgraded node by node) must
// not hold a record it refuses, and the etcd store writes such a record
// in a value version only newer tenures read (docs/STORE.md). The shell
// sets it before it steps the group, as SetMemberConn tags members: the
// core reads no clock and no store, and the shell decides once per set.
// It takes effect at the group's next GroupRecord; off, that record
// writes the AssignmentRecords of the members whose target the store
// held only in a GroupRecord's Targets.
func (g *Group) SetGroupTargets(on bool) { g.noGroupTargets = !on }

// persistGroup writes the group's GroupRecord as the group is now, with
// the KIP-848 targets its members' AssignmentRecords do not hold yet.
func (g *Group) persistGroup() {
	g.tombstone = false // the store's record is this one from now on
	r := g.groupRecord()
	if g.typ == Consumer {
		r.Targets = g.consumer.takeTargets(!g.noGroupTargets)
	}
	g.persist(r)
}

// groupRecord is the group's GroupRecord as the group is now, without
// Targets.
func (g *Group) groupRecord() *GroupRecord {
	r := &GroupRecord{Group: g.name, Type: g.typ, Epoch: g.epoch}
	switch g.typ {
	case Classic:
		c := &g.classic
		r.ProtocolType, r.Protocol, r.Leader, r.State = c.protocolType, c.protocol, c.leader, c.phase.String()
	case Consumer:
		r.Protocol = g.consumer.assignor
		if g.consumer.joinsWaiting() {
			r.State = consumerAssigning
		}
	}
	return r
}

func (g *Group) event(e Event) {
	switch e.Kind {
	case EventMemberJoined:
		g.log.noteMember(e.MemberID, true)
		g.expelledEmpty = false
	case EventMemberLeft, EventMemberExpired, EventMemberRemoved:
		g.log.noteMember(e.MemberID, false)
		g.memberGone(e.MemberID)
		g.connForget(e.MemberID)
		if e.Members == 0 {
			g.expelledEmpty = e.Kind == EventMemberExpired
		}
	}
	e.Group = g.name
	e.Epoch = g.epoch
	g.ready.Events = append(g.ready.Events, e)
}

// newMemberID returns a member ID in Kafka's shape: the client ID, a dash,
// and a random UUID.
func (g *Group) newMemberID(clientID string) string {
	var b [16]byte
	hi, lo := g.rng.Uint64(), g.rng.Uint64()
	for i := range 8 {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	var s strings.Builder
	s.Grow(len(clientID) + 37)
	s.WriteString(clientID)
	s.WriteByte('-')
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s.WriteByte('-')
		}
		s.WriteByte(hex[c>>4])
		s.WriteByte(hex[c&0xf])
	}
	return s.String()
}

// String renders the group's state, stably sorted, for golden tests and
// the admin CLI.
func (g *Group) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group %s type=%s epoch=%d state=%s", g.name, g.typ, g.epoch, g.State())
	if g.deleted {
		b.WriteString(" deleted")
	}
	b.WriteByte('\n')
	switch g.typ {
	case Classic:
		g.classicString(&b)
	case Consumer:
		g.consumerString(&b)
	}
	g.owners.writeTo(&b)
	g.offsets.writeTo(&b)
	return b.String()
}

// State returns the group's state as Kafka names it (classic: Empty,
// PreparingRebalance, CompletingRebalance, Stable, Dead; consumer: Empty,
// Assigning, Reconciling, Stable, Dead).
func (g *Group) State() string {
	if g.deleted {
		return "Dead"
	}
	switch g.typ {
	case Classic:
		return g.classic.stateName()
	case Consumer:
		return g.consumer.stateName()
	}
	return "Empty"
}

func itoa(i int) string { return strconv.Itoa(i) }
