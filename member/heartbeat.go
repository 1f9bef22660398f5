package member

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Retry backoff after a failed heartbeat: doubling from minBackoff, never
// longer than the heartbeat interval (or maxBackoffUnknown before the
// coordinator told it).
const (
	minBackoff        = 100 * time.Millisecond
	maxBackoffUnknown = time.Second
)

// maybeHeartbeat emits the heartbeat that is due, if none is in flight.
func (m *Machine) maybeHeartbeat(now time.Time) {
	if m.inflight != nil || m.left {
		return
	}
	due := m.hbNow || (m.hbWanted && !now.Before(m.hbAt))
	if m.leaving && m.counts.busy == 0 {
		if m.memberEpoch == 0 && !m.resetLeave {
			// Never joined, or already out of the group: nothing to leave.
			m.finishLeave()
			return
		}
		if !m.leaveFailed || due {
			m.emitLeave(now)
		}
		return
	}
	if m.resetLeave {
		if !m.leaveFailed || due {
			m.emitLeave(now)
		}
		return
	}
	if due {
		m.emit(now)
	}
}

// emit sends a join (epoch 0) or a regular heartbeat. Like Kafka's client,
// a regular heartbeat carries only what changed since the last one that
// was acknowledged: the owned partitions when they changed, everything
// after a failure or a subscription change (a "full" heartbeat, to which
// the coordinator answers with the whole assignment).
func (m *Machine) emit(now time.Time) {
	if len(m.deferred) > 0 && m.counts.revocable == 0 {
		// Every revoked partition is released: this heartbeat is the
		// acknowledgement, and the partitions that waited for it are
		// accepted now.
		m.applyDeferred(now)
		m.recount()
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = m.cfg.Group
	req.MemberID = m.memberID
	req.MemberEpoch = m.memberEpoch
	if m.cfg.InstanceID != "" {
		req.InstanceID = &m.cfg.InstanceID
	}
	joining := m.memberEpoch == 0
	if joining || m.full {
		if joining && m.cfg.RackID != "" {
			req.RackID = &m.cfg.RackID
		}
		req.RebalanceTimeoutMillis = int32(m.cfg.RebalanceTimeout.Milliseconds())
		req.SubscribedTopicNames = append(make([]string, 0, len(m.subscription)), m.subscription...)
		if m.cfg.Assignor != "" {
			req.ServerAssignor = &m.cfg.Assignor
		}
		if joining {
			// A (re)join must report no partitions, as an empty list.
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		} else {
			req.Topics = m.owned()
		}
	} else if m.dirty && !m.leaving {
		req.Topics = m.owned()
	}
	m.setInflight(now, req)
	m.full = false
	if req.Topics != nil {
		m.dirty = false
	}
}

// emitLeave sends the leave heartbeat: epoch -2 for a static member's
// temporary leave, -1 otherwise (and before a rejoin that needs fresh
// tokens).
func (m *Machine) emitLeave(now time.Time) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = m.cfg.Group
	req.MemberID = m.memberID
	req.MemberEpoch = -1
	if m.leaving && m.temporary {
		req.MemberEpoch = -2
	}
	if m.cfg.InstanceID != "" {
		req.InstanceID = &m.cfg.InstanceID
	}
	m.setInflight(now, req)
}

func (m *Machine) setInflight(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest) {
	m.inflight, m.inflightSent, m.inflightIncarn = req, now, m.incarnation
	m.inflightRevocable = m.counts.revocable > 0
	m.hbNow, m.hbWanted = false, false
	m.rd.Heartbeat = req
}

// owned lists the partitions the member reports as its own, by topic ID:
// its Pending, Owned, Revoking and Suspect claims, and the assigned
// partitions it cannot name yet. Sorted by topic ID and partition.
func (m *Machine) owned() []kmsg.ConsumerGroupHeartbeatRequestTopic {
	topics := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	add := func(k key) {
		for i := range topics {
			if topics[i].TopicID == k.id {
				topics[i].Partitions = append(topics[i].Partitions, k.partition)
				return
			}
		}
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID = k.id
		t.Partitions = []int32{k.partition}
		topics = append(topics, t)
	}
	for _, k := range m.ownedKeys() {
		add(k)
	}
	return topics
}

// ownedKeys is owned, flat and sorted by topic ID then partition.
func (m *Machine) ownedKeys() []key {
	keys := make([]key, 0, len(m.order)+len(m.unresolved))
	for _, c := range m.order {
		if c.own.State().Held() {
			keys = append(keys, c.key)
		}
	}
	for _, g := range m.unresolved {
		keys = append(keys, g.key)
	}
	sortKeys(keys)
	return keys
}

func (m *Machine) onResponse(now time.Time, e HeartbeatResponse) {
	if m.inflight == nil || (e.Req != nil && e.Req != m.inflight) {
		return
	}
	req, sent, incarn := m.inflight, m.inflightSent, m.inflightIncarn
	revocable := m.inflightRevocable
	m.inflight = nil
	resp := e.Resp
	if resp == nil {
		m.failed(now, req)
		return
	}
	if req.MemberEpoch < 0 {
		m.onLeaveAnswered()
		return
	}
	if incarn != m.incarnation {
		// The answer to a heartbeat of a membership the member gave up:
		// its assignment and epoch are dead. Rejoin now.
		m.hbNow = true
		return
	}
	if resp.ErrorCode != 0 {
		m.onError(now, req, kerr.ErrorForCode(resp.ErrorCode))
		return
	}
	if resp.MemberEpoch <= 0 || (m.memberEpoch > 0 && resp.MemberEpoch < m.memberEpoch) {
		// Not an answer the member can use: a member epoch that is not
		// positive, or went backwards.
		m.failed(now, req)
		return
	}

	// The coordinator received the heartbeat, so it had not expired the
	// session at some instant after sent, and will not before
	// SessionTimeout after it: the deadline counts from sent.
	if sent.After(m.lastAck) {
		m.lastAck = sent
	}
	within := m.window.Deadline(sent).After(now)
	m.failures = 0
	m.leaveFailed = false
	if iv := time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond; iv > 0 {
		m.interval = iv
	}
	if resp.MemberID != nil && *resp.MemberID != "" {
		m.memberID = *resp.MemberID
	}
	if !revocable {
		// This heartbeat reported every revoked partition released, and
		// the coordinator acknowledged it: its rebalance timer stopped.
		m.revokeAt = time.Time{}
	}
	m.memberEpoch = resp.MemberEpoch
	switch {
	case m.leaving:
		// Every claim is being released anyway; a new assignment is not
		// accepted.
	case resp.Assignment != nil:
		m.reconcile(now, resp.Assignment, epoch.Token(resp.MemberEpoch), within, sent)
	case within:
		// Nothing changed: every claim the member holds is still its own,
		// at the same token.
		m.confirmAll()
	}
	m.schedule(now, sent)
}

// schedule plans the next regular heartbeat one interval after the send
// time of the last one, as epoch.Timing's rules assume.
func (m *Machine) schedule(now, sent time.Time) {
	iv := m.interval
	if iv <= 0 {
		iv = m.cfg.SessionTimeout / 3
	}
	m.hbAt, m.hbWanted = sent.Add(iv), true
	if m.dirty && !m.leaving {
		m.hbNow = true
	}
}

// onError handles a response carrying an error code.
func (m *Machine) onError(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest, err error) {
	switch {
	case errors.Is(err, kerr.UnknownMemberID):
		m.lostMembership(causeUnknownMember)
	case errors.Is(err, kerr.FencedMemberEpoch), errors.Is(err, kerr.StaleMemberEpoch):
		m.lostMembership(causeFenced)
	case isFatal(err):
		m.fail(err)
	default:
		// Coordinator moving or loading, throttling, an overloaded group:
		// try again. The session's fate is decided by the deadline.
		m.failed(now, req)
	}
}

// lostMembership handles the coordinator saying the member is gone or
// fenced: every claim is Lost, and the member rejoins at epoch 0 with the
// same member ID (KIP-848 v1), or is done if it was leaving.
func (m *Machine) lostMembership(cause string) {
	m.loseAll(cause)
	if m.leaving {
		m.finishLeave()
	}
}

// isFatal reports the error codes that retrying cannot fix.
func isFatal(err error) bool {
	for _, fatal := range []error{
		kerr.FencedInstanceID,
		kerr.UnsupportedAssignor,
		kerr.GroupAuthorizationFailed,
		kerr.TopicAuthorizationFailed,
		kerr.InvalidRequest,
		kerr.UnsupportedVersion,
		kerr.GroupIDNotFound,
		kerr.InvalidGroupID,
	} {
		if errors.Is(err, fatal) {
			return true
		}
	}
	return false
}

func (m *Machine) onFailure(now time.Time, e HeartbeatFailed) {
	if m.inflight == nil || (e.Req != nil && e.Req != m.inflight) {
		return
	}
	req := m.inflight
	m.inflight = nil
	m.failed(now, req)
}

// failed schedules the retry of a heartbeat that got no usable answer.
func (m *Machine) failed(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest) {
	m.failures++
	// The coordinator may or may not have seen it: say everything next
	// time, so that it re-sends the whole assignment.
	m.full = true
	m.dirty = true
	m.hbAt, m.hbWanted = now.Add(m.backoff()), true
	if req.MemberEpoch >= 0 {
		return
	}
	m.leaveFailed = true
	if m.resetLeave {
		// The leave before a rejoin is a courtesy; join anyway.
		m.resetLeave, m.leaveFailed = false, false
		m.hbNow = true
		return
	}
	if m.lastAck.IsZero() || m.window.Lapsed(m.lastAck, now) {
		// The leave could not be sent before the deadline: the coordinator
		// will expire the session on its own.
		m.finishLeave()
	}
}

// onLeaveAnswered ends a leave, whatever the answer: success, or an error
// saying the member is already gone.
func (m *Machine) onLeaveAnswered() {
	m.leaveFailed = false
	if m.resetLeave {
		m.resetLeave = false
		m.memberEpoch = 0
		m.hbNow = true
		return
	}
	m.finishLeave()
}

// backoff is the delay before retrying after m.failures failures.
func (m *Machine) backoff() time.Duration {
	limit := m.interval
	if limit <= 0 {
		limit = maxBackoffUnknown
	}
	d := minBackoff
	for i := 1; i < m.failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
