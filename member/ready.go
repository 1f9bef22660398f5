package member

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Ready is what the shell must do now, taken from [Machine.Ready]. The
// shell performs it in field order, then passes it back to
// [Machine.Advance] (raft's contract, and [coordinator.Ready]'s):
//
//  1. Send Heartbeat, if any. The machine counts the safe-ownership
//     deadline from the instant it emitted the request, so a shell that
//     sends late only shortens its own safe window; it must report the
//     response or the failure (HeartbeatResponse, HeartbeatFailed), or
//     the machine sends no other heartbeat.
//  2. Apply Changes, in order: start work on Pending claims (once the
//     work under an older token of the same partition has stopped), and
//     cancel it on Revoking, Suspect and Lost; report Started and
//     Released in later Steps, as the work starts and stops (the field's
//     doc has each case).
//  3. Look up Resolve, and report [TopicIDs].
//  4. If Left, the member is done: perform the Changes above (every claim
//     is given up), and feed the machine nothing more.
//  5. Call Tick no later than NextTick (when it is not zero), even if
//     nothing else arrives.
//
// Then call Advance(rd). Steps made while performing rd (a Released
// reported at once, say) add to the next Ready, never to rd.
type Ready struct {
	// Seq numbers the Readies of one machine: 1, 2, ... [Machine.Ready]
	// returns the same number until Advance retires it, and Advance
	// refuses (panics on) any other.
	Seq uint64
	// Heartbeat, if not nil, must be sent now. At most one heartbeat is in
	// flight: the next is emitted only after the shell reports the
	// previous one's response or failure. The machine counts the
	// safe-ownership deadline from the instant it emitted the request.
	Heartbeat *kmsg.ConsumerGroupHeartbeatRequest
	// Changes are claim transitions, in order: the shell starts work on
	// Pending claims (then reports Started), cancels work when a claim
	// enters Revoking, Suspect or Lost (the Cause says which), and reports
	// Released when that work has stopped.
	//
	// In detail, by the state a change leads to:
	//   - Pending: start work under Token (once work under an older token
	//     of the same partition has stopped), then report [Started].
	//   - Owned from Suspect ("confirmed"): the coordinator confirmed the
	//     session in time; start work again under the same Token. No
	//     Started is expected.
	//   - Revoking, Suspect, Lost: stop the work; report [Released] when it
	//     has stopped (at once if none runs). Revoking allows a final
	//     commit under the still valid token; Suspect and Lost do not.
	//   - Owned from Pending ("started"), Unowned ("released"): nothing.
	Changes []ClaimChange
	// Resolve lists topic IDs, sorted, that the coordinator assigned and
	// the machine cannot name. Look them up (Metadata) and report a
	// [TopicIDs] event. Their partitions are acknowledged to the
	// coordinator but not worked on until then.
	Resolve [][16]byte
	// Left is true once the leave heartbeat was acknowledged (or could not
	// be sent before the deadline); the member is done.
	Left bool
	// Err, set with Left, is why the member stopped without being asked
	// to: an answer from the coordinator that retrying cannot fix, such
	// as FENCED_INSTANCE_ID or UNSUPPORTED_ASSIGNOR. Every claim is Lost.
	Err error
	// NextTick: call Tick no later than this (zero: no timer).
	NextTick time.Time
}

// ClaimChange is one transition of one claim.
type ClaimChange struct {
	Topic     string
	Partition int32
	// Token is the claim's token: the new one for an assignment, the dead
	// one for a loss, the given-up one for a release.
	Token    epoch.Token
	From, To epoch.State
	// Cause says why: "assigned", "started", "revoked", "released",
	// "deadline", "confirmed", "fenced", "unknown-member",
	// "session-expired", "rebalance-timeout", "commit-rejected",
	// "stale-assignment", "leaving", "left", "fatal".
	Cause string
}

// ClaimState is where one claim stands, for introspection.
type ClaimState struct {
	Topic     string
	Partition int32
	// Token is the live token, or the dead one of a Lost claim.
	Token epoch.Token
	State epoch.State
}

// The causes of claim changes.
const (
	causeAssigned         = "assigned"
	causeStarted          = "started"
	causeRevoked          = "revoked"
	causeReleased         = "released"
	causeDeadline         = "deadline"
	causeConfirmed        = "confirmed"
	causeFenced           = "fenced"
	causeUnknownMember    = "unknown-member"
	causeSessionExpired   = "session-expired"
	causeRebalanceTimeout = "rebalance-timeout"
	causeCommitRejected   = "commit-rejected"
	causeStaleAssignment  = "stale-assignment"
	causeLeaving          = "leaving"
	causeLeft             = "left"
	causeFatal            = "fatal"
)
