package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Link is how one direction of a connection between a member and the
// coordinator behaves. Every message draws its delay from Delay; the link
// then loses it with probability Loss, or delivers it twice with
// probability Dup (the copy drawing its own delay).
//
// A link is a TCP connection: messages arrive in the order they were sent,
// each no earlier than the one sent before it, unless a message is
// reordered (probability Reorder), in which case it keeps its own delay and
// may overtake earlier ones.
type Link struct {
	Delay   Dist
	Loss    float64
	Dup     float64
	Reorder float64
}

func (l Link) String() string {
	return fmt.Sprintf("delay=%v loss=%g dup=%g reorder=%g", l.Delay, l.Loss, l.Dup, l.Reorder)
}

// message is a request or a response in flight. Messages are immutable
// once sent: the network hands the same pointer to the receiver, and a
// duplicate is a deep copy, so that neither sender nor receiver can change
// what the other sees.
type message struct {
	from, to int32
	// inc is the member process incarnation that sent the request (or
	// that the response answers): a response for an earlier incarnation
	// of a restarted member is dropped.
	inc uint32
	// id numbers the requests of one member incarnation.
	id uint64
	// conn numbers the connections of one member incarnation: a process
	// whose connection was closed under it opens another.
	conn uint32
	sent vtime
	req  *kmsg.ConsumerGroupHeartbeatRequest
	resp *kmsg.ConsumerGroupHeartbeatResponse
	// sum is the hash of the encoded message when it was sent, set only
	// when Options.CheckAliasing is on: delivery checks it is unchanged.
	sum uint64
}

// encode returns the message's wire encoding.
func (m *message) encode() []byte {
	if m.req != nil {
		return m.req.AppendTo(nil)
	}
	return m.resp.AppendTo(nil)
}

// clone returns a deep copy of m, made by encoding and decoding it, as a
// duplicated packet would be: nothing is shared with the original.
func (m *message) clone() *message {
	c := *m
	b := m.encode()
	if m.req != nil {
		c.req = kmsg.NewPtrConsumerGroupHeartbeatRequest()
		c.req.Version = m.req.Version
		if err := c.req.ReadFrom(b); err != nil {
			panic(fmt.Sprintf("sim: cannot decode the request it encoded: %v", err))
		}
	} else {
		c.resp = kmsg.NewPtrConsumerGroupHeartbeatResponse()
		c.resp.Version = m.resp.Version
		if err := c.resp.ReadFrom(b); err != nil {
			panic(fmt.Sprintf("sim: cannot decode the response it encoded: %v", err))
		}
	}
	return &c
}

// link is the state of one direction of one connection.
type link struct {
	cfg *Link
	// last is when the latest in-order message on the link arrives.
	last vtime
}

// cut separates a set of nodes from all the others until it heals.
type cut struct {
	id  int64
	set map[int32]bool
}

// network carries messages between the coordinator (node 0) and members
// (nodes 1..n). It decides, for each message, whether and when it arrives.
type network struct {
	def   Link
	over  map[string]*Link // per member node name
	up    []link           // member -> coordinator, by node
	down  []link           // coordinator -> member, by node
	cuts  []cut
	rng   *rand.Rand
	check bool // Options.CheckAliasing

	sent, lost, dups, cutDrops int64

	// free holds messages whose delivery is over, for the next send to
	// reuse: a heartbeat and its response would otherwise be two of the
	// four allocations a heartbeat costs (the cores make the other two),
	// and the collector's work grows with them.
	free []*message
}

// newMessage returns a zeroed message, reusing a recycled one if it can.
func (nw *network) newMessage() *message {
	if n := len(nw.free); n > 0 {
		m := nw.free[n-1]
		nw.free = nw.free[:n-1]
		return m
	}
	return new(message)
}

// recycle takes back a message that nothing refers to any more: its
// delivery was handled (or dropped) and its receiver kept only the
// request or response it carried, never the message.
func (nw *network) recycle(m *message) {
	*m = message{}
	nw.free = append(nw.free, m)
}

// addNode makes room for node n, named name.
func (nw *network) addNode(n int32, name string) {
	for int32(len(nw.up)) <= n {
		nw.up = append(nw.up, link{cfg: &nw.def})
		nw.down = append(nw.down, link{cfg: &nw.def})
	}
	if l, ok := nw.over[name]; ok {
		nw.up[n].cfg, nw.down[n].cfg = l, l
	}
}

// isCut reports whether an active cut separates a from b.
func (nw *network) isCut(a, b int32) bool {
	for i := range nw.cuts {
		if nw.cuts[i].set[a] != nw.cuts[i].set[b] {
			return true
		}
	}
	return false
}

// send puts m on the wire at now and schedules its delivery, or drops it.
func (nw *network) send(w *world, m *message) {
	nw.sent++
	m.sent = w.clock.now
	if nw.check {
		m.sum = xxhash.Sum64(m.encode())
	}
	if len(nw.cuts) > 0 && nw.isCut(m.from, m.to) {
		nw.cutDrops++
		w.traceNote(noteCutDrop, m.to, int64(m.id))
		return
	}
	l := &nw.up[m.from]
	if m.from == 0 {
		l = &nw.down[m.to]
	}
	cfg := l.cfg
	if cfg.Loss > 0 && nw.rng.Float64() < cfg.Loss {
		nw.lost++
		w.traceNote(noteLoss, m.to, int64(m.id))
		return
	}
	nw.deliverAt(w, l, m)
	if cfg.Dup > 0 && nw.rng.Float64() < cfg.Dup {
		nw.dups++
		nw.deliverAt(w, l, m.clone())
	}
}

func (nw *network) deliverAt(w *world, l *link, m *message) {
	cfg := l.cfg
	at := w.clock.now + vtime(sampleDelay(cfg.Delay, nw.rng))
	if cfg.Reorder == 0 || nw.rng.Float64() >= cfg.Reorder {
		at = max(at, l.last)
		l.last = at
	}
	w.schedule(event{at: at, kind: evDeliver, node: m.to, inc: m.inc, arg: int64(m.id), arg2: int64(m.from), msg: m})
}

func sampleDelay(d Dist, r *rand.Rand) time.Duration {
	if d == nil {
		return 0
	}
	return d.Sample(r)
}

// arrives reports whether m, arriving now, gets through: a cut that began
// while it was in flight drops it too.
func (nw *network) arrives(w *world, m *message) bool {
	if nw.check && xxhash.Sum64(m.encode()) != m.sum {
		panic(fmt.Sprintf("sim: message %d from node %d to %d changed in flight: a core kept and modified a message it had sent",
			m.id, m.from, m.to))
	}
	if len(nw.cuts) > 0 && nw.isCut(m.from, m.to) {
		nw.cutDrops++
		w.traceNote(noteCutDrop, m.to, int64(m.id))
		return false
	}
	return true
}

// addCut separates set from every other node.
func (nw *network) addCut(id int64, set map[int32]bool) {
	nw.cuts = append(nw.cuts, cut{id: id, set: set})
}

// heal ends the cut with the given id.
func (nw *network) heal(id int64) {
	for i := range nw.cuts {
		if nw.cuts[i].id == id {
			nw.cuts = append(nw.cuts[:i], nw.cuts[i+1:]...)
			return
		}
	}
}

// closeConn sends the FIN of the connection of node n's process
// incarnation inc to the coordinator, as the kernel of a process that
// exits (or dies) does. It travels like the process's last message: after
// everything sent before it on the link, with the link's delay (drawn from
// its own stream). TCP retransmits it, so loss does not drop it; a cut
// between the two ends does, at sending or on arrival, and the coordinator
// then never learns: the session timeout remains. (A FIN held back by a
// cut until it heals is not modelled.)
func (nw *network) closeConn(w *world, n int32, inc, conn uint32) {
	if len(nw.cuts) > 0 && nw.isCut(n, 0) {
		nw.cutDrops++
		w.traceNote(noteCutDrop, 0, -int64(n))
		return
	}
	l := &nw.up[n]
	at := max(w.clock.now+vtime(sampleDelay(l.cfg.Delay, w.connRng)), l.last)
	w.schedule(event{at: at, kind: evConnClosed, arg: int64(n), arg2: int64(inc)<<32 | int64(conn)})
}
