package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Ready is what a Group asks its caller to do after Step. The
// caller performs it in this order, and calls Advance(rd) once it has taken
// what it keeps (the records are the caller's for good; the Replies and
// Events slices are reused after Advance):
//
//  1. Persist every record durably, in order, BEFORE sending any reply of
//     this Ready or of a later one. A reply may reveal a generation, an
//     assignment or an accepted commit; if the coordinator crashed after
//     the reply but before the write, a successor could hand out the same
//     token again. The write may be asynchronous (raft's asynchronous
//     storage writes): the group keeps stepping while it is in flight, and
//     a reply of Ready n goes out once the records of every Ready up to n
//     are durable, so a reply that persisted nothing waits only for the
//     writes its group already has in flight. If persisting fails, the
//     caller sends none of the replies waiting on that write or a later
//     one: it drops the group (its state is ahead of the store) and
//     rebuilds it from the store with Restore.
//  2. Send every reply. Some answer requests stepped earlier (a classic
//     JoinGroup is answered when the rebalance completes); Reply.Ref says
//     which.
//  3. Step a Tick no later than NextTick (when it is not zero), even if no
//     request arrives.
//
// Events are informational (logs, metrics, simulator statistics) and may be
// handled at any point.
type Ready struct {
	// Seq numbers the Readies of one group: 1, 2, ... Ready returns the
	// same number until Advance retires it. A caller that persists
	// asynchronously uses it as the group's write sequence: a reply of
	// this Ready may go out once every Ready up to Seq is durable.
	Seq      uint64
	Persist  []Record
	Replies  []Reply
	Events   []Event
	NextTick time.Time
}

// Reply answers an input given to Step: a Request (Msg) or an admin input
// (Drain, Undrain, DeleteGroup: Err).
type Reply struct {
	// Ref is the Ref of the input this answers.
	Ref any
	// Msg is the response to a Request, of the request's kind and
	// version; nil for an admin input.
	Msg kmsg.Response
	// Err is the outcome of an admin input: nil, or why it was refused
	// (see Drain and DeleteGroup). Always nil with Msg.
	Err error
	// Grants, with Config.IssueGrants, are the ownerships Msg tells its
	// member of, for the caller to sign and carry in Msg (epoch/grantwire)
	// before sending it; nil when there are none (grants.go).
	Grants *Grants
}

// Record is a change to durable state. Each record is the whole new state
// of one entity (a group, a member, a member's assignment, an offset, a
// topic), so a store keeps only the latest record of each entity, and
// Restore rebuilds a group from those (see RecordSet for which record
// replaces which). Records are immutable once a Ready hands them out: the
// group never changes them or their slices again, so a store may keep them
// until they are written. The concrete types are GroupRecord, MemberRecord,
// AssignmentRecord, OffsetRecord and TopicRecord.
type Record interface {
	record()
}

// GroupRecord is written when the group's epoch (generation), type,
// protocol or classic state changes, and with Deleted when the group is
// deleted. A deleted group's record stays in the store as its tombstone:
// its Epoch is where a group re-created under the same name continues
// (Restore).
type GroupRecord struct {
	Group string
	Type  GroupType
	// Epoch is the classic generation or the KIP-848 group epoch; it never
	// decreases for the life of the group, so tokens derived from it never
	// go backwards.
	Epoch        int32
	ProtocolType string // classic only
	Protocol     string // classic: the chosen protocol; KIP-848: the assignor
	Leader       string // classic only
	// State is a classic group's state as Kafka names it (Empty,
	// PreparingRebalance, CompletingRebalance, Stable). A KIP-848 group's
	// state follows from its members, so it is empty, except "Assigning"
	// while joins wait for a coalesced epoch bump
	// (Config.ConsumerJoinCoalesce), which a restored group then performs.
	State   string
	Deleted bool
	// Targets are, for a KIP-848 group, the targets of the members whose
	// AssignmentRecord was written before their target last changed,
	// sorted by member ID: each replaces the Target of its member's
	// AssignmentRecord (or is the member's target if it has none). An
	// epoch bump that moves the targets of many members thus writes one
	// record, not one per member; each member writes its target again
	// in the AssignmentRecord of its move to the new epoch, and drops out
	// of the next GroupRecord's Targets.
	Targets []MemberTarget
}

// MemberTarget is one member's part of a KIP-848 target assignment.
type MemberTarget struct {
	MemberID string
	// Target is sorted.
	Target []TopicPartition
}

// MemberRecord is written when a member joins or changes its subscription
// or timeouts, and with Deleted when it leaves or is removed.
type MemberRecord struct {
	Group            string
	MemberID         string
	InstanceID       string
	ClientID         string
	ClientHost       string
	RackID           string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// Topics is the KIP-848 subscription (sorted); empty for classic.
	Topics []string
	// TopicRegex is the KIP-848 regex subscription, if any.
	TopicRegex string
	// ServerAssignor is the KIP-848 assignor the member asked for, if any.
	ServerAssignor string
	// Protocols are the classic member's protocols with their metadata,
	// in its order of preference.
	Protocols []Protocol
	// Drained is set on a KIP-848 member an admin drained (input Drain):
	// it is assigned nothing; RemoveWhenDrained removes it once it holds
	// nothing.
	Drained           bool
	RemoveWhenDrained bool
	Deleted           bool
}

// Protocol is one classic protocol a member supports.
type Protocol struct {
	Name     string
	Metadata []byte
}

// AssignmentRecord is a member's assignment and the token of each of its
// partitions, written whenever they change (classic: when the leader's
// plan is synced; KIP-848: when the member's epoch or owned set changes).
type AssignmentRecord struct {
	Group    string
	MemberID string
	// MemberEpoch is the member's epoch (KIP-848) or the generation at
	// which this assignment was synced (classic).
	MemberEpoch int32
	// PrevEpoch is the KIP-848 member's epoch before its last advance: a
	// heartbeat at that epoch is still accepted (its answer may have been
	// lost).
	PrevEpoch int32
	// Owned are the partitions the member owns, sorted, with their tokens.
	Owned []OwnedPartition
	// Provisional are the partitions of Owned whose token is not fixed yet
	// (KIP-848: the member has not reported them; consumer_tokens.go),
	// sorted, each with its floor: the epoch at which it was given.
	Provisional []ProvisionalPartition
	// Pending are partitions in the member's target assignment that are
	// still held by a previous owner (KIP-848), sorted.
	Pending []TopicPartition
	// Revoking are partitions the member still holds but must release
	// (KIP-848), sorted.
	Revoking []TopicPartition
	// Target is the member's part of the target assignment at the group
	// epoch (KIP-848), sorted. It is persisted so that a restored group
	// keeps the target its members are reconciling towards: recomputing
	// it could move a partition within one epoch, and so give two owners
	// the same token.
	Target []TopicPartition
	// Raw is the classic assignment bytes as synced.
	Raw []byte
}

// ProvisionalPartition is a partition whose token is provisional, with the
// epoch at which it was given: the lowest token it may be fixed at.
type ProvisionalPartition struct {
	Topic     string
	Partition int32
	Floor     epoch.Token
}

// OffsetRecord is an accepted commit (or, with Deleted, a removed offset).
type OffsetRecord struct {
	Group       string
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	// Token is the fencing token under which the offset was committed: the
	// epoch at which the committing member received the partition, or None
	// for an admin commit to an empty group.
	Token epoch.Token
	// MemberID is who committed ("" for an admin commit).
	MemberID string
	Deleted  bool
}

// TopicRecord is a topic as the coordinator's topic registry created it (or,
// with Deleted, removed it). Topics are not part of any group: the server
// writes them, so that a topic keeps its ID (by which KIP-848 members
// name its partitions) across restarts.
type TopicRecord struct {
	Name       string
	ID         TopicID
	Partitions int32
	Deleted    bool
}

func (*GroupRecord) record()      {}
func (*MemberRecord) record()     {}
func (*AssignmentRecord) record() {}
func (*OffsetRecord) record()     {}
func (*TopicRecord) record()      {}

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OwnedPartition is a partition with the token its owner holds it under.
type OwnedPartition struct {
	Topic     string
	Partition int32
	Token     epoch.Token
}

// EventKind says what happened in an Event.
type EventKind uint8

const (
	_ EventKind = iota
	// EventMemberJoined: a member was added to the group.
	EventMemberJoined
	// EventMemberLeft: a member left on its own (LeaveGroup, or a KIP-848
	// heartbeat with epoch -1 or -2).
	EventMemberLeft
	// EventMemberExpired: the member's session timed out.
	EventMemberExpired
	// EventMemberRemoved: the member was removed for another reason
	// (Reason says which: rebalance timeout, revocation timeout, replaced
	// static member, group deleted).
	EventMemberRemoved
	// EventRebalanceStarted: a classic group entered PreparingRebalance,
	// or a KIP-848 group epoch was bumped (Reason says why).
	EventRebalanceStarted
	// EventRebalanceCompleted: a new generation (classic: synced by the
	// leader) or target assignment (KIP-848) is in place. Moves counts
	// partitions whose owner changed.
	EventRebalanceCompleted
	// EventCommitRejected: a commit was refused because the committer did
	// not own the partition at a current token (Reason says why).
	EventCommitRejected
	// EventNewGeneration: the group's epoch changed and its generation
	// log has a new entry (Reason says why).
	EventNewGeneration
	// EventPartitionHandedOff: a partition moved by a rebalance was
	// granted to its new owner (MemberID) after Duration without one.
	EventPartitionHandedOff
)

var eventKindNames = [...]string{
	EventMemberJoined:       "member-joined",
	EventMemberLeft:         "member-left",
	EventMemberExpired:      "member-expired",
	EventMemberRemoved:      "member-removed",
	EventRebalanceStarted:   "rebalance-started",
	EventRebalanceCompleted: "rebalance-completed",
	EventCommitRejected:     "commit-rejected",
	EventNewGeneration:      "new-generation",
	EventPartitionHandedOff: "partition-handed-off",
}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "event(" + itoa(int(k)) + ")"
}

// Event is a notable change, for logs, metrics and the simulator.
type Event struct {
	Kind     EventKind
	Group    string
	MemberID string
	// Epoch is the group's epoch (generation) after the event.
	Epoch  int32
	Reason string
	// Members is the group's member count after the event.
	Members int
	// Moves counts partitions whose owner changed (RebalanceCompleted).
	Moves int
	// Partition is set for EventCommitRejected and
	// EventPartitionHandedOff.
	Partition TopicPartition
	// Duration is how long the partition of EventPartitionHandedOff went
	// without an owner.
	Duration time.Duration
}
