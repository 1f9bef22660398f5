package member

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
)

// propModel is what the test knows independently of the machine: the
// heartbeats it was given, the send time of every one the "coordinator"
// acknowledged, the claim states the changes led to, the tokens that died.
type propModel struct {
	window   epoch.Window
	sent     []*kmsg.ConsumerGroupHeartbeatRequest
	sentAt   map[*kmsg.ConsumerGroupHeartbeatRequest]time.Time
	inflight *kmsg.ConsumerGroupHeartbeatRequest
	// maxAck is the latest send time of a heartbeat answered with
	// success: the coordinator had the session alive after it, and no
	// acknowledgement ever proves more.
	maxAck  time.Time
	state   map[int32]epoch.State
	token   map[int32]epoch.Token
	highest map[int32]epoch.Token
	dead    map[int32]map[epoch.Token]bool
	running map[int32]bool // the "shell" runs work on the partition
	// unreported are the new ownerships no heartbeat has reported yet,
	// with their tokens.
	unreported map[int32]epoch.Token
	leaving    bool
	left       bool
}

const propPartitions = 8

var propTopic = testTopicID("work")

// TestMachineProperties feeds random responses, failures, delays,
// releases, starts, commit rejections and leaves to a machine, and checks
// after every step that:
//   - a claim is Pending, Owned or Revoking (work may run) only while now
//     is before the deadline counted from the latest send time of any
//     acknowledged heartbeat; and NextTick is no later than that deadline;
//   - at most one heartbeat is in flight;
//   - the tokens of successive ownerships of a partition strictly
//     increase, and a Lost token never works again;
//   - new partitions become Pending only while none is Revoking;
//   - the very next heartbeat after a new ownership began reports the
//     partition, at a member epoch equal to its token (what tenure's
//     coordinator records as the token), unless the member is leaving or
//     lost it meanwhile;
//   - every change starts from the state the previous changes left, and
//     Claims agrees with the changes.
func TestMachineProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := MachineConfig{
			Group: "g", MemberID: "m1", Topics: []string{"work"},
			SessionTimeout: 3 * time.Second, MaxDrift: 0.01, SuspectMargin: 100 * time.Millisecond,
			RebalanceTimeout: 2 * time.Second, RequestTimeout: 500 * time.Millisecond,
			TopicIDs: map[string][16]byte{"work": propTopic},
		}
		if rapid.Bool().Draw(t, "static") {
			cfg.InstanceID = "i1"
		}
		m := NewMachine(cfg)
		pm := &propModel{
			window:  cfg.window(),
			sentAt:  make(map[*kmsg.ConsumerGroupHeartbeatRequest]time.Time),
			state:   make(map[int32]epoch.State),
			token:   make(map[int32]epoch.Token),
			highest: make(map[int32]epoch.Token),
			dead:    make(map[int32]map[epoch.Token]bool),
			running: make(map[int32]bool),

			unreported: make(map[int32]epoch.Token),
		}
		now := t0
		m.Start(now)
		pm.drain(t, m, now)

		steps := rapid.IntRange(30, 200).Draw(t, "steps")
		for i := 0; i < steps && !pm.left; i++ {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0, 1:
				now = now.Add(time.Duration(rapid.Int64Range(0, 3500).Draw(t, "ms")) * time.Millisecond)
				m.Tick(now)
			case 2, 3, 4:
				if pm.inflight == nil {
					continue
				}
				req := pm.inflight
				resp := pm.randomResponse(t, m)
				pm.inflight = nil
				if resp.ErrorCode == 0 && resp.MemberEpoch > 0 && req.MemberEpoch >= 0 {
					if s := pm.sentAt[req]; s.After(pm.maxAck) {
						pm.maxAck = s
					}
				}
				var tag *kmsg.ConsumerGroupHeartbeatRequest
				if rapid.Bool().Draw(t, "tagged") {
					tag = req
				}
				m.Step(now, HeartbeatResponse{Resp: resp, Req: tag})
			case 5:
				if pm.inflight != nil && rapid.Bool().Draw(t, "fail") {
					pm.inflight = nil
					m.Step(now, HeartbeatFailed{Err: fmt.Errorf("timeout")})
				} else if len(pm.sent) > 1 {
					// A late answer to an old heartbeat (one that failed),
					// delivered with its request: it must be ignored.
					old := pm.sent[rapid.IntRange(0, len(pm.sent)-2).Draw(t, "old")]
					m.Step(now, HeartbeatResponse{Resp: pm.randomResponse(t, m), Req: old})
				}
			case 6:
				p := int32(rapid.IntRange(0, propPartitions-1).Draw(t, "p"))
				switch pm.state[p] {
				case epoch.Revoking, epoch.Suspect, epoch.Lost:
					if pm.running[p] || rapid.Bool().Draw(t, "spurious") {
						pm.running[p] = false
						m.Step(now, Released{Topic: "work", Partition: p, Token: pm.token[p]})
					}
				}
			case 7:
				p := int32(rapid.IntRange(0, propPartitions-1).Draw(t, "p"))
				if pm.state[p] == epoch.Pending {
					m.Step(now, Started{Topic: "work", Partition: p, Token: pm.token[p]})
				}
			case 8:
				p := int32(rapid.IntRange(0, propPartitions-1).Draw(t, "p"))
				tok := pm.token[p] - epoch.Token(rapid.IntRange(0, 1).Draw(t, "older"))
				m.Step(now, CommitRejected{Topic: "work", Partition: p, Token: tok, Err: kerr.StaleMemberEpoch})
			case 9:
				if rapid.IntRange(0, 30).Draw(t, "leave") == 0 {
					pm.leaving = true
					m.Leave(now, rapid.Bool().Draw(t, "temporary"))
				}
			}
			pm.drain(t, m, now)
		}
	})
}

// randomResponse answers the heartbeat in flight like a coordinator that
// may be confused, slow or hostile: errors, odd epochs, duplicate and
// negative partitions, unknown topics.
func (pm *propModel) randomResponse(t *rapid.T, m *Machine) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.HeartbeatIntervalMillis = int32(rapid.SampledFrom([]int{0, 300, 500, 1000}).Draw(t, "interval"))
	if rapid.IntRange(0, 3).Draw(t, "error") == 0 {
		codes := []int16{kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code,
			kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.StaleMemberEpoch.Code,
			kerr.UnreleasedInstanceID.Code}
		if rapid.IntRange(0, 20).Draw(t, "fatal") == 0 {
			codes = append(codes, kerr.FencedInstanceID.Code)
		}
		resp.ErrorCode = rapid.SampledFrom(codes).Draw(t, "code")
	}
	cur := m.MemberEpoch()
	resp.MemberEpoch = cur + int32(rapid.IntRange(-2, 3).Draw(t, "epoch-delta"))
	if cur == 0 {
		resp.MemberEpoch = int32(rapid.IntRange(-1, 20).Draw(t, "join-epoch"))
	}
	if cur == 0 || rapid.Bool().Draw(t, "has-assignment") {
		a := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		var ps []int32
		for p := int32(-1); p < propPartitions; p++ {
			if rapid.IntRange(0, 2).Draw(t, "take") == 0 {
				ps = append(ps, p)
				if rapid.IntRange(0, 5).Draw(t, "dup") == 0 {
					ps = append(ps, p)
				}
			}
		}
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID, at.Partitions = propTopic, ps
		a.Topics = append(a.Topics, at)
		if rapid.IntRange(0, 5).Draw(t, "unknown-topic") == 0 {
			u := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			u.TopicID, u.Partitions = testTopicID("mystery"), []int32{0, 1}
			a.Topics = append(a.Topics, u)
		}
		resp.Assignment = a
	}
	return resp
}

// drain takes the machine's Ready and checks every invariant.
func (pm *propModel) drain(t *rapid.T, m *Machine, now time.Time) {
	if m.HasReady() {
		rd := m.Ready()
		if rd.Heartbeat != nil {
			if pm.inflight != nil {
				t.Fatalf("a second heartbeat while one is in flight")
			}
			pm.inflight = rd.Heartbeat
			pm.sent = append(pm.sent, rd.Heartbeat)
			pm.sentAt[rd.Heartbeat] = now
			if rd.Heartbeat.MemberEpoch == 0 && (rd.Heartbeat.Topics == nil || len(rd.Heartbeat.Topics) > 0) {
				t.Fatalf("a join must report owned partitions as an empty list: %v", rd.Heartbeat.Topics)
			}
		}
		for _, c := range rd.Changes {
			pm.apply(t, c)
			switch c.To {
			case epoch.Pending, epoch.Owned, epoch.Revoking:
				// Not even for an instant: the shell would start work.
				if d := pm.window.Deadline(pm.maxAck); pm.maxAck.IsZero() || !now.Before(d) {
					t.Fatalf("change %+v at %v, past the deadline %v", c, now.Sub(t0), d.Sub(t0))
				}
			}
		}
		if rd.Heartbeat != nil {
			pm.checkReported(t, rd.Heartbeat)
		}
		if rd.Left {
			pm.left = true
		}
		if !rd.NextTick.IsZero() && rd.NextTick.Before(now) {
			t.Fatalf("next tick %v is in the past (now %v)", rd.NextTick.Sub(t0), now.Sub(t0))
		}
		m.Advance(rd)
		pm.checkNextTick(t, rd.NextTick, now)
	}
	deadline := pm.window.Deadline(pm.maxAck)
	for _, c := range m.Claims() {
		if c.State != pm.state[c.Partition] || c.Token != pm.token[c.Partition] {
			t.Fatalf("Claims says %d is %v at %v; the changes said %v at %v",
				c.Partition, c.State, c.Token, pm.state[c.Partition], pm.token[c.Partition])
		}
		switch c.State {
		case epoch.Pending, epoch.Owned, epoch.Revoking:
			if pm.maxAck.IsZero() || !now.Before(deadline) {
				t.Fatalf("partition %d is %v at %v, past the deadline %v counted from the last acknowledged send %v",
					c.Partition, c.State, now.Sub(t0), deadline.Sub(t0), pm.maxAck.Sub(t0))
			}
		}
		if c.State.Working() && pm.dead[c.Partition][c.Token] {
			t.Fatalf("partition %d works with dead token %v", c.Partition, c.Token)
		}
	}
}

// checkReported checks that a heartbeat reports every new ownership the
// previous ones did not, at its token.
func (pm *propModel) checkReported(t *rapid.T, hb *kmsg.ConsumerGroupHeartbeatRequest) {
	for p, tok := range pm.unreported {
		delete(pm.unreported, p)
		if pm.leaving || hb.MemberEpoch <= 0 || !pm.state[p].Held() {
			continue // leaving, rejoining, or lost meanwhile
		}
		reported := false
		for _, tp := range hb.Topics {
			if tp.TopicID == propTopic && slices.Contains(tp.Partitions, p) {
				reported = true
			}
		}
		if !reported || hb.MemberEpoch != int32(tok) {
			t.Fatalf("partition %d, new at token %v: the next heartbeat (epoch %d) reports it: %v",
				p, tok, hb.MemberEpoch, reported)
		}
	}
}

// checkNextTick: while work may run, the machine must wake up no later
// than the true deadline.
func (pm *propModel) checkNextTick(t *rapid.T, next, now time.Time) {
	live := false
	for _, st := range pm.state {
		if st == epoch.Pending || st == epoch.Owned || st == epoch.Revoking {
			live = true
		}
	}
	if !live {
		return
	}
	if deadline := pm.window.Deadline(pm.maxAck); next.IsZero() || next.After(deadline) {
		t.Fatalf("next tick %v is later than the deadline %v (now %v)", next.Sub(t0), deadline.Sub(t0), now.Sub(t0))
	}
}

func (pm *propModel) apply(t *rapid.T, c ClaimChange) {
	p := c.Partition
	if c.Topic != "work" {
		t.Fatalf("a change for topic %q", c.Topic)
	}
	from := pm.state[p]
	if from == 0 {
		from = epoch.Unowned
	}
	if c.From != from {
		t.Fatalf("change %+v starts from %v, the model says %v", c, c.From, from)
	}
	fresh := c.From == epoch.Unowned || c.From == epoch.Lost
	if fresh {
		// A new ownership (straight to Suspect if it came too late).
		if c.Token <= pm.highest[p] {
			t.Fatalf("partition %d: new ownership at token %v after %v", p, c.Token, pm.highest[p])
		}
		for q, st := range pm.state {
			if st == epoch.Revoking {
				t.Fatalf("partition %d became %v while %d is Revoking", p, c.To, q)
			}
		}
		pm.highest[p] = c.Token
		pm.unreported[p] = c.Token
	}
	switch c.To {
	case epoch.Pending:
		pm.running[p] = true
	case epoch.Owned:
		if pm.dead[p][c.Token] {
			t.Fatalf("partition %d: dead token %v Owned again", p, c.Token)
		}
		if c.From == epoch.Suspect {
			pm.running[p] = true
		}
	case epoch.Lost:
		if pm.dead[p] == nil {
			pm.dead[p] = make(map[epoch.Token]bool)
		}
		pm.dead[p][c.Token] = true
	}
	if !fresh && c.Token != pm.token[p] {
		t.Fatalf("change %+v carries token %v, the claim holds %v", c, c.Token, pm.token[p])
	}
	pm.state[p], pm.token[p] = c.To, c.Token
}
