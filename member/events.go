package member

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Event is something that happened to a member, fed to [Machine.Step]. It
// is a sealed interface: the events are the types of this package that
// implement it.
type Event interface{ event() }

// HeartbeatResponse is the coordinator's answer to the heartbeat in flight.
type HeartbeatResponse struct {
	Resp *kmsg.ConsumerGroupHeartbeatResponse
	// Req, if not nil, is the request this answers (the pointer the
	// machine emitted in [Ready.Heartbeat]). A response to any request
	// other than the one in flight is stale and ignored: it must not
	// count as an acknowledgement of a later heartbeat. Nil means the
	// heartbeat in flight.
	Req *kmsg.ConsumerGroupHeartbeatRequest
}

// HeartbeatFailed reports that the heartbeat in flight got no response: a
// transport error or its RequestTimeout passed.
type HeartbeatFailed struct {
	Err error
	// Req, if not nil, is the request that failed; a failure of any other
	// request than the one in flight is ignored. Nil means the heartbeat
	// in flight.
	Req *kmsg.ConsumerGroupHeartbeatRequest
}

// Released reports that the work on a claim stopped, after the machine
// moved it to Revoking, Suspect or Lost (or because the work ended on its
// own). A Revoking claim is then released for good.
type Released struct {
	Topic     string
	Partition int32
	Token     epoch.Token
}

// Started reports that the work on a Pending claim started: Pending ->
// Owned.
type Started struct {
	Topic     string
	Partition int32
	Token     epoch.Token
}

// CommitRejected reports that the coordinator rejected a commit of the
// claim as stale (STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH,
// UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, ...): the claim goes Lost.
type CommitRejected struct {
	Topic     string
	Partition int32
	Token     epoch.Token
	Err       error
}

// TopicIDs tells the machine the IDs of topics (from Metadata), so that it
// can name the partitions the coordinator assigns by topic ID. Answer
// [Ready.Resolve] with it.
type TopicIDs struct {
	IDs map[string][16]byte
}

func (HeartbeatResponse) event() {}
func (HeartbeatFailed) event()   {}
func (Released) event()          {}
func (Started) event()           {}
func (CommitRejected) event()    {}
func (TopicIDs) event()          {}
