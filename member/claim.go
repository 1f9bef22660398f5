package member

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Claim is one run of work on one partition under one fencing token: the
// library creates it, passes it to the [Handler], and cancels its context
// the instant the work must stop.
//
// A partition owned without interruption is one Claim. If the claim goes
// Suspect and the coordinator then confirms it in time, the handler runs
// again with a new Claim carrying the same token. After a loss the
// partition may come back with a new, higher token, in a new Claim.
//
// A Claim is safe for concurrent use.
type Claim struct {
	s         *Session
	memberID  string
	topic     string
	topicID   [16]byte
	partition int32
	token     epoch.Token
	signed    atomic.Pointer[epoch.SignedToken] // the coordinator's signature of token, once it arrived
	ctx       context.Context
	cancel    context.CancelCauseFunc
	state     atomic.Uint32 // epoch.State
}

// Topic returns the claimed partition's topic.
func (c *Claim) Topic() string { return c.topic }

// Partition returns the claimed partition.
func (c *Claim) Partition() int32 { return c.partition }

// MemberID returns the member ID under which the coordinator granted the
// claim: the session's member ID when the claim was created. A record of
// the work can name its writer by it even after the session's ID changed
// (a coordinator may assign one), so that it matches the owner the
// coordinator recorded for the token.
func (c *Claim) MemberID() string { return c.memberID }

// Token returns the claim's fencing token: the member epoch at which the
// coordinator gave the partition to this member, with the coordinator's
// signature of the grant when it signs them (tenure serve --sign-grants;
// Kafka and kfake do not, and the token is then unsigned). Attach it to
// every write the work makes to a fenced resource: a later owner holds a
// higher token, so a write of this claim that arrives after the hand-off
// is rejected, and a fence with an [epoch.Verifier]
// ([epoch.SignedFence.AdmitSigned]) admits only tokens the coordinator
// signed for its partition, which a bug or a hostile client cannot make.
//
// Call it for each write rather than keeping its value: the signature can
// arrive after the claim starts, and the coordinator signs every held
// partition again under a new key when its key rotates.
func (c *Claim) Token() epoch.SignedToken {
	if st := c.signed.Load(); st != nil {
		return *st
	}
	return epoch.SignedToken{Token: c.token, Member: c.memberID}
}

// TopicID returns the ID of the claimed partition's topic, as the
// coordinator names it: what a fence's [epoch.Verifier] is built with.
func (c *Claim) TopicID() [16]byte { return c.topicID }

// Context is cancelled the instant the claim becomes Revoking, Suspect or
// Lost, with a cause wrapping [ErrRevoked], [ErrSuspect] or [ErrLost]
// (context.Cause tells which). Pass it to everything the work does.
func (c *Claim) Context() context.Context { return c.ctx }

// State returns where the claim stands now: Pending until the handler
// runs, Owned while it may work, then Revoking, Suspect, Lost or (once
// released) Unowned.
func (c *Claim) State() epoch.State { return epoch.State(c.state.Load()) }

// String renders "topic/partition@token".
func (c *Claim) String() string {
	return c.topic + "/" + strconv.Itoa(int(c.partition)) + "@" + c.token.String()
}

// Commit records offset (and metadata) as the partition's committed
// position, in an OffsetCommit v9 that carries the member's ID and
// current epoch, which the coordinator checks: tenure accepts it only from
// the partition's current owner at a token no older than the partition's.
//
// Commit is allowed while the claim is Pending, Owned or Revoking: the
// last commit of a graceful hand-off happens after the context was
// cancelled with [ErrRevoked], under the still valid token. A Suspect,
// Lost or released claim is refused locally, without a request, with an
// error wrapping [ErrSuspect], [ErrLost] or [ErrRevoked].
//
// If the coordinator rejects the commit as stale, the error is a
// [*CommitError] (wrapping [epoch.ErrStale]) and the claim is Lost. Other
// errors (a timeout, the coordinator moving) leave the claim as it is;
// retry if the claim's context is still alive.
func (c *Claim) Commit(ctx context.Context, offset int64, metadata string) error {
	if err := c.usable(); err != nil {
		return err
	}
	return c.s.commit(ctx, c, offset, metadata)
}

// Committed returns the partition's committed offset (-1 if none), read
// with an OffsetFetch v9 that carries the member's ID and epoch. Read it
// when the claim starts, to resume where the previous owner stopped.
func (c *Claim) Committed(ctx context.Context) (int64, error) {
	if err := c.usable(); err != nil {
		return 0, err
	}
	return c.s.committed(ctx, c)
}

// usable refuses a claim whose token may no longer be valid.
func (c *Claim) usable() error {
	switch st := c.State(); st {
	case epoch.Pending, epoch.Owned, epoch.Revoking:
		return nil
	case epoch.Suspect, epoch.Lost:
		if cause := context.Cause(c.ctx); cause != nil && errors.Is(cause, stopCause(st, "")) {
			return cause
		}
		return stopCause(st, "")
	default:
		return fmt.Errorf("%w: %v already released", ErrRevoked, c)
	}
}

// commit sends the fenced OffsetCommit to the coordinator the heartbeats
// go to (toCoordinator), which finds it again if it moved. A
// STALE_MEMBER_EPOCH that races
// an epoch bump (the member epoch changed since the request was built) is
// retried with the new epoch, as Kafka's clients do.
func (s *Session) commit(ctx context.Context, c *Claim, offset int64, metadata string) error {
	for attempt := 0; ; attempt++ {
		memberID, memberEpoch := s.member()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group = s.cfg.Group
		req.MemberID = memberID
		req.Generation = memberEpoch
		if s.cfg.InstanceID != "" {
			req.InstanceID = &s.cfg.InstanceID
		}
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = c.topic, c.topicID
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = c.partition, offset, -1
		rp.Metadata = &metadata
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)

		raw, err := s.toCoordinator(ctx, req, func(r kmsg.Response) int16 {
			return commitCode(r.(*kmsg.OffsetCommitResponse), c)
		})
		if err != nil {
			return fmt.Errorf("member: commit of %v: %w", c, err)
		}
		resp := raw.(*kmsg.OffsetCommitResponse)
		if req.Version < 9 {
			return fmt.Errorf("member: commit of %v: the coordinator speaks OffsetCommit v%d, fenced commits need v9", c, req.Version)
		}
		err = commitAnswer(resp, c)
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.StaleMemberEpoch) && attempt < 3 {
			if _, now := s.member(); now != memberEpoch && now > 0 {
				continue
			}
		}
		var ke *kerr.Error
		if errors.As(err, &ke) && rejectsToken(ke) {
			s.rejected(CommitRejected{Topic: c.topic, Partition: c.partition, Token: c.token, Err: ke})
			return newCommitError(c, ke)
		}
		return fmt.Errorf("member: commit of %v: %w", c, err)
	}
}

// commitCode is the partition's error code in a commit response, 0 if
// the response does not mention it (commitAnswer says so).
func commitCode(resp *kmsg.OffsetCommitResponse, c *Claim) int16 {
	for _, t := range resp.Topics {
		if t.Topic != c.topic && t.TopicID != c.topicID {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == c.partition {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// commitAnswer finds the partition's error in a commit response.
func commitAnswer(resp *kmsg.OffsetCommitResponse, c *Claim) error {
	for _, t := range resp.Topics {
		if t.Topic != c.topic && t.TopicID != c.topicID {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == c.partition {
				return kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return errors.New("the response does not mention the partition")
}

// committed sends the OffsetFetch to the coordinator the heartbeats go to
// (toCoordinator), as commit does: through kgo's coordinator cache a read
// after the coordinator froze went to the frozen node kgo had looked up
// earlier.
func (s *Session) committed(ctx context.Context, c *Claim) (int64, error) {
	memberID, memberEpoch := s.member()
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = s.cfg.Group
	g.MemberID = &memberID
	g.MemberEpoch = memberEpoch
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.TopicID, gt.Partitions = c.topic, c.topicID, []int32{c.partition}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	// Before v8 the request names one group at the top level.
	req.Group = g.Group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = c.topic, []int32{c.partition}
	req.Topics = append(req.Topics, rt)

	raw, err := s.toCoordinator(ctx, req, func(r kmsg.Response) int16 {
		return fetchCode(r.(*kmsg.OffsetFetchResponse), s.cfg.Group, c)
	})
	if err != nil {
		return 0, fmt.Errorf("member: committed offset of %v: %w", c, err)
	}
	resp := raw.(*kmsg.OffsetFetchResponse)
	find := func(code int16, topics func(yield func(name string, id [16]byte, p int32, offset int64, code int16) bool)) (int64, error) {
		if err := kerr.ErrorForCode(code); err != nil {
			return 0, fmt.Errorf("member: committed offset of %v: %w", c, err)
		}
		off, found := int64(0), false
		var perr error
		topics(func(name string, id [16]byte, p int32, offset int64, code int16) bool {
			if (name == c.topic || id == c.topicID) && p == c.partition {
				off, found, perr = offset, true, kerr.ErrorForCode(code)
				return false
			}
			return true
		})
		switch {
		case perr != nil:
			return 0, fmt.Errorf("member: committed offset of %v: %w", c, perr)
		case !found:
			return 0, fmt.Errorf("member: committed offset of %v: the response does not mention the partition", c)
		}
		return off, nil
	}
	for _, rg := range resp.Groups {
		if rg.Group != s.cfg.Group {
			continue
		}
		return find(rg.ErrorCode, func(yield func(string, [16]byte, int32, int64, int16) bool) {
			for _, t := range rg.Topics {
				for _, p := range t.Partitions {
					if !yield(t.Topic, t.TopicID, p.Partition, p.Offset, p.ErrorCode) {
						return
					}
				}
			}
		})
	}
	return find(resp.ErrorCode, func(yield func(string, [16]byte, int32, int64, int16) bool) {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if !yield(t.Topic, [16]byte{}, p.Partition, p.Offset, p.ErrorCode) {
					return
				}
			}
		}
	})
}

// fetchCode is the first error code an OffsetFetch answer gives for the
// claim's partition: the group's (v8+), the top level's (below v8), else
// the partition's (where v0 and v1 put a coordinator's errors); 0 if
// none.
func fetchCode(resp *kmsg.OffsetFetchResponse, group string, c *Claim) int16 {
	for _, rg := range resp.Groups {
		if rg.Group != group {
			continue
		}
		if rg.ErrorCode != 0 {
			return rg.ErrorCode
		}
		for _, t := range rg.Topics {
			for _, p := range t.Partitions {
				if (t.Topic == c.topic || t.TopicID == c.topicID) && p.Partition == c.partition {
					return p.ErrorCode
				}
			}
		}
		return 0
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic == c.topic && p.Partition == c.partition {
				return p.ErrorCode
			}
		}
	}
	return 0
}
