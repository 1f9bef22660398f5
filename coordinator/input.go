package coordinator

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Input is one thing that happens to a group: a request from a member, the
// clock passing, a topic change, an admin operation. Group.Step takes every
// input; nothing else changes a Group (raft's RawNode, where every input is
// a message to Step). The concrete types are Request, Tick, TopicsChanged,
// TopicsDeleted, ConnectionClosed, Drain, Undrain, DeleteGroup, Resume and
// ReissueGrants.
type Input interface{ input() }

// Tick fires the timers that are due: session expiry, expiry after a
// closed connection (ConnectionClosed), rebalance and revocation timeouts,
// the initial rebalance delay. Ready.NextTick says when the next is due.
type Tick struct{}

// TopicsChanged tells the group that topics were created, so a KIP-848
// group recomputes its target assignment for subscriptions that now match.
type TopicsChanged struct{}

// TopicsDeleted tells the group that the named topics were deleted
// (topics_delete.go).
type TopicsDeleted struct{ Names []string }

// ConnectionClosed tells the group that the connection that carried the
// latest request of member MemberID closed (connloss.go).
type ConnectionClosed struct{ MemberID string }

// Drain drains KIP-848 member MemberID (consumer_drain.go); with Remove the
// member is removed once it holds nothing. Its answer is a Reply with Ref
// and Err: nil, ErrUnknownMember, ErrNotDrainable or ErrGroupIsDeleted.
type Drain struct {
	Ref      any
	MemberID string
	Remove   bool
}

// Undrain lets a drained member be assigned partitions again. Its answer
// is a Reply with Ref and Err, as Drain's.
type Undrain struct {
	Ref      any
	MemberID string
}

// DeleteGroup deletes the group, as DeleteGroups asks (offsets_delete.go).
// Its answer is a Reply with Ref and Err: nil, kerr.NonEmptyGroup or
// kerr.GroupIDNotFound.
type DeleteGroup struct{ Ref any }

// Resume starts the clocks of a group that Rebuild returned (restore.go).
type Resume struct{}

// ReissueGrants makes every member's next successful reply grant all it
// holds again (grants.go).
type ReissueGrants struct{}

func (Request) input()          {}
func (Tick) input()             {}
func (TopicsChanged) input()    {}
func (TopicsDeleted) input()    {}
func (ConnectionClosed) input() {}
func (Drain) input()            {}
func (Undrain) input()          {}
func (DeleteGroup) input()      {}
func (Resume) input()           {}
func (ReissueGrants) input()    {}

// Step applies one input at time now, and is the one way into the group's
// state: it sets the clock the callbacks read (ownership changes), hands
// the input to its handler, and persists the targets the input moved, so
// that the Ready after any input holds them. A request's reply is appended
// to Ready, now or (for requests the protocol parks, such as a classic
// JoinGroup) when a later input completes it; an admin input (Drain,
// Undrain, DeleteGroup) is answered in Ready at once. A request of a kind
// that is not a group's is a programming error of the caller, and panics.
func (g *Group) Step(now time.Time, in Input) {
	g.now = now
	switch in := in.(type) {
	case Request:
		g.step(now, in)
	case Tick:
		g.tick(now)
	case TopicsChanged:
		if g.typ == Consumer {
			g.consumerTopicsChanged(now)
		}
	case TopicsDeleted:
		g.topicsDeleted(now, in.Names)
	case ConnectionClosed:
		g.connectionClosed(now, in.MemberID)
	case Drain:
		g.answer(in.Ref, g.drain(in.MemberID, in.Remove))
	case Undrain:
		g.answer(in.Ref, g.undrain(in.MemberID))
	case DeleteGroup:
		g.answer(in.Ref, g.deleteGroup())
	case Resume:
		g.resumeClocks(now)
	case ReissueGrants:
		g.reissueGrants()
	default:
		// No %T: formatting the input would make every input escape,
		// and a heartbeat's Request cost an allocation.
		panic("coordinator: Step given an Input that is none of this package's")
	}
	g.persistTargets()
	g.debugCheck()
}

func (g *Group) step(now time.Time, req Request) {
	g.connHeard(req.Msg)
	switch m := req.Msg.(type) {
	case *kmsg.JoinGroupRequest:
		g.classicJoin(now, req, m)
	case *kmsg.SyncGroupRequest:
		g.classicSync(now, req, m)
	case *kmsg.HeartbeatRequest:
		g.classicHeartbeat(now, req, m)
	case *kmsg.LeaveGroupRequest:
		g.classicLeave(now, req, m)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		g.consumerHeartbeat(now, req, m)
	case *kmsg.OffsetCommitRequest:
		g.commitOffsets(now, req, m)
	case *kmsg.OffsetDeleteRequest:
		g.deleteOffsets(now, req, m)
	default:
		panic(fmt.Sprintf("coordinator: Step given %T, which is not a group request", req.Msg))
	}
}

func (g *Group) tick(now time.Time) {
	switch g.typ {
	case Classic:
		g.classicTick(now)
	case Consumer:
		g.consumerTick(now)
	}
}

// answer queues the answer to an admin input.
func (g *Group) answer(ref any, err error) {
	g.ready.Replies = append(g.ready.Replies, Reply{Ref: ref, Err: err})
}
