package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fleet is a load generator of raw KIP-848 members, many groups of them,
// in this process: they send ConsumerGroupHeartbeat requests to the nodes
// of an HA set on the interval the coordinator gives them. Each group
// finds its coordinator with FindCoordinator and looks again after
// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a broken connection, as a
// stock client does; a member reports a new assignment at once (it
// revokes and takes partitions instantly) and otherwise sends a bare
// heartbeat.
//
// Members are spread over lanes of perLane members: a lane has one
// pipelined connection to each node (wire) and a scheduler that sends
// each member's heartbeat when it is due, on a timing wheel of tick slots
// (fleetTick unless the config says; the heartbeats of a slot go out in
// one write per connection),
// with at most inFlight requests of the lane unanswered. Joins
// (heartbeats at epoch 0) wait in a queue of their own and take at most
// an eighth of those: a join costs the coordinator a write, and a
// connection's answers leave in order, so a heartbeat sent after a join
// waits for that write; the members that joined must go on heartbeating
// meanwhile, as each consumer's own timer would.
//
// It records what the checks of the shard tests need: per member the
// epochs it was given (one that goes backwards is a violation),
// expulsions (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH), per group the nodes
// that served its heartbeats with the time of the first success at each,
// and per node the heartbeats it served.
type fleet struct {
	cfg     fleetConfig
	nodeOf  map[string]int // node index by address
	groups  []*fleetGroup
	lanes   []*fleetLane
	finders []*kgo.Client // one per node, for FindCoordinator

	ok         []atomic.Int64 // successful heartbeats, by node index
	epochMoves atomic.Int64   // member epoch changes after a member's first
	transport  atomic.Int64   // requests that got no answer
	lookups    atomic.Int64   // coordinator lookups (rounds of FindCoordinator over the nodes)

	mu          sync.Mutex
	codes       map[int16]int64 // heartbeat error codes
	violations  []string        // the first few
	nViolations int
	expelled    int

	load    fleetLoad   // the capacity benchmark's knobs and records (fleet_load_test.go)
	outages outageStats // what the groups' outages cost (fleet_outage_test.go)

	base    time.Time // members' due times count from it
	ctx     context.Context
	cancel  context.CancelFunc
	stopped atomic.Bool
	wg      sync.WaitGroup
}

// fleetConfig shapes a fleet.
type fleetConfig struct {
	addrs      []string // the nodes' addresses; the index is the node's name in the fleet's records
	topic      string
	topicID    [16]byte
	partitions int // the topic's, to tell a settled group
	groups     int
	prefix     string          // group names are <prefix>-<index>
	members    func(g int) int // members of group g
	perLane    int             // members sharing one connection to each node
	inFlight   int             // most requests of a lane unanswered
	timeout    time.Duration   // of each request
	// tick is the slot of the lanes' timing wheels (fleetTick if 0): the
	// heartbeats due in a slot go out together, in one write per
	// connection. A tick far below the members' period spreads their
	// requests in time, each in a write of its own, as clients with
	// timers of their own send them.
	tick time.Duration
}

// tickLen is c's tick.
func (c fleetConfig) tickLen() time.Duration {
	if c.tick > 0 {
		return c.tick
	}
	return fleetTick
}

// joinLimit is the most joins of a lane unanswered.
func (c fleetConfig) joinLimit() int { return max(1, c.inFlight/8) }

// fleetGroup is one group of the fleet.
type fleetGroup struct {
	name    string
	members []*fleetMember

	mu      sync.Mutex
	coord   int            // the node index serving it as far as the fleet knows; -1 if unknown
	looking bool           // a lookup is under way
	waiters []*fleetMember // members waiting for the lookup
	retry   time.Time      // no FindCoordinator before this
	backoff time.Duration
	served  []serving // the nodes that answered its heartbeats, each from its first success
	curOut  outage    // the loss of its coordinator under way, if any (fleet_outage_test.go)
	lastOut outage    // the last that ended
}

// serving is a node that served a group, from the first heartbeat it
// answered with success after another node (or none) did.
type serving struct {
	node int
	at   time.Time
}

// fleetMember is one raw KIP-848 member; its lane's lock guards it.
type fleetMember struct {
	g        *fleetGroup
	lane     *fleetLane
	id       string
	epoch    int32
	maxEpoch int32
	owned    []int32       // sorted
	reported bool          // the coordinator was told owned, subscription and all
	due      time.Duration // since the fleet's base
	lastOK   time.Duration // when its last heartbeat was answered, since the fleet's base
	seq      uint64        // its place in the fleet, which staggers its commits (fleetLoad.commitEvery)
	beats    uint64        // heartbeats sent with commits on
}

// fleetLane is a set of members with one connection to each node.
type fleetLane struct {
	f       *fleet
	wires   []*wire // by node
	members []*fleetMember
	wake    chan struct{}

	mu       sync.Mutex
	wheel    [fleetWheel][]*fleetMember // members that joined, by the tick they are due at
	tick     int64                      // the next tick of the wheel to turn
	spare    []*fleetMember             // a slot's slice, for the next slot emptied
	ready    []*fleetMember             // due, waiting for room in flight, in order
	now      []*fleetMember             // due, needing no room in flight (roomless): sent at once
	joining  []*fleetMember             // waiting to join, in order
	dirty    []bool                     // by node: requests queued, not flushed
	inFlight int
	joins    int                                // of inFlight
	req      kmsg.ConsumerGroupHeartbeatRequest // encoded at once: reused
}

func newFleet(tb testing.TB, cfg fleetConfig) *fleet {
	f := &fleet{cfg: cfg, nodeOf: map[string]int{}, ok: make([]atomic.Int64, len(cfg.addrs)), codes: map[int16]int64{}}
	for i, a := range cfg.addrs {
		f.nodeOf[a] = i
		cl, err := kgo.NewClient(kgo.SeedBrokers(a))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(cl.Close)
		f.finders = append(f.finders, cl)
	}
	var all []*fleetMember
	for gi := range cfg.groups {
		g := &fleetGroup{name: fmt.Sprintf("%s-%05d", cfg.prefix, gi), coord: -1}
		for mi := range cfg.members(gi) {
			// Member IDs are the client's in KIP-848 v1: unique, 22
			// characters or more, as a UUID is.
			m := &fleetMember{g: g, id: fmt.Sprintf("%s-%05d-%03d-0000000000", cfg.prefix, gi, mi), seq: uint64(len(all))}
			g.members = append(g.members, m)
			all = append(all, m)
		}
		f.groups = append(f.groups, g)
	}
	// A group's members are next to each other in all: dealt round the
	// lanes, they use different connections, as consumers on different
	// machines would.
	lanes := (len(all) + cfg.perLane - 1) / cfg.perLane
	for range lanes {
		l := &fleetLane{f: f, wake: make(chan struct{}, 1), dirty: make([]bool, len(cfg.addrs))}
		for _, a := range cfg.addrs {
			l.wires = append(l.wires, newWire(a, cfg.timeout))
		}
		f.lanes = append(f.lanes, l)
	}
	for i, m := range all {
		l := f.lanes[i%lanes]
		m.lane = l
		l.members = append(l.members, m)
		l.joining = append(l.joining, m)
	}
	return f
}

// start sets every member going: each joins (epoch 0) as soon as its
// lane has room for the join, then heartbeats on its interval until stop.
func (f *fleet) start() {
	f.base = time.Now()
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for _, l := range f.lanes {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			l.run(f.ctx)
		}()
	}
}

// stop stops the members, fails what is in flight and waits for the
// lookups to end.
func (f *fleet) stop() {
	if f.cancel == nil || f.stopped.Swap(true) {
		return
	}
	f.cancel()
	for _, l := range f.lanes {
		for _, w := range l.wires {
			w.close()
		}
	}
	f.wg.Wait()
}

// The lanes' timing wheels turn every tick (fleetTick by default), and
// hold fleetWheel ticks: a due time further out goes round more than
// once.
const (
	fleetTick  = 50 * time.Millisecond
	fleetWheel = 1024
)

// run sends the lane's members' heartbeats as they fall due.
func (l *fleetLane) run(ctx context.Context) {
	ticker := time.NewTicker(l.f.cfg.tickLen())
	defer ticker.Stop()
	for {
		l.mu.Lock()
		l.turnLocked(time.Since(l.f.base))
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-l.wake:
		}
	}
}

// turnLocked turns the wheel up to now and sends what is due, as far as
// the room in flight allows (a roomless heartbeat needs none). The lane's
// lock is held.
func (l *fleetLane) turnLocked(now time.Duration) {
	tick := l.f.cfg.tickLen()
	limit := l.f.cfg.inFlight
	for ; l.tick <= int64(now/tick); l.tick++ {
		k := l.tick % fleetWheel
		slot := l.wheel[k]
		l.wheel[k] = l.spare[:0]
		for _, m := range slot {
			if t := int64(m.due / tick); t <= l.tick {
				if l.roomless(m) {
					l.now = append(l.now, m)
				} else {
					l.ready = append(l.ready, m)
				}
			} else {
				l.wheel[t%fleetWheel] = append(l.wheel[t%fleetWheel], m) // a lap or more ahead
			}
		}
		clear(slot)
		l.spare = slot[:0]
	}
	for _, m := range l.now {
		l.send(m, now)
	}
	clear(l.now)
	l.now = l.now[:0]
	l.f.outages.noteReady(len(l.ready))
	sent := 0
	for ; sent < len(l.ready) && l.inFlight < limit; sent++ {
		l.send(l.ready[sent], now)
	}
	l.ready = l.ready[:copy(l.ready, l.ready[sent:])]
	for len(l.joining) > 0 && l.inFlight < limit && l.joins < l.f.cfg.joinLimit() {
		m := l.joining[0]
		l.joining = l.joining[1:]
		l.send(m, now)
	}
	for node, d := range l.dirty {
		if d {
			l.wires[node].flush()
			l.dirty[node] = false
		}
	}
}

// requeueLocked puts m back on the lane's wheel, due at due (at once if
// that has passed), or in the queue of joins if it has no epoch.
func (l *fleetLane) requeueLocked(m *fleetMember, due time.Duration) {
	if m.epoch == 0 {
		l.joining = append(l.joining, m)
		l.kick()
		return
	}
	m.due = due
	if t := int64(due / l.f.cfg.tickLen()); t >= l.tick {
		l.wheel[t%fleetWheel] = append(l.wheel[t%fleetWheel], m)
		return
	}
	if l.f.park(m) {
		return // it goes once its group's lookup ends
	}
	l.ready = append(l.ready, m)
	l.kick()
}

// roomless reports whether m's heartbeat, due now, would take no room in
// flight: its group has no coordinator (m waits for the lookup), or the
// lane has no connection to it (the send fails, or dials, at once: a
// dead node's members learn it so). Such a heartbeat does not queue
// behind those waiting for room: a stock client's does not wait for
// other clients' requests, and after a kill the lanes' queues hold the
// surge of the heartbeats that waited for the new coordinator, which the
// members of the groups that had not noticed the kill yet would
// otherwise wait out twice, before their heartbeat failed and again
// after their lookup.
func (l *fleetLane) roomless(m *fleetMember) bool {
	g := m.g
	g.mu.Lock()
	coord := g.coord
	g.mu.Unlock()
	return coord < 0 || !l.wires[coord].up()
}

func (l *fleetLane) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// send sends m's heartbeat to its group's coordinator, or parks m with its
// group until the coordinator is found. The lane's lock is held.
func (l *fleetLane) send(m *fleetMember, now time.Duration) {
	f := l.f
	node := f.route(m)
	if node < 0 {
		return
	}
	join := m.epoch == 0
	req := &l.req
	*req = kmsg.ConsumerGroupHeartbeatRequest{Version: 1, Group: m.g.name, MemberID: m.id, MemberEpoch: m.epoch, RebalanceTimeoutMillis: -1}
	full := !m.reported
	if full {
		req.RebalanceTimeoutMillis = 60000 // kgo's default
		req.SubscribedTopicNames = []string{f.cfg.topic}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(m.owned) > 0 {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: f.cfg.topicID, Partitions: m.owned})
		}
	}
	err := l.wires[node].send(req, func(resp kmsg.Response, err error) {
		if f.stopped.Load() {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.inFlight == f.cfg.inFlight || join && l.joins == f.cfg.joinLimit() {
			l.kick()
		}
		l.inFlight--
		if join {
			l.joins--
		}
		f.load.hbLatency.record(time.Since(f.base) - now)
		l.takeLocked(m, node, full, now, resp, err)
	})
	if err != nil {
		l.takeLocked(m, node, full, now, nil, err)
		return
	}
	l.dirty[node] = true
	l.inFlight++
	if join {
		l.joins++
	}
	if !join && l.inFlight < f.cfg.inFlight && f.load.commitDue(m) {
		l.commit(m, node, now)
	}
}

// takeLocked takes the answer to m's heartbeat sent to node at sent, and
// puts m back on the wheel, due when it should heartbeat next.
func (l *fleetLane) takeLocked(m *fleetMember, node int, full bool, sent time.Duration, resp kmsg.Response, err error) {
	f := l.f
	at := time.Now()
	now := at.Sub(f.base)
	if err != nil {
		f.transport.Add(1)
		m.reported = false
		m.g.lost(node, at)
		l.requeueLocked(m, now)
		return
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	switch r.ErrorCode {
	case 0:
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
		f.count(r.ErrorCode)
		m.reported = false
		m.g.lost(node, at)
		l.requeueLocked(m, now)
		return
	case kerr.UnknownMemberID.Code, kerr.FencedMemberEpoch.Code:
		f.count(r.ErrorCode)
		f.violation(true, "%s of %s at epoch %d, node %d: expelled: %v; its last heartbeat answered %v before, the request sent %v before",
			m.id, m.g.name, m.epoch, node, kerr.ErrorForCode(r.ErrorCode), (now - m.lastOK).Round(time.Millisecond), (now - sent).Round(time.Millisecond))
		// It joins again, as a stock client does.
		m.epoch, m.owned, m.reported = 0, nil, false
		l.requeueLocked(m, now)
		return
	default:
		f.count(r.ErrorCode)
		f.violation(false, "%s of %s, node %d: unexpected %v", m.id, m.g.name, node, kerr.ErrorForCode(r.ErrorCode))
		m.reported = false
		l.requeueLocked(m, now+time.Second)
		return
	}
	f.ok[node].Add(1)
	m.lastOK = now
	m.g.servedBy(node, at)
	if r.MemberEpoch < m.maxEpoch {
		f.violation(false, "%s of %s: epoch %d after %d, from node %d", m.id, m.g.name, r.MemberEpoch, m.maxEpoch, node)
	}
	if m.epoch != 0 && r.MemberEpoch != m.epoch {
		f.epochMoves.Add(1)
	}
	m.epoch = r.MemberEpoch
	m.maxEpoch = max(m.maxEpoch, r.MemberEpoch)
	if full {
		m.reported = true
	}
	due := sent + max(time.Duration(r.HeartbeatIntervalMillis)*time.Millisecond, 100*time.Millisecond)
	if p := time.Duration(f.load.period.Load()); p > 0 {
		due = sent + p
	}
	if r.Assignment != nil {
		var owned []int32
		for _, t := range r.Assignment.Topics {
			owned = append(owned, t.Partitions...)
		}
		slices.Sort(owned)
		if !slices.Equal(owned, m.owned) {
			// Revoked and taken at once: say so now.
			m.owned, m.reported, due = owned, false, now
		}
	}
	l.requeueLocked(m, due)
}
