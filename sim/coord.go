package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/epoch"
)

// groupName is the name of the group every simulated member joins, drawn
// from the seed. The coordinator spreads the sessions it restores at a
// takeover by a hash of the group's name and the member's ID
// (coordinator.Config.TakeoverGrace); the simulator's member IDs are
// fixed (m3-1), while a real group's are random, so the name varies that
// spread from seed to seed, as member IDs do from run to run.
func groupName(seed uint64) string {
	return "sim-" + strconv.FormatUint(newRand(seed, streamGroup).Uint64()>>32, 16)
}

// coordNode is the coordinator: the real coordinator.Group, driven as the
// TCP server drives it. Requests arrive from the network; every Ready is
// performed in the order the Group asks: its records go to the store first
// (a store.Memory, standing in for etcd), then its replies go out on the
// network, then its timer is armed.
//
// The records are also what the simulator learns the coordinator's view of
// ownership from (who owns each partition under which token), exactly as
// a successor coordinator would rebuild it: the node never looks inside
// the Group.
type coordNode struct {
	cfg    coordinator.Config
	topics *coordinator.StaticTopics
	g      *coordinator.Group
	store  store.Store

	// timerAt is when the pending evCoordTimer fires (vnever: none).
	timerAt vtime

	// view is the coordinator's owner of each partition, from the
	// records; last is the owner it had before, for counting moves.
	view []viewOwner
	last []memberRef
	// owned lists each member's partitions as its last AssignmentRecord
	// gave them.
	owned map[string][]int32
	// grants remembers, for every partition and member, the ownerships
	// the coordinator gave it: from the token it was given under to the
	// group epoch at which it ended. A write under a token in such a range
	// comes from a member that owned the partition at that epoch; any
	// other write was never authorised.
	grants map[grantKey][]grantRange
	// members is the set of member IDs in the group, from the records.
	members map[string]bool

	steps, ticks int64
	cpu          time.Duration
	records      int64

	// conns maps each member process connection that the current
	// coordinator has heard from to the member ID of the latest request
	// on it: what the server keeps to know whom a closed connection
	// concerns. A fail-over forgets them (the members' connections were
	// to the old leader).
	conns map[connKey]string
	// latest is the connection of each member's latest request.
	latest map[string]connKey
	// connCloses counts the closes the coordinator heard and acted on.
	connCloses int64
	// viewChanged is when the set's view last changed (zero: never), as
	// the successor saw it: a fail-over changes it at once, since the
	// survivors' probe finds the crashed leader's listener refusing. A
	// close within settle of it starts no grace
	// (coordinator.ViewSettling), as in the server; connSettling counts
	// those closes.
	viewChanged  time.Time
	settle       time.Duration
	connSettling int64

	// down is set from a fail-over until its successor has taken over:
	// requests sent to the coordinator meanwhile are lost. failovers
	// counts the successors built.
	down      bool
	failovers int
}

// viewOwner is who the coordinator says owns a partition.
type viewOwner struct {
	ref   memberRef
	token epoch.Token
	set   bool
}

// connKey names one connection of one member process.
type connKey struct {
	ref  memberRef
	conn uint32
}

type grantKey struct {
	part int32
	ref  memberRef
}

// grantRange is one ownership of a partition by a member: under token
// from, until the group epoch to (the largest token while it lasts).
type grantRange struct {
	from, to epoch.Token
}

// granted reports whether the coordinator ever let ref own partition p at
// an epoch equal to token.
func (c *coordNode) granted(p int32, ref memberRef, token epoch.Token) bool {
	for _, r := range c.grants[grantKey{p, ref}] {
		if r.from <= token && token <= r.to {
			return true
		}
	}
	return false
}

// grantStart opens an ownership of p by ref under token.
func (c *coordNode) grantStart(p int32, ref memberRef, token epoch.Token) {
	k := grantKey{p, ref}
	c.grants[k] = append(c.grants[k], grantRange{from: token, to: math.MaxInt64})
}

// grantEnd closes the open ownership of p by ref at the group epoch.
func (c *coordNode) grantEnd(p int32, ref memberRef, groupEpoch int32) {
	rs := c.grants[grantKey{p, ref}]
	if n := len(rs); n > 0 && rs[n-1].to == math.MaxInt64 {
		rs[n-1].to = max(rs[n-1].from, epoch.Token(groupEpoch))
	}
}

func newCoordNode(w *world) (*coordNode, error) {
	t := w.sc.Timing
	c := &coordNode{
		topics:  coordinator.NewStaticTopics(),
		store:   store.NewMemory(),
		timerAt: vnever,
		view:    make([]viewOwner, w.layout.n),
		last:    make([]memberRef, w.layout.n),
		owned:   make(map[string][]int32),
		grants:  make(map[grantKey][]grantRange),
		members: make(map[string]bool),
		conns:   make(map[connKey]string),
		latest:  make(map[string]connKey),
	}
	for _, tp := range w.sc.Topics {
		c.topics.Add(tp.Name, topicID(tp.Name), tp.Partitions)
	}
	c.cfg = coordinator.DefaultConfig()
	c.cfg.ConsumerSessionTimeout = t.SessionTimeout
	c.cfg.ConsumerHeartbeatInterval = t.HeartbeatInterval
	c.cfg.InitialRebalanceDelay = t.InitialRebalanceDelay
	c.cfg.ConnLossGrace = t.ConnLossGrace
	c.settle = t.ViewSettle
	c.cfg.TakeoverGrace = t.TakeoverGrace
	c.cfg.Topics = c.topics
	if err := c.cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sim: the timing does not make a valid coordinator config: %w", err)
	}
	c.g = coordinator.NewGroup(w.group, &c.cfg, newRand(w.opts.Seed, streamCoordinator))
	return c, nil
}

// topicID derives a topic's UUID from its name, so that runs agree.
func topicID(name string) coordinator.TopicID {
	var id coordinator.TopicID
	h1 := xxhash.Sum64String(name)
	h2 := xxhash.Sum64String("tenure-sim/" + name)
	for i := range 8 {
		id[i] = byte(h1 >> (56 - 8*i))
		id[8+i] = byte(h2 >> (56 - 8*i))
	}
	return id
}

// deliver hands a request to the group.
func (c *coordNode) deliver(w *world, m *message) {
	if !w.net.arrives(w, m) {
		return
	}
	if c.down {
		w.traceNote(noteDropped, 0, int64(evDeliver))
		return
	}
	w.met.heartbeats++
	k := connKey{memberRef{m.from, m.inc}, m.conn}
	if n := w.nodes[m.from]; n.inc == m.inc && n.conn == m.conn {
		n.heardAt = w.clock.now
	}
	c.conns[k] = m.req.MemberID
	c.latest[m.req.MemberID] = k
	if w.tr.text() {
		w.traceLine("coord", "<- %s %s", w.nodes[m.from].name, describeRequest(m.req))
	}
	var start time.Time
	if w.opts.MeasureCPU {
		start = time.Now()
	}
	c.g.Step(w.clock.now.Time(), coordinator.Request{
		Ref:        m,
		Msg:        m.req,
		ClientID:   w.nodes[m.from].name,
		ClientHost: "/sim",
	})
	c.steps++
	if w.opts.MeasureCPU {
		c.cpu += time.Since(start)
	}
	c.ready(w)
	// The group answered the heartbeat within the Step (it parks only
	// classic requests, which the simulator never sends), and the
	// answer is out: nothing refers to m any more.
	w.net.recycle(m)
}

// connClosed tells the group that the connection of process ref closed,
// as the server does when a member's connection ends: for the member ID of
// the latest request on it. A close of a connection the current leader
// never heard from (it was to a predecessor, or carried nothing) tells it
// nothing.
func (c *coordNode) connClosed(w *world, k connKey) {
	if c.down {
		w.traceNote(noteDropped, 0, int64(evConnClosed))
		return
	}
	id, ok := c.conns[k]
	delete(c.conns, k)
	if !ok || c.latest[id] != k {
		// Not a connection of this leader's, or the member's latest
		// request came on another: the server tells the group nothing.
		w.traceNote(noteDropped, 0, int64(evConnClosed))
		return
	}
	delete(c.latest, id)
	if coordinator.ViewSettling(c.viewChanged, w.clock.now.Time(), c.settle) {
		// The server passes it over: the member goes at its session
		// timeout if it is not heard from again.
		c.connSettling++
		w.traceNote(noteSettled, k.ref.node, 0)
		w.traceLine("coord", "connection %d of %s#%d closed (member %s) while the view settles: no grace", k.conn, w.nodes[k.ref.node].name, k.ref.inc, id)
		return
	}
	c.connCloses++
	w.traceLine("coord", "connection %d of %s#%d closed (member %s)", k.conn, w.nodes[k.ref.node].name, k.ref.inc, id)
	var start time.Time
	if w.opts.MeasureCPU {
		start = time.Now()
	}
	c.g.Step(w.clock.now.Time(), coordinator.ConnectionClosed{MemberID: id})
	c.steps++
	if w.opts.MeasureCPU {
		c.cpu += time.Since(start)
	}
	c.ready(w)
}

// timer fires the group's timers.
func (c *coordNode) timer(w *world, e *event) {
	if e.at != c.timerAt {
		w.traceNote(noteDropped, 0, int64(e.kind))
		return // superseded by an earlier timer
	}
	c.timerAt = vnever
	var start time.Time
	if w.opts.MeasureCPU {
		start = time.Now()
	}
	c.g.Step(w.clock.now.Time(), coordinator.Tick{})
	c.ticks++
	if w.opts.MeasureCPU {
		c.cpu += time.Since(start)
	}
	c.ready(w)
}

// ready performs what the group asks, in its order: persist, reply, arm.
// First, after every input that changed the group's durable state, it
// checks the group's invariants: a broken one fails the run at the input
// that broke it. (An input that persists nothing, such as a steady
// heartbeat, changes no member, subscription or target; checking after
// those too made the simulator's tests five times slower.)
func (c *coordNode) ready(w *world) {
	if len(c.g.Ready().Persist) > 0 {
		if err := c.g.CheckInvariants(); err != nil {
			w.fail(fmt.Errorf("sim: after step %d: %w", c.steps+c.ticks, err))
			return
		}
	}
	for c.g.HasReady() {
		rd := c.g.Ready()
		if len(rd.Persist) > 0 {
			// Read the records into the view before the store sees
			// them: the store may keep copies, never the caller's.
			for _, r := range rd.Persist {
				c.apply(w, r)
			}
			if err := c.store.Persist(bg, rd.Persist); err != nil {
				w.fail(fmt.Errorf("sim: persisting the coordinator's records: %w", err))
				return
			}
		}
		for _, ev := range rd.Events {
			w.met.coordEvent(w, ev)
		}
		for _, r := range rd.Replies {
			req, ok := r.Ref.(*message)
			resp, ok2 := r.Msg.(*kmsg.ConsumerGroupHeartbeatResponse)
			if !ok || !ok2 {
				panic(fmt.Sprintf("sim: the group replied %T to %T", r.Msg, r.Ref))
			}
			if w.tr.text() {
				w.traceLine("coord", "-> %s %s", w.nodes[req.from].name, describeResponse(resp))
			}
			m := w.net.newMessage()
			m.from, m.to, m.inc, m.id, m.resp = 0, req.from, req.inc, req.id, resp
			w.net.send(w, m)
		}
		next := rd.NextTick
		c.g.Advance(rd)
		if !next.IsZero() {
			c.arm(w, vtimeOf(next))
		}
	}
}

// arm makes sure the group's timer fires no later than at.
func (c *coordNode) arm(w *world, at vtime) {
	at = max(at, w.clock.now)
	if at >= c.timerAt {
		return
	}
	c.timerAt = at
	w.schedule(event{at: at, kind: evCoordTimer})
}

// apply reads one persisted record into the coordinator's view of
// ownership.
func (c *coordNode) apply(w *world, r coordinator.Record) {
	c.records++
	switch r := r.(type) {
	case *coordinator.MemberRecord:
		w.traceNote(noteRecord, 0, 1)
		if r.Deleted {
			delete(c.members, r.MemberID)
			c.setOwned(w, r.MemberID, nil, nil)
		} else {
			c.members[r.MemberID] = true
		}
	case *coordinator.AssignmentRecord:
		w.traceNote(noteRecord, 0, 2)
		parts := make([]int32, 0, len(r.Owned))
		tokens := make([]epoch.Token, 0, len(r.Owned))
		for _, o := range r.Owned {
			i, ok := w.layout.index(o.Topic, o.Partition)
			if !ok {
				panic(fmt.Sprintf("sim: the coordinator assigned %s[%d], which is not a topic of the scenario", o.Topic, o.Partition))
			}
			parts = append(parts, i)
			tokens = append(tokens, o.Token)
		}
		c.setOwned(w, r.MemberID, parts, tokens)
	case *coordinator.GroupRecord:
		w.traceNote(noteRecord, 0, 3)
		w.met.groupEpoch(r.Epoch)
	case *coordinator.OffsetRecord:
		w.traceNote(noteRecord, 0, 4)
	}
}

// setOwned makes parts (with tokens) the partitions member owns in the
// coordinator's view.
func (c *coordNode) setOwned(w *world, member string, parts []int32, tokens []epoch.Token) {
	ref, known := w.byID[member]
	if !known && len(parts) > 0 {
		panic(fmt.Sprintf("sim: the coordinator assigned partitions to %s, a member ID no simulated process used", member))
	}
	for _, p := range c.owned[member] {
		if !slices.Contains(parts, p) && c.view[p].set && c.view[p].ref == ref {
			c.view[p] = viewOwner{}
			c.grantEnd(p, ref, w.met.epoch)
			w.met.viewChanged(w, p)
		}
	}
	for i, p := range parts {
		v := viewOwner{ref: ref, token: tokens[i], set: true}
		old := c.view[p]
		if old == v {
			continue
		}
		if old.set {
			c.grantEnd(p, old.ref, w.met.epoch)
		}
		id := w.identity(ref)
		if c.last[p] != (memberRef{}) && c.last[p] != id {
			w.met.viewMoves++
		}
		c.last[p] = id
		c.view[p] = v
		c.grantStart(p, ref, tokens[i])
		w.met.viewChanged(w, p)
	}
	if len(parts) == 0 {
		delete(c.owned, member)
	} else {
		c.owned[member] = parts
	}
}

// failover loses the coordinator's leader, as a crash of the leading
// tenure node does: its group, its timers and every request it holds are
// gone, and requests sent until the successor takes over are lost. The
// members see timeouts and retry.
func (c *coordNode) failover(w *world, takeover time.Duration) {
	c.down = true
	c.g = nil
	clear(c.conns)
	clear(c.latest)
	c.viewChanged = w.clock.now.Time()
	c.timerAt = vnever
	w.traceLine("coord", "fail-over: leader lost, successor in %v", takeover)
	w.schedule(event{at: w.clock.now + vtime(takeover), kind: evTakeover})
}

// takeover builds the successor from the store's records, exactly as a
// tenure node that wins the election does (coordinator.Restore): members
// keep their epochs and tokens and their sessions start again, so a
// fail-over expels nobody and moves nothing.
func (c *coordNode) takeover(w *world) error {
	recs, err := c.store.LoadGroup(bg, w.group)
	if err != nil {
		return fmt.Errorf("sim: loading the group for the successor: %w", err)
	}
	c.failovers++
	g, err := coordinator.Restore(w.group, &c.cfg, newRand(w.opts.Seed, streamCoordinator+uint64(c.failovers)<<8), w.clock.now.Time(), recs)
	if err != nil {
		return fmt.Errorf("sim: the successor cannot restore the group: %w", err)
	}
	if g.Epoch() < w.met.epoch {
		return fmt.Errorf("sim: the successor restored epoch %d below the %d already persisted", g.Epoch(), w.met.epoch)
	}
	c.g, c.down = g, false
	w.traceLine("coord", "fail-over: successor took over at epoch %d", g.Epoch())
	c.ready(w)
	return nil
}

// describeRequest renders a heartbeat request for the trace.
func describeRequest(r *kmsg.ConsumerGroupHeartbeatRequest) string {
	s := fmt.Sprintf("heartbeat member=%s epoch=%d", r.MemberID, r.MemberEpoch)
	if r.InstanceID != nil {
		s += " instance=" + *r.InstanceID
	}
	if r.Topics != nil {
		n := 0
		for _, t := range r.Topics {
			n += len(t.Partitions)
		}
		s += fmt.Sprintf(" owned=%d", n)
	}
	return s
}

// describeResponse renders a heartbeat response for the trace.
func describeResponse(r *kmsg.ConsumerGroupHeartbeatResponse) string {
	s := fmt.Sprintf("epoch=%d", r.MemberEpoch)
	if r.ErrorCode != 0 {
		s = fmt.Sprintf("error=%d %s", r.ErrorCode, s)
	}
	if r.Assignment != nil {
		n := 0
		for _, t := range r.Assignment.Topics {
			n += len(t.Partitions)
		}
		s += fmt.Sprintf(" assignment=%d", n)
	}
	return s
}
