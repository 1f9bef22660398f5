package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Ready is what a Group asks its caller to do after Step or Tick. The
// caller performs it in this order, then calls Advance:
//
//  1. Persist every record durably, in order, BEFORE sending any reply of
//     this Ready. A reply may reveal a generation, an assignment or an
//     accepted commit; if the coordinator crashed after the reply but
//     before the write, a successor could hand out the same token again.
//     If persisting fails, the caller must not send the replies: it drops
//     the group (its state is ahead of the store) and reloads it.
//  2. Send every reply. Some answer requests stepped earlier (a classic
//     JoinGroup is answered when the rebalance completes); Reply.Ref says
//     which.
//  3. Call Tick no later than NextTick (when it is not zero), even if no
//     request arrives.
//
// Events are informational (logs, metrics, simulator statistics) and may be
// handled at any point.
type Ready struct {
	Persist  []Record
	Replies  []Reply
	Events   []Event
	NextTick time.Time
}

// Reply is a response to a request given to Step.
type Reply struct {
	// Ref is Request.Ref of the request this answers.
	Ref any
	// Msg is the response, of the request's kind and version.
	Msg kmsg.Response
}

// Record is a change to a group's durable state. The store persists records
// in order; replaying a group's records rebuilds the state that decides
// tokens (its epoch, members, assignments and offsets). The concrete types
// are GroupRecord, MemberRecord, AssignmentRecord and OffsetRecord.
type Record interface {
	record()
}

// GroupRecord is written when the group's epoch (generation), type or
// protocol changes, and with Deleted when the group is deleted.
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
	Deleted      bool
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
	// Protocols is the classic protocol metadata by protocol name.
	Protocols map[string][]byte
	Deleted   bool
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
	// Owned are the partitions the member owns, sorted, with their tokens.
	Owned []OwnedPartition
	// Pending are partitions in the member's target assignment that are
	// still held by a previous owner (KIP-848), sorted.
	Pending []TopicPartition
	// Revoking are partitions the member still holds but must release
	// (KIP-848), sorted.
	Revoking []TopicPartition
	// Raw is the classic assignment bytes as synced.
	Raw []byte
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

func (*GroupRecord) record()      {}
func (*MemberRecord) record()     {}
func (*AssignmentRecord) record() {}
func (*OffsetRecord) record()     {}

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
)

var eventKindNames = [...]string{
	EventMemberJoined:       "member-joined",
	EventMemberLeft:         "member-left",
	EventMemberExpired:      "member-expired",
	EventMemberRemoved:      "member-removed",
	EventRebalanceStarted:   "rebalance-started",
	EventRebalanceCompleted: "rebalance-completed",
	EventCommitRejected:     "commit-rejected",
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
	// Partition is set for EventCommitRejected.
	Partition TopicPartition
}
