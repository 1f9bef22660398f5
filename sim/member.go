package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/member"
)

// memberNode is one member slot (m1, m2, ...): a sequence of processes, one
// per incarnation, each driving its own real member.Machine as the
// member.Join shell does. The node plays the shell: it sends the machine's
// heartbeats, reports their responses or timeouts, starts and stops the
// work on claims as the machine's changes say and reports Started and
// Released, and fires the machine's timers.
type memberNode struct {
	id   int32
	name string
	rng  *rand.Rand
	clk  skewedClock

	// inc counts the processes launched in this slot; events carry the
	// incarnation they belong to and are dropped once it is gone.
	inc     uint32
	alive   bool // a process runs (starting, running or paused)
	started bool // its machine exists
	retired bool // the slot will not run again
	// leaving is set once the process was asked to leave; afterLeave
	// says what happens once it has.
	leaving    bool
	afterLeave leaveThen
	restart    Dist

	m        *member.Machine
	memberID string

	// The heartbeat in flight: its request, number and when the shell
	// gives up on it.
	hb         *kmsg.ConsumerGroupHeartbeatRequest
	hbID       uint64
	hbDeadline vtime
	nextID     uint64
	// connected is set once the process has sent on its connection to
	// the coordinator: its exit closes it. conn numbers the process's
	// connections (a closed one is replaced on the next send).
	connected bool
	conn      uint32
	// heardAt is when the coordinator last received a message on the
	// current connection (for the keepalive model, Timing.KeepAlive).
	heardAt vtime

	// The machine's timer (in simulated time), and the pending evTimer.
	nextTick vtime
	timerAt  vtime
	timerGen int64

	// claims is the node's view of each partition's claim, from the
	// machine's changes; working lists the partitions in Owned, the ones
	// its workers write to.
	claims  []claim
	working []int32

	// reports are Started/Released events due now, stepped after Advance.
	reports []member.Event

	// paused is set during a stop-the-world pause; deferred holds the
	// events that arrived meanwhile, and inflight the writes that were
	// under way when it began.
	paused   bool
	deferred []event
	inflight []write

	// pauses counts the node's pauses; aliveNs sums the time its
	// processes ran, aliveSince is when the current one was launched.
	pauses     int64
	aliveNs    int64
	aliveSince vtime
}

// claim is what the node knows of one partition's claim.
type claim struct {
	state epoch.State
	token epoch.Token
	// stopAt is when the worker of the last stopping change will have
	// stopped: a new worker starts no earlier.
	stopAt vtime
}

// write is a write to the resource, for a partition, under a token.
type write struct {
	part  int32
	token epoch.Token
}

// leaveThen says what a member process does after it has left.
type leaveThen uint8

const (
	_ leaveThen = iota
	// thenRetire: the slot is done (scale-in, replaced in a rolling
	// restart without static membership).
	thenRetire
	// thenRestart: a new process starts in the slot after the restart
	// delay (rolling restart with static membership).
	thenRestart
)

// addMember creates a member slot and returns its node index.
func (w *world) addMember() int32 {
	id := int32(len(w.nodes))
	name := "m" + itoa(int(id))
	n := &memberNode{
		id:       id,
		name:     name,
		rng:      newRand(w.opts.Seed, streamMember+uint64(id)),
		timerAt:  vnever,
		nextTick: vnever,
		claims:   make([]claim, w.layout.n),
	}
	if w.sc.ClockSkew > 0 {
		n.clk.skew = (2*n.rng.Float64() - 1) * w.sc.ClockSkew
	}
	w.nodes = append(w.nodes, n)
	w.net.addNode(id, name)
	return id
}

// localNow is what the node's process reads on its clock now.
func (w *world) localNow(n *memberNode) time.Time {
	return n.clk.toLocal(w.clock.now).Time()
}

// memberEvent handles an event of a member process: dropped if the process
// it was meant for is gone, held back if the process is paused.
func (w *world) memberEvent(e *event) {
	n := w.nodes[e.node]
	if !n.alive || e.inc != n.inc {
		w.traceNote(noteDropped, e.node, int64(e.kind))
		return
	}
	if n.paused {
		w.traceNote(noteDeferred, e.node, int64(e.kind))
		n.deferred = append(n.deferred, *e)
		return
	}
	w.handleMember(n, e)
}

func (w *world) handleMember(n *memberNode, e *event) {
	switch e.kind {
	case evStart:
		w.startMachine(n)
	case evTimer:
		if e.arg != n.timerGen {
			w.traceNote(noteDropped, n.id, int64(e.kind))
			return
		}
		n.timerAt = vnever
		w.memberTimer(n)
	case evDeliver:
		w.memberDeliver(n, e.msg)
	case evWork:
		w.work(n)
	case evClaimStarted, evClaimReleased:
		topic, p := w.layout.locate(int32(e.arg))
		if e.kind == evClaimStarted {
			n.reports = append(n.reports, member.Started{Topic: topic, Partition: p, Token: epoch.Token(e.arg2)})
		} else {
			n.reports = append(n.reports, member.Released{Topic: topic, Partition: p, Token: epoch.Token(e.arg2)})
		}
		w.stepReports(n)
		w.memberReady(n)
	case evLeave:
		w.leave(n, leaveThen(e.arg))
	default:
		panic(fmt.Sprintf("sim: member event %v", e.kind))
	}
}

// startMachine creates the process's machine and has it join.
func (w *world) startMachine(n *memberNode) {
	t := w.sc.Timing
	n.memberID = n.name + "-" + itoa(int(n.inc))
	topics := make([]string, len(w.sc.Topics))
	ids := make(map[string][16]byte, len(w.sc.Topics))
	for i, tp := range w.sc.Topics {
		topics[i] = tp.Name
		ids[tp.Name] = topicID(tp.Name)
	}
	cfg := t.machineConfig(w.group, n.memberID, topics)
	cfg.Assignor = w.sc.Assignor
	cfg.TopicIDs = ids
	if w.sc.Static {
		cfg.InstanceID = n.name
	}
	w.byID[n.memberID] = memberRef{n.id, n.inc}
	n.started = true
	n.m = member.NewMachine(cfg)
	w.traceLine(n.name, "start member=%s", n.memberID)
	n.m.Start(w.localNow(n))
	w.memberReady(n)
	if w.sc.Work.Every > 0 {
		phase := vtime(w.workRng.Int64N(int64(w.sc.Work.Every)))
		w.schedule(event{at: w.clock.now + phase, kind: evWork, node: n.id, inc: n.inc})
	}
}

// memberTimer fires the node's timer: the heartbeat's request timeout,
// then the machine's own timers.
func (w *world) memberTimer(n *memberNode) {
	if n.hb != nil && w.clock.now >= n.hbDeadline {
		req := n.hb
		n.hb = nil
		w.traceLine(n.name, "heartbeat %d timed out", n.hbID)
		n.m.Step(w.localNow(n), member.HeartbeatFailed{Err: errTimedOut, Req: req})
	}
	if w.clock.now >= n.nextTick {
		n.nextTick = vnever
		n.m.Tick(w.localNow(n))
	}
	w.memberReady(n)
}

// memberDeliver hands a heartbeat response to the machine if it answers the
// heartbeat in flight; a late, duplicated or orphaned one is dropped, as
// the client's connection would drop a response nobody waits for.
func (w *world) memberDeliver(n *memberNode, m *message) {
	if !w.net.arrives(w, m) {
		return
	}
	if n.hb == nil || m.id != n.hbID {
		w.traceNote(noteDropped, n.id, int64(m.id))
		return
	}
	req := n.hb
	n.hb = nil
	n.hbDeadline = vnever
	if w.tr.text() {
		w.traceLine(n.name, "<- %s", describeResponse(m.resp))
	}
	n.m.Step(w.localNow(n), member.HeartbeatResponse{Resp: m.resp, Req: req})
	w.net.recycle(m) // the machine keeps the response at most, not m
	w.memberReady(n)
}

// memberReady performs what the machine asks until it asks nothing more.
func (w *world) memberReady(n *memberNode) {
	for n.m != nil && n.m.HasReady() {
		rd := n.m.Ready()
		for _, ch := range rd.Changes {
			w.claimChange(n, ch)
		}
		if rd.Heartbeat != nil {
			w.sendHeartbeat(n, rd.Heartbeat)
		}
		if len(rd.Resolve) > 0 {
			// Every topic ID is given in the config; an unknown one is
			// a bug in the simulator or the machine.
			panic(fmt.Sprintf("sim: %s cannot name topic IDs %x", n.name, rd.Resolve))
		}
		left, lerr := rd.Left, rd.Err
		if !rd.NextTick.IsZero() {
			n.nextTick = n.clk.toSim(vtimeOf(rd.NextTick))
		} else {
			n.nextTick = vnever
		}
		n.m.Advance(rd)
		if left {
			w.exited(n, lerr)
			return
		}
		w.stepReports(n)
	}
	if n.m != nil {
		w.armMember(n)
	}
}

// stepReports feeds the Started and Released reports that are due now.
func (w *world) stepReports(n *memberNode) {
	for len(n.reports) > 0 {
		ev := n.reports[0]
		n.reports = n.reports[1:]
		n.m.Step(w.localNow(n), ev)
	}
	n.reports = n.reports[:0]
}

// armMember makes sure the node's timer fires by the machine's next tick
// and the heartbeat's deadline.
func (w *world) armMember(n *memberNode) {
	at := n.nextTick
	if n.hb != nil {
		at = min(at, n.hbDeadline)
	}
	if at == vnever {
		return
	}
	at = max(at, w.clock.now)
	if at >= n.timerAt {
		return
	}
	n.timerAt = at
	n.timerGen++
	w.schedule(event{at: at, kind: evTimer, node: n.id, inc: n.inc, arg: n.timerGen})
}

// sendHeartbeat puts the machine's heartbeat on the wire.
func (w *world) sendHeartbeat(n *memberNode, req *kmsg.ConsumerGroupHeartbeatRequest) {
	n.nextID++
	n.hb, n.hbID = req, n.nextID
	deadline := w.localNow(n).Add(w.sc.Timing.requestTimeout())
	n.hbDeadline = n.clk.toSim(vtimeOf(deadline))
	w.met.heartbeatsSent++
	if !n.connected {
		n.connected = true
		n.conn++
	}
	if w.tr.text() {
		w.traceLine(n.name, "-> %s", describeRequest(req))
	}
	m := w.net.newMessage()
	m.from, m.to, m.inc, m.id, m.conn, m.req = n.id, 0, n.inc, n.hbID, n.conn, req
	w.net.send(w, m)
}

// claimChange applies one claim transition: the worker starts or stops, and
// the node reports Started or Released when it has.
func (w *world) claimChange(n *memberNode, ch member.ClaimChange) {
	p, ok := w.layout.index(ch.Topic, ch.Partition)
	if !ok {
		panic(fmt.Sprintf("sim: %s got a claim on %s[%d], which is not a topic of the scenario", n.name, ch.Topic, ch.Partition))
	}
	c := &n.claims[p]
	wasWorking := c.state == epoch.Owned
	c.state, c.token = ch.To, ch.Token
	isWorking := ch.To == epoch.Owned
	w.tr.record(128+uint8(noteClaim), w.clock.now, n.id, int64(p), int64(ch.Token)<<8|int64(ch.To))
	if w.tr.text() {
		w.traceLine(n.name, "claim %s %v -> %v token %v (%s)", w.layout.name(p), ch.From, ch.To, ch.Token, ch.Cause)
	}
	if wasWorking != isWorking {
		// Claims change only while the process runs (not paused).
		if isWorking {
			n.working = append(n.working, p)
			w.met.setWorking(w, p, +1, +1)
			if len(w.met.takeovers) > 0 {
				w.met.ownedBy(w, n.id, p)
			}
		} else {
			n.dropWorking(p)
			w.met.setWorking(w, p, -1, -1)
		}
	}
	w.met.claimChange(w, n, p, ch)
	switch ch.To {
	case epoch.Pending:
		at := max(w.clock.now+vtime(sampleDelay(w.sc.Work.Start, n.rng)), c.stopAt)
		w.queueReport(n, evClaimStarted, at, p, ch.Token)
	case epoch.Revoking, epoch.Suspect, epoch.Lost:
		at := w.clock.now
		if wasWorking {
			at += vtime(sampleDelay(w.sc.Work.Stop, n.rng))
		}
		at = max(at, c.stopAt)
		c.stopAt = at
		w.queueReport(n, evClaimReleased, at, p, ch.Token)
	}
}

// queueReport queues a Started or Released report for at: now, or later through
// an event.
func (w *world) queueReport(n *memberNode, kind evKind, at vtime, p int32, token epoch.Token) {
	if at > w.clock.now {
		w.schedule(event{at: at, kind: kind, node: n.id, inc: n.inc, arg: int64(p), arg2: int64(token)})
		return
	}
	topic, part := w.layout.locate(p)
	if kind == evClaimStarted {
		n.reports = append(n.reports, member.Started{Topic: topic, Partition: part, Token: token})
	} else {
		n.reports = append(n.reports, member.Released{Topic: topic, Partition: part, Token: token})
	}
}

func (n *memberNode) dropWorking(p int32) {
	for i, q := range n.working {
		if q == p {
			last := len(n.working) - 1
			n.working[i] = n.working[last]
			n.working = n.working[:last]
			return
		}
	}
}

// work makes the process's periodic writes, one per partition it works on.
func (w *world) work(n *memberNode) {
	for _, p := range n.working {
		if token := n.claims[p].token; w.steady(n, p, token) {
			w.res.writes++
		} else {
			w.write(n, p, token)
		}
	}
	w.scheduleWork(w.clock.now+vtime(w.sc.Work.Every), n.id, n.inc)
}
