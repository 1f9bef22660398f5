package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
)

func init() {
	testCommands["conn-closed"] = func(e *testEnv, a *testArgs) string {
		label := a.str("member", "")
		l := classicLabelsOf(e)
		id := l.id(label)
		if id == "" {
			id = e.client(label).id
		}
		e.g.Step(e.now, ConnectionClosed{MemberID: id})
		return l.apply(e.drain())
	}
}

// TestConnLossProperty drives a KIP-848 group with clients that join,
// heartbeat (reporting what they hold), pause, have their connection
// closed under them (alive or not), and commit what they believe they own,
// also after they were expelled (zombies); rapid draws the schedule and the
// grace. It checks, against its own record of what each member sent:
//
//   - a member expelled for connection-closed had its connection closed,
//     was not heard from since, and the grace had passed; a member expelled
//     for session-timeout was silent for a whole session: so a client that
//     heartbeats within the grace keeps its place, and nothing is expelled
//     early without a close;
//   - expelling early never lets a stale token commit: no commit of an
//     expelled member is accepted, every accepted commit was made by the
//     partition's owner (or its releasing owner) with a token no lower
//     than the last accepted one, and never under a token the group
//     re-issued to somebody else since.
func TestConnLossProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		topics := NewStaticTopics()
		topics.Add("t", TopicID{15: 1}, 8)
		cfg.Topics = topics
		cfg.ConsumerSessionTimeout = 10 * time.Second
		cfg.ConsumerHeartbeatInterval = time.Second
		cfg.ConnLossGrace = rapid.SampledFrom([]time.Duration{0, 500 * time.Millisecond, time.Second, 3 * time.Second}).Draw(rt, "grace")
		g := NewGroup("g", &cfg, rand.New(rand.NewPCG(1, 2)))
		p := &connLossRun{t: t, rt: rt, cfg: &cfg, g: g, now: testEpoch,
			heard: map[string]time.Time{}, closed: map[string]time.Time{}, expelled: map[string]bool{},
			committed: map[TopicPartition]epoch.Token{}, topicID: TopicID{15: 1}}
		for i := range 4 {
			p.clients = append(p.clients, &connLossClient{label: fmt.Sprintf("c%d", i), held: map[TopicPartition]epoch.Token{}})
		}
		pick := func(rt *rapid.T) *connLossClient {
			return p.clients[rapid.IntRange(0, len(p.clients)-1).Draw(rt, "client")]
		}
		rt.Repeat(map[string]func(*rapid.T){
			"advance": func(rt *rapid.T) {
				p.advance(time.Duration(rapid.IntRange(0, 4000).Draw(rt, "ms")) * time.Millisecond)
			},
			"heartbeat": func(rt *rapid.T) { p.heartbeat(pick(rt)) },
			"close": func(rt *rapid.T) {
				c := pick(rt)
				if c.id == "" {
					return
				}
				if _, ok := p.closed[c.id]; !ok {
					p.closed[c.id] = p.now
				}
				p.g.Step(p.now, ConnectionClosed{MemberID: c.id})
				p.drain()
			},
			"commit": func(rt *rapid.T) { p.commit(pick(rt), rapid.Bool().Draw(rt, "all")) },
		})
	})
}

type connLossClient struct {
	label string
	id    string // "" until it joins; a new ID per incarnation
	inc   int
	epoch int32
	// held is what the client believes it owns, with its tokens; a
	// zombie keeps it after it was expelled.
	held map[TopicPartition]epoch.Token
}

type connLossRun struct {
	t       *testing.T // for checkConsumerInvariants
	rt      *rapid.T
	cfg     *Config
	g       *Group
	now     time.Time
	clients []*connLossClient
	topicID TopicID

	heard     map[string]time.Time // member ID -> its last heartbeat
	closed    map[string]time.Time // member ID -> first close since heard
	expelled  map[string]bool
	committed map[TopicPartition]epoch.Token // the highest accepted token
}

func (p *connLossRun) advance(d time.Duration) {
	end := p.now.Add(d)
	for {
		next := p.g.Ready().NextTick
		if next.IsZero() || next.After(end) {
			break
		}
		if next.After(p.now) {
			p.now = next
		}
		p.g.Step(p.now, Tick{})
		p.drain()
	}
	p.now = end
}

// hear notes a request of id: any clears its close; only a heartbeat
// renews its session.
func (p *connLossRun) hear(id string, beat bool) {
	if beat {
		p.heard[id] = p.now
	}
	delete(p.closed, id)
}

func (p *connLossRun) heartbeat(c *connLossClient) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	if c.id == "" || p.expelled[c.id] {
		// A fresh incarnation: a new member ID, nothing held.
		c.inc++
		c.id = fmt.Sprintf("%s.%d", c.label, c.inc)
		clear(c.held)
		req.MemberEpoch = 0
		req.RebalanceTimeoutMillis = 10000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else {
		req.MemberEpoch = c.epoch
		owned := slices.SortedFunc(maps.Keys(c.held), compareTP)
		t := kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: p.topicID}
		for _, tp := range owned {
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{t}
	}
	req.MemberID = c.id
	p.hear(c.id, true)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	p.g.Step(p.now, Request{Ref: c.label, Msg: req, Resp: resp, ClientID: c.label})
	p.drain()
	if resp.ErrorCode != 0 {
		return // a zombie learns it is fenced; it rejoins on its next beat
	}
	c.epoch = resp.MemberEpoch
	if resp.Assignment == nil {
		return
	}
	next := map[TopicPartition]epoch.Token{}
	for _, t := range resp.Assignment.Topics {
		for _, part := range t.Partitions {
			tp := TopicPartition{"t", part}
			tok, ok := c.held[tp]
			if !ok {
				tok = tokenOf(resp.MemberEpoch) // as tenure's member takes it
			}
			next[tp] = tok
		}
	}
	c.held = next
}

func (p *connLossRun) commit(c *connLossClient, all bool) {
	if c.id == "" || len(c.held) == 0 {
		return
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = "g"
	req.MemberID = c.id
	req.Generation = c.epoch
	t := kmsg.OffsetCommitRequestTopic{Topic: "t"}
	for _, tp := range slices.SortedFunc(maps.Keys(c.held), compareTP) {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition = tp.Partition
		pp.Offset = 1
		t.Partitions = append(t.Partitions, pp)
		if !all {
			break
		}
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{t}
	if !p.expelled[c.id] {
		p.hear(c.id, false)
	}
	p.g.Step(p.now, Request{Ref: c.label, Msg: req, ClientID: c.label})
	p.drain()
}

// drain checks and retires the group's Ready.
func (p *connLossRun) drain() {
	rd := p.g.Ready()
	for _, r := range rd.Persist {
		o, ok := r.(*OffsetRecord)
		if !ok || o.Deleted {
			continue
		}
		tp := TopicPartition{o.Topic, o.Partition}
		if p.expelled[o.MemberID] {
			p.rt.Fatalf("at %s: expelled member %s committed %v under token %v", rel(p.now), o.MemberID, tp, o.Token)
		}
		if o.Token < p.committed[tp] {
			p.rt.Fatalf("at %s: %s committed %v under token %v after token %v was accepted", rel(p.now), o.MemberID, tp, o.Token, p.committed[tp])
		}
		p.committed[tp] = o.Token
	}
	for _, ev := range rd.Events {
		if ev.Kind != EventMemberExpired && ev.Kind != EventMemberRemoved && ev.Kind != EventMemberLeft {
			continue
		}
		id := ev.MemberID
		switch ev.Reason {
		case connLossReason:
			at, closed := p.closed[id]
			switch {
			case p.cfg.ConnLossGrace == 0:
				p.rt.Fatalf("at %s: %s expelled for a closed connection with the grace off", rel(p.now), id)
			case !closed:
				p.rt.Fatalf("at %s: %s expelled for a closed connection, but none closed since it was last heard at %s", rel(p.now), id, rel(p.heard[id]))
			case p.now.Before(at.Add(p.cfg.ConnLossGrace)):
				p.rt.Fatalf("at %s: %s expelled before the end of the grace (closed at %s)", rel(p.now), id, rel(at))
			}
		case "session-timeout":
			if p.now.Before(p.heard[id].Add(p.cfg.ConsumerSessionTimeout)) {
				p.rt.Fatalf("at %s: %s expired, but it was heard at %s", rel(p.now), id, rel(p.heard[id]))
			}
		default:
			p.rt.Fatalf("at %s: %s removed: %s %s", rel(p.now), id, ev.Kind, ev.Reason)
		}
		p.expelled[id] = true
		delete(p.closed, id)
	}
	p.g.Advance(rd)
	checkConsumerInvariants(p.t, p.g)
}
