package coordinator

// The classic group protocol: JoinGroup, SyncGroup, Heartbeat and
// LeaveGroup, in which the coordinator runs the rebalance barrier and one
// member, the leader, computes the assignment.
//
// A rebalance has two phases. In PreparingRebalance every member must send
// a JoinGroup, which the group parks; the phase ends when all members have
// joined (and no member that was given an ID with MEMBER_ID_REQUIRED is
// still due to rejoin) or when the largest rebalance timeout of the members
// passes, and then the generation (g.epoch) is bumped and every parked join
// is answered. In CompletingRebalance the members send SyncGroup; the
// leader's carries the plan, which the group relays to every member and,
// for protocol type "consumer", applies to the partition owners (g.owners)
// with the new generation as the token of every partition that changes
// hands. A new or empty group waits Config.InitialRebalanceDelay before
// ending its first join phase, so that a fleet starting together causes one
// rebalance.
//
// Timers are deadlines checked in Tick: each member's session (a member with
// a parked JoinGroup or SyncGroup does not expire: the rebalance and sync
// deadlines bound those waits), the session of members that were told
// MEMBER_ID_REQUIRED, the end of the join phase and the sync deadline. The
// group caches the earliest session deadline and recomputes it only in
// Tick, so a heartbeat is O(1) whatever the group's size.
//
// Events: EventRebalanceStarted gives its reason: member-joined,
// member-left, member-expired, metadata-changed (a member rejoined with
// other protocols or metadata), leader-rejoined, static-member-replaced (a
// static member restarted while the group was completing a rebalance) or
// sync-timeout. EventMemberRemoved gives rebalance-timeout, sync-timeout or
// static-member-replaced. EventRebalanceCompleted counts as Moves the
// partitions handed to a new owner under a new token.
//
// Where tenure departs from Kafka (each is noted where it happens): every
// parked request is answered (a superseded one with REBALANCE_IN_PROGRESS,
// one of a removed member with UNKNOWN_MEMBER_ID) so that a connection never
// waits for a reply that will not come; a static member is replaced without
// a rebalance only when its protocols and their metadata are unchanged
// (Kafka compares only the protocol it would select); the join phase of the
// initial delay never ends early, even when a member leaves; duplicate
// protocol names in a JoinGroup count once; a rebalance timeout that is not
// positive is INVALID_REQUEST; protocol votes that tie go to the name that
// sorts first; assignment bytes are not cleared when a rebalance interrupts
// CompletingRebalance (they only surface once the group is Stable again).

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerProtocolType is the protocol type of Kafka consumers; only groups
// of this type carry assignments the coordinator can read, and so partition
// owners and tokens.
const consumerProtocolType = "consumer"

// classicPhase is a classic group's state as Kafka names it.
type classicPhase uint8

const (
	_ classicPhase = iota
	classicEmpty
	classicPreparing
	classicCompleting
	classicStable
)

var classicPhaseNames = [...]string{
	classicEmpty:      "Empty",
	classicPreparing:  "PreparingRebalance",
	classicCompleting: "CompletingRebalance",
	classicStable:     "Stable",
}

func (p classicPhase) String() string {
	if int(p) < len(classicPhaseNames) && classicPhaseNames[p] != "" {
		return classicPhaseNames[p]
	}
	return "classicphase(" + itoa(int(p)) + ")"
}

// classicState is the classic half of a Group.
type classicState struct {
	phase        classicPhase
	protocolType string // set by the first member, cleared when the group empties
	protocol     string // chosen at the last completed join phase
	leader       string

	members map[string]*classicMember
	// pending are members told MEMBER_ID_REQUIRED that have not rejoined
	// yet: they are not members, but they hold up the end of a join phase
	// (as in Kafka) until they rejoin or their session times out.
	pending map[string]*classicPending
	// static maps instance IDs to member IDs (KIP-345).
	static map[string]string
	// protocols counts, per protocol name, the members that support it.
	protocols map[string]int

	seq          uint64 // join order, for leader election
	joined       int    // members with a parked JoinGroup
	pendingSyncs int    // members that must still send SyncGroup

	// sessNext is at or before the session deadline of every member
	// without a parked request (zero: no such member); pendingNext is the
	// same for pending members. Both are only recomputed in Tick.
	sessNext    time.Time
	pendingNext time.Time

	// joinDeadline ends PreparingRebalance. When initial is set it is the
	// initial delay (Kafka's tryCompleteInitialRebalanceElseSchedule):
	// when it passes, it is extended by min(initDelay, initRemaining) if a
	// member joined meanwhile and time remains.
	joinDeadline   time.Time
	initial        bool
	newMemberAdded bool
	initDelay      time.Duration
	initRemaining  time.Duration

	// syncDeadline removes the members that did not send SyncGroup within
	// the rebalance timeout after the join phase ended.
	syncDeadline time.Time
	// logEpoch is the generation whose log entry waits for the leader's
	// plan.
	logEpoch int32
}

// classicMember is one member of a classic group.
type classicMember struct {
	id         string
	instanceID string
	static     bool
	clientID   string
	clientHost string
	seq        uint64

	session   time.Duration
	rebalance time.Duration
	protocols []classicProtocol

	// assignment is the synced assignment; owned is what it gives the
	// member in g.owners (protocol type "consumer" only), sorted. Neither
	// slice is modified in place once stored: records and responses share
	// them.
	assignment []byte
	owned      []TopicPartition
	// assignedAt is the generation of the member's last
	// AssignmentRecord; 0 if it has none.
	assignedAt int32

	deadline    time.Time
	graced      bool // restored with the takeover grace, not heard from since
	join        *classicParked
	sync        *classicParked
	pendingSync bool

	// next holds the leader's plan for this member while a SyncGroup is
	// applied.
	next []byte

	// regrant: ReissueGrants asked for the member's next successful reply
	// to grant everything it owns (Config.IssueGrants).
	regrant bool

	// conn is the shell's tag, never read here (Group.SetMemberConn).
	conn any
}

// classicProtocol is one protocol a member supports, with its metadata
// (copied: the request's bytes may be reused by the caller).
type classicProtocol struct {
	name     string
	metadata []byte
}

// classicPending is a member told MEMBER_ID_REQUIRED.
type classicPending struct {
	deadline time.Time
}

// classicParked is a JoinGroup or SyncGroup waiting for its answer.
type classicParked struct {
	ref     any
	resp    kmsg.Response // the caller's response to fill, or nil
	version int16
}

func (c *classicState) init() {
	*c = classicState{
		phase:     classicEmpty,
		members:   make(map[string]*classicMember),
		pending:   make(map[string]*classicPending),
		static:    make(map[string]string),
		protocols: make(map[string]int),
	}
}

func (c *classicState) empty() bool { return len(c.members) == 0 }

func (c *classicState) stateName() string { return c.phase.String() }

// parked reports whether m waits for a JoinGroup or SyncGroup answer; such
// a member does not expire.
func (m *classicMember) parked() bool { return m.join != nil || m.sync != nil }

// setDeadline sets m's session deadline and keeps sessNext at or before it.
func (c *classicState) setDeadline(m *classicMember, d time.Time) {
	m.deadline, m.graced = d, false
	if c.sessNext.IsZero() || d.Before(c.sessNext) {
		c.sessNext = d
	}
}

// dropPending forgets a pending member; pendingNext goes with the last one.
func (c *classicState) dropPending(id string) {
	delete(c.pending, id)
	if len(c.pending) == 0 {
		c.pendingNext = time.Time{}
	}
}

// clearPendingSync notes that m no longer owes a SyncGroup; the sync
// deadline goes once nobody does.
func (c *classicState) clearPendingSync(m *classicMember) {
	if !m.pendingSync {
		return
	}
	m.pendingSync = false
	c.pendingSyncs--
	if c.pendingSyncs == 0 {
		c.syncDeadline = time.Time{}
	}
}

// validateMember applies Kafka's validateExistingMember: with an instance
// ID the instance must map to memberID (FENCED_INSTANCE_ID if it maps to
// another member), without one the member must exist.
func (c *classicState) validateMember(memberID string, instanceID *string) (*classicMember, int16) {
	if instanceID != nil {
		known, ok := c.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if known != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m, ok := c.members[memberID]
	if !ok {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// sortedMembers returns the members sorted by ID.
func (c *classicState) sortedMembers() []*classicMember {
	ms := make([]*classicMember, 0, len(c.members))
	for _, m := range c.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *classicMember) int { return strings.Compare(a.id, b.id) })
	return ms
}

// maxRebalance is the largest rebalance timeout of the members.
func (c *classicState) maxRebalance() time.Duration {
	var d time.Duration
	for _, m := range c.members {
		d = max(d, m.rebalance)
	}
	return d
}

// metadata returns m's metadata for protocol name.
func (m *classicMember) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// sameProtocols reports whether ps are m's protocols, in the same order and
// with the same metadata.
func (m *classicMember) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	ps = dedupProtocols(ps)
	if len(ps) != len(m.protocols) {
		return false
	}
	for i, p := range ps {
		if p.Name != m.protocols[i].name || !bytes.Equal(p.Metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// dedupProtocols drops later entries of a protocol name already listed; it
// returns ps itself when there are none (the common case) and allocates
// only otherwise.
func dedupProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	for i := 1; i < len(ps); i++ {
		for j := range i {
			if ps[j].Name == ps[i].Name {
				out := slices.Clone(ps[:i])
				for _, p := range ps[i+1:] {
					if !slices.ContainsFunc(out, func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name }) {
						out = append(out, p)
					}
				}
				return out
			}
		}
	}
	return ps
}

// copyProtocols copies a JoinGroup's protocols (deduplicated) for keeping.
func copyProtocols(ps []kmsg.JoinGroupRequestProtocol) []classicProtocol {
	ps = dedupProtocols(ps)
	out := make([]classicProtocol, len(ps))
	for i, p := range ps {
		out[i] = classicProtocol{name: p.Name, metadata: bytes.Clone(p.Metadata)}
		if out[i].metadata == nil {
			out[i].metadata = []byte{}
		}
	}
	return out
}

func (c *classicState) countProtocols(m *classicMember, delta int) {
	for _, p := range m.protocols {
		c.protocols[p.name] += delta
		if c.protocols[p.name] == 0 {
			delete(c.protocols, p.name)
		}
	}
}

// supportsProtocols is Kafka's ClassicGroup.supportsProtocols: an empty
// group takes any non-empty protocol type with at least one protocol; a
// non-empty group needs the same type and one protocol all its members
// support.
func (c *classicState) supportsProtocols(typ string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(c.members) == 0 {
		return typ != "" && len(ps) > 0
	}
	if typ != c.protocolType {
		return false
	}
	for _, p := range ps {
		if c.protocols[p.Name] == len(c.members) {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: the candidates are the protocols every
// member supports; each member votes for the first candidate in its own
// order of preference; most votes wins, ties go to the name that sorts
// first (Kafka leaves ties to hash order).
func (c *classicState) selectProtocol() string {
	votes := make(map[string]int)
	for _, m := range c.members {
		for _, p := range m.protocols {
			if c.protocols[p.name] == len(c.members) {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", 0
	for name, v := range votes {
		if v > bestVotes || v == bestVotes && name < best {
			best, bestVotes = name, v
		}
	}
	if best == "" {
		// supportsProtocols admits a join only if it leaves a protocol
		// that every member supports.
		panic(fmt.Sprintf("coordinator: classic group has no common protocol among %d members: %v", len(c.members), c.protocols))
	}
	return best
}

// classicMemberRecord is the durable form of m.
func (g *Group) classicMemberRecord(m *classicMember) *MemberRecord {
	ps := make([]Protocol, len(m.protocols))
	for i, p := range m.protocols {
		ps[i] = Protocol{Name: p.name, Metadata: p.metadata}
	}
	return &MemberRecord{
		Group:            g.name,
		MemberID:         m.id,
		InstanceID:       m.instanceID,
		ClientID:         m.clientID,
		ClientHost:       m.clientHost,
		SessionTimeout:   m.session,
		RebalanceTimeout: m.rebalance,
		Protocols:        ps,
	}
}

// persistClassicAssignment records m's assignment at the current
// generation.
func (g *Group) persistClassicAssignment(m *classicMember) {
	m.assignedAt = g.epoch
	g.persist(g.classicAssignmentRecord(m))
}

// classicAssignmentRecord is the durable form of m's assignment.
func (g *Group) classicAssignmentRecord(m *classicMember) *AssignmentRecord {
	r := &AssignmentRecord{
		Group:       g.name,
		MemberID:    m.id,
		MemberEpoch: m.assignedAt,
		Raw:         m.assignment,
	}
	if len(m.owned) > 0 {
		r.Owned = make([]OwnedPartition, len(m.owned))
		for i, tp := range m.owned {
			o, _ := g.owners.owner(tp)
			r.Owned[i] = OwnedPartition{Topic: tp.Topic, Partition: tp.Partition, Token: o.token}
		}
	}
	return r
}

func (g *Group) classicEvent(kind EventKind, member, reason string) {
	g.event(Event{Kind: kind, MemberID: member, Reason: reason, Members: len(g.classic.members)})
}

// classicAdopt makes the group classic before a member (or pending member)
// is added. Only an empty consumer group gets here (classicJoin rejects
// the rest); its epoch, owners and offsets carry over.
//
// classicJoin resets the classic state when the group is not classic, so
// that nothing a consumer group left behind survives the switch.
func (g *Group) classicAdopt() {
	if g.typ == Classic {
		return
	}
	g.typ = Classic
	g.persistGroup()
}

// classicRemove removes m from the group without starting a rebalance: it
// answers m's parked requests with code, releases its partitions and
// records the removal. The caller then calls classicAfterRemoval.
func (g *Group) classicRemove(m *classicMember, code int16, kind EventKind, reason string) {
	c := &g.classic
	if m.join != nil {
		g.classicReplyJoinError(m.join, code, m.id)
		m.join = nil
		c.joined--
	}
	if m.sync != nil {
		g.classicReplySyncError(m.sync, code)
		m.sync = nil
	}
	c.clearPendingSync(m)
	c.countProtocols(m, -1)
	delete(c.members, m.id)
	if len(c.members) == 0 {
		c.sessNext = time.Time{}
	}
	if m.static && c.static[m.instanceID] == m.id {
		delete(c.static, m.instanceID)
	}
	if c.leader == m.id {
		// The next join phase elects a leader among the members that
		// joined; until then the group has none.
		c.leader = ""
		g.persistGroup()
	}
	for _, tp := range m.owned {
		g.owners.release(tp, m.id)
	}
	m.owned = nil
	g.persist(&MemberRecord{Group: g.name, MemberID: m.id, InstanceID: m.instanceID, Deleted: true})
	g.classicEvent(kind, m.id, reason)
}

// classicAfterRemoval moves the group on after members were removed: a
// Stable or CompletingRebalance group starts a rebalance; one in
// PreparingRebalance may now have every remaining member joined.
func (g *Group) classicAfterRemoval(now time.Time, reason string) {
	switch g.classic.phase {
	case classicStable, classicCompleting:
		g.classicPrepareRebalance(now, reason)
	case classicPreparing:
		g.classicMaybeCompleteJoin(now)
	}
}

// classicString renders the classic part of Group.String: deadlines are
// absolute UTC instants, so the rendering is stable for a given history.
func (g *Group) classicString(b *strings.Builder) {
	c := &g.classic
	fmt.Fprintf(b, "classic protocol-type=%q protocol=%q leader=%q\n", c.protocolType, c.protocol, c.leader)
	if !c.joinDeadline.IsZero() {
		fmt.Fprintf(b, "  join-deadline=%s", fmtInstant(c.joinDeadline))
		if c.initial {
			fmt.Fprintf(b, " initial-delay=%v remaining=%v new-member-added=%t", c.initDelay, c.initRemaining, c.newMemberAdded)
		}
		b.WriteByte('\n')
	}
	if !c.syncDeadline.IsZero() {
		fmt.Fprintf(b, "  sync-deadline=%s pending-syncs=%d\n", fmtInstant(c.syncDeadline), c.pendingSyncs)
	}
	for _, m := range c.sortedMembers() {
		fmt.Fprintf(b, "  member %s", m.id)
		if m.static {
			fmt.Fprintf(b, " instance=%s", m.instanceID)
		}
		fmt.Fprintf(b, " client=%s session=%v rebalance=%v", m.clientID, m.session, m.rebalance)
		names := make([]string, len(m.protocols))
		for i, p := range m.protocols {
			names[i] = p.name
		}
		fmt.Fprintf(b, " protocols=%s", strings.Join(names, ","))
		switch {
		case m.join != nil:
			b.WriteString(" joining")
		case m.sync != nil:
			b.WriteString(" syncing")
		default:
			fmt.Fprintf(b, " expires=%s", fmtInstant(m.deadline))
		}
		if m.pendingSync {
			b.WriteString(" pending-sync")
		}
		fmt.Fprintf(b, " assignment=%dB owned=%d\n", len(m.assignment), len(m.owned))
	}
	ids := make([]string, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(b, "  pending %s expires=%s\n", id, fmtInstant(c.pending[id].deadline))
	}
}

func fmtInstant(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
