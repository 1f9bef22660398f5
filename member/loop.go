package member

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
)

// run is the event loop: the one goroutine that owns the Machine. It feeds
// the machine every input with time.Now() (monotonic) and performs what
// Ready asks, in order; a single timer is armed to Ready.NextTick.
func (s *Session) run() {
	defer close(s.loopDone)
	defer s.loopCancel()
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	defer s.timer.Stop()

	s.m.Start(time.Now())
	finished := false
	for !finished {
		finished = s.apply()
		if finished {
			break
		}
		select {
		case r := <-s.hbDone:
			s.onHeartbeat(time.Now(), r)
		case c := <-s.runDone:
			s.runEnded(time.Now(), c)
		case ids := <-s.idsDone:
			s.resolving = false
			s.m.Step(time.Now(), TopicIDs{IDs: ids})
		case e := <-s.rejects:
			s.log.Warn("commit rejected: claim lost",
				zap.String("topic", e.Topic), zap.Int32("partition", e.Partition),
				zap.Int64("token", int64(e.Token)), zap.Error(e.Err))
			s.m.Step(time.Now(), e)
		case f := <-s.cmds:
			f(time.Now())
		case <-s.timer.C:
			s.m.Tick(time.Now())
		}
	}
}

// apply performs every Ready the machine has; true once the session is
// over.
func (s *Session) apply() bool {
	if s.isDone() {
		return true
	}
	for s.m.HasReady() {
		rd := s.m.Ready()
		now := time.Now()
		if rd.Heartbeat != nil {
			s.send(rd.Heartbeat)
		}
		s.applyChanges(now, rd.Changes)
		if len(rd.Resolve) > 0 {
			s.resolve()
		}
		if rd.Left {
			s.m.Advance(rd)
			if rd.Err != nil {
				s.log.Error("member stopped by the coordinator", zap.Error(rd.Err))
			} else {
				s.log.Info("left the group")
			}
			s.finish(rd.Err, false)
			return true
		}
		s.arm(now, rd.NextTick)
		s.m.Advance(rd)
	}
	s.publish()
	return s.isDone()
}

// arm sets the single timer to next.
func (s *Session) arm(now, next time.Time) {
	s.timer.Stop()
	if !next.IsZero() {
		s.timer.Reset(max(next.Sub(now), 0))
	}
}

// publish makes the machine's state visible to other goroutines: the
// member ID and epoch for commits, the claims, the end of the join and of
// a drain, and warnings about the coordinator's interval.
func (s *Session) publish() {
	id := s.m.MemberID()
	if *s.memberID.Load() != id {
		s.memberID.Store(&id)
	}
	s.memberEpoch.Store(s.m.MemberEpoch())
	if s.m.MemberEpoch() > 0 {
		s.joinOnce.Do(func() {
			s.log.Info("joined", zap.Int32("epoch", s.m.MemberEpoch()), zap.Duration("heartbeat_interval", s.m.HeartbeatInterval()))
			close(s.joined)
		})
	}
	if iv := s.m.HeartbeatInterval(); iv != s.interval {
		s.interval = iv
		if err := s.m.cfg.ValidateInterval(iv); err != nil {
			s.log.Error("the coordinator's heartbeat interval makes this member's timing unsafe: healthy members may go Suspect",
				zap.Duration("heartbeat_interval", iv), zap.Error(err))
		}
	}
	held := 0
	snap := make([]*Claim, 0, len(s.parts))
	for _, c := range s.m.Claims() {
		if c.State.Held() {
			held++
		}
		if w := s.parts[pkey{c.Topic, c.Partition}]; w != nil && w.latest != nil {
			snap = append(snap, w.latest)
		}
	}
	s.mu.Lock()
	s.snapshot = snap
	s.mu.Unlock()
	if s.isDraining && held == 0 && len(s.draining) > 0 {
		for _, ch := range s.draining {
			close(ch)
		}
		s.draining = nil
	}
}

// pkey indexes the loop's partitions by name.
type pkey struct {
	topic     string
	partition int32
}

// applyChanges carries out claim transitions: it cancels the work of
// claims that must stop, and starts work (or reports the release) once
// the changes of this Ready are all known, so that a claim that comes and
// goes within one Ready never starts.
func (s *Session) applyChanges(now time.Time, changes []ClaimChange) {
	var touched []*partWork
	for _, c := range changes {
		k := pkey{c.Topic, c.Partition}
		w := s.parts[k]
		if w == nil {
			w = &partWork{topic: c.Topic, topicID: s.m.ids[c.Topic], partition: c.Partition}
			s.parts[k] = w
		}
		w.token, w.state = c.Token, c.To
		if w.latest != nil && w.latest.token == c.Token {
			w.latest.state.Store(uint32(c.To))
		}
		switch c.To {
		case epoch.Pending:
			w.want = true
		case epoch.Owned:
			if c.From == epoch.Suspect {
				w.want = true
			}
		case epoch.Revoking, epoch.Suspect, epoch.Lost:
			w.want = false
			if w.run != nil && w.run.token == c.Token {
				w.run.cancel(stopCause(c.To, c.Cause))
			}
		case epoch.Unowned:
			w.want = false
		}
		s.logChange(c)
		touched = append(touched, w)
	}
	for i, w := range touched {
		if !containsBefore(touched, i, w) {
			s.settle(now, w)
		}
	}
}

func containsBefore(ws []*partWork, i int, w *partWork) bool {
	for _, x := range ws[:i] {
		if x == w {
			return true
		}
	}
	return false
}

func (s *Session) logChange(c ClaimChange) {
	fields := []zap.Field{
		zap.String("topic", c.Topic), zap.Int32("partition", c.Partition),
		zap.Int64("token", int64(c.Token)), zap.Stringer("from", c.From),
		zap.Stringer("to", c.To), zap.String("cause", c.Cause),
	}
	switch c.To {
	case epoch.Suspect, epoch.Lost:
		s.log.Warn("claim stopped", fields...)
	default:
		s.log.Debug("claim changed", fields...)
	}
}

// settle brings a partition's work in line with the machine: start it if
// it should run and nothing runs, report the release if it should not
// run and nothing runs. While a run is still stopping, nothing happens:
// runEnded settles again.
func (s *Session) settle(now time.Time, w *partWork) {
	if w.run != nil {
		return
	}
	if w.want {
		s.start(now, w)
		return
	}
	switch w.state {
	case epoch.Revoking, epoch.Suspect, epoch.Lost:
		s.m.Step(now, Released{Topic: w.topic, Partition: w.partition, Token: w.token})
	}
}

// start runs the handler on a new Claim in a goroutine of its own.
func (s *Session) start(now time.Time, w *partWork) {
	ctx, cancel := context.WithCancelCause(s.baseCtx)
	c := &Claim{s: s, memberID: s.m.MemberID(), topic: w.topic, topicID: w.topicID, partition: w.partition, token: w.token, ctx: ctx, cancel: cancel}
	c.state.Store(uint32(w.state))
	if st := s.signedFor(key{w.topicID, w.partition}, w.token, c.memberID); st != nil {
		c.signed.Store(st)
	}
	w.run, w.latest, w.want = c, c, false
	s.handlers.Add(1)
	go func() {
		defer s.handlers.Done()
		defer func() {
			select {
			case s.runDone <- c:
			case <-s.loopDone:
			}
		}()
		s.handler(c)
	}()
	if w.state == epoch.Pending {
		s.m.Step(now, Started{Topic: w.topic, Partition: w.partition, Token: w.token})
	}
}

// runEnded handles a handler's return.
func (s *Session) runEnded(now time.Time, c *Claim) {
	w := s.parts[pkey{c.topic, c.partition}]
	if w == nil || w.run != c {
		return
	}
	w.run = nil
	if c.ctx.Err() == nil {
		// The handler returned on its own: the partition stays claimed
		// but idle.
		c.cancel(fmt.Errorf("%w (handler returned)", ErrRevoked))
		s.m.Step(now, Released{Topic: c.topic, Partition: c.partition, Token: c.token})
		return
	}
	s.settle(now, w)
}

// onHeartbeat feeds a heartbeat's outcome to the machine.
func (s *Session) onHeartbeat(now time.Time, r heartbeatResult) {
	if r.err != nil {
		if s.memberEpoch.Load() == 0 && now.Sub(s.joinWarned) >= joinWarnEvery {
			// Not joined yet: nothing else would tell why.
			s.joinWarned = now
			s.log.Warn("joining: the join heartbeat failed; retrying", zap.Error(r.err))
		} else {
			s.log.Debug("heartbeat failed", zap.Error(r.err))
		}
		if s.loopCtx.Err() == nil {
			// kgo keeps the broker's address until its metadata
			// changes (staleAddress): reload it now, not at the next
			// periodic refresh; send found the coordinator stale,
			// and the next heartbeat finds it again.
			s.cl.ForceMetadataRefresh()
		}
		s.m.Step(now, HeartbeatFailed{Err: r.err, Req: r.req})
		return
	}
	if err := kerr.ErrorForCode(r.resp.ErrorCode); err != nil {
		s.log.Info("heartbeat answered with an error", zap.Int32("epoch", r.req.MemberEpoch), zap.Error(err))
		if staleAddress(nil, r.resp.ErrorCode) && s.loopCtx.Err() == nil {
			// The broker kgo dials for the coordinator's ID may be
			// another node under a stale alias (staleAddress).
			s.cl.ForceMetadataRefresh()
		}
	}
	s.onGrants(r.resp)
	s.m.Step(now, HeartbeatResponse{Resp: r.resp, Req: r.req})
}

// send sends a heartbeat in a goroutine, bounded by RequestTimeout, to
// the group's coordinator, which the session looks up itself
// (coordinator.go); kgo reconnects.
func (s *Session) send(req *kmsg.ConsumerGroupHeartbeatRequest) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(s.loopCtx, s.cfg.RequestTimeout)
		defer cancel()
		r := heartbeatResult{req: req}
		r.coord, r.err = s.coordinatorID(ctx)
		if r.err == nil {
			var resp kmsg.Response
			if resp, r.err = s.cl.Broker(int(r.coord)).Request(ctx, req); r.err == nil {
				r.resp = resp.(*kmsg.ConsumerGroupHeartbeatResponse)
			}
		}
		if r.coord >= 0 && staleCoordinator(r.err, r.code()) {
			s.forgetCoordinator(r.coord)
		}
		s.hbDone <- r
	}()
}

// code is the heartbeat's error code, 0 without an answer.
func (r heartbeatResult) code() int16 {
	if r.resp == nil {
		return 0
	}
	return r.resp.ErrorCode
}

// resolve looks up topic IDs the machine cannot name, retrying until it
// succeeds or the session ends.
func (s *Session) resolve() {
	if s.resolving {
		return
	}
	s.resolving = true
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		for backoff := minBackoff; ; backoff = min(2*backoff, 5*time.Second) {
			ctx, cancel := context.WithTimeout(s.loopCtx, s.cfg.RequestTimeout)
			ids, _, err := topicIDs(ctx, s.cl, nil)
			cancel()
			if err == nil {
				s.idsDone <- ids
				return
			}
			s.log.Warn("topic metadata failed", zap.Error(err))
			select {
			case <-time.After(backoff):
			case <-s.loopCtx.Done():
				return
			}
		}
	}()
}

// finish ends the session: every claim still running is cancelled as
// Lost.
func (s *Session) finish(err error, aborted bool) {
	for _, w := range s.parts {
		if w.latest != nil && w.latest.State().Held() {
			w.latest.state.Store(uint32(epoch.Lost))
		}
		if w.run != nil {
			w.run.cancel(stopCause(epoch.Lost, "session ended"))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDoneLocked() {
		return
	}
	switch {
	case err != nil:
		s.err = err
	case aborted:
		s.err = fmt.Errorf("%w: aborted", ErrClosed)
	}
	close(s.done)
}

func (s *Session) isDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isDoneLocked()
}

func (s *Session) isDoneLocked() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// topicIDs reads topic IDs from Metadata: of the named topics (asking
// for their creation, which tenure's virtual topics need), or of all
// topics if names is nil. missing holds, for each named topic the answer
// gives no ID for, why: its error code, or that the answer left it out.
func topicIDs(ctx context.Context, cl *kgo.Client, names []string) (ids map[string][16]byte, missing map[string]error, err error) {
	newReq := func() kmsg.Request {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = names != nil
		for _, n := range names {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, t)
		}
		return req
	}
	// Every broker at once: kgo would wait on a frozen one (coordinator.go).
	r, rq, err := firstAnswer(ctx, cl, newReq, func(kmsg.Response) error { return nil })
	if err != nil {
		return nil, nil, err
	}
	resp, req := r.(*kmsg.MetadataResponse), rq.(*kmsg.MetadataRequest)
	if req.Version < 10 {
		return nil, nil, fmt.Errorf("metadata v%d carries no topic IDs: KIP-848 needs v10+", req.Version)
	}
	ids = make(map[string][16]byte, len(resp.Topics))
	errs := make(map[string]error)
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode == 0 && t.TopicID != ([16]byte{}) {
			ids[*t.Topic] = t.TopicID
		} else if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			errs[*t.Topic] = err
		}
	}
	for _, n := range names {
		if _, ok := ids[n]; ok {
			continue
		}
		if missing == nil {
			missing = make(map[string]error)
		}
		if e, ok := errs[n]; ok {
			missing[n] = e
		} else {
			missing[n] = errors.New("not in the Metadata answer")
		}
	}
	return ids, missing, nil
}
