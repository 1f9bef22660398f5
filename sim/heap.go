package sim

// evKind says what an event does when it fires. The zero evKind is invalid.
type evKind uint8

const (
	_ evKind = iota
	// evLaunch: a member process is launched (its start-up begins).
	evLaunch
	// evStart: a member process finished starting: its machine joins.
	evStart
	// evTimer: a member's timer (machine NextTick or request timeout).
	evTimer
	// evDeliver: a message arrives at its destination node.
	evDeliver
	// evWork: a member's periodic write to the resource, for every
	// partition it works on.
	evWork
	// evClaimStarted: the work on a Pending claim has started (after the
	// start-up delay of the worker).
	evClaimStarted
	// evClaimReleased: the work on a stopping claim has stopped.
	evClaimReleased
	// evPauseStart and evPauseEnd bracket a stop-the-world pause.
	evPauseStart
	evPauseEnd
	// evNextPause draws the next random pause of a member.
	evNextPause
	// evCrash kills a member process.
	evCrash
	// evNextCrash draws the next random crash of the fleet.
	evNextCrash
	// evCoordTimer: the coordinator's group timer (Ready.NextTick).
	evCoordTimer
	// evAction: a timed scenario action (crash, cut, heal, scale,
	// rolling-restart step, fail-over); arg is its index.
	evAction
	// evRollingStep: the next batch of a rolling restart; arg is the
	// action index.
	evRollingStep
	// evHeal ends a network cut; arg is the cut's id.
	evHeal
	// evLeave asks a member process to leave the group gracefully (as a
	// SIGTERM would); arg says what happens once it has left.
	evLeave
	// evFailover: the coordinator's leader is lost (coordNode.failover);
	// arg is the action index.
	evFailover
	// evTakeover: the successor takes over (coordNode.takeover).
	evTakeover
	// evEnd stops the run.
	evEnd
	// evConnClosed: the coordinator sees a member process's connection
	// close (the FIN its kernel sent when the process died); node is 0,
	// arg the member node, arg2 its incarnation. (After evEnd so that the
	// kinds before it keep their numbers, and runs without connection
	// closes their trace hashes.)
	evConnClosed
	// evConnDrop closes the connection of a random live member process
	// under it (Scenario.ConnDrops) and draws the next drop.
	evConnDrop
	// evConnDead: the coordinator's kernel gives up on a member process's
	// connection after a keepalive timeout of silence from its host (a
	// host crash or a cut; Timing.KeepAlive); arg and arg2 as for
	// evConnClosed.
	evConnDead
	evKinds
)

var evKindNames = [...]string{
	evLaunch:        "launch",
	evStart:         "start",
	evTimer:         "timer",
	evDeliver:       "deliver",
	evWork:          "work",
	evClaimStarted:  "claim-started",
	evClaimReleased: "claim-released",
	evPauseStart:    "pause",
	evPauseEnd:      "resume",
	evNextPause:     "next-pause",
	evCrash:         "crash",
	evNextCrash:     "next-crash",
	evCoordTimer:    "coord-timer",
	evAction:        "action",
	evRollingStep:   "rolling-step",
	evHeal:          "heal",
	evLeave:         "leave",
	evFailover:      "failover",
	evTakeover:      "takeover",
	evEnd:           "end",
	evConnClosed:    "conn-closed",
	evConnDrop:      "conn-drop",
	evConnDead:      "conn-dead",
}

func (k evKind) String() string {
	if k > 0 && k < evKinds {
		return evKindNames[k]
	}
	return "evKind(" + itoa(int(k)) + ")"
}

// event is one entry of the event heap. Events are values: the heap copies
// them, so they hold only small fields and one pointer.
type event struct {
	at  vtime
	seq uint64 // scheduling order: breaks ties between equal times
	// node is the node the event belongs to (0 is the coordinator).
	node int32
	// inc is the node's process incarnation when the event was scheduled;
	// an event of a process that has since crashed is dropped.
	inc  uint32
	kind evKind
	// arg and arg2 are small kind-specific arguments (a partition index
	// and a token, an action index, a timer generation).
	arg  int64
	arg2 int64
	// msg is the message of an evDeliver.
	msg *message
}

// eventHeap is a 4-ary min-heap of events ordered by (at, seq): half as
// deep as a binary heap, which makes pops (the common case) cheaper. It is
// written out rather than built on container/heap to avoid an interface
// call per comparison: the heap is the engine's innermost loop. The heap
// itself moves small pointer-free items (time, sequence, slot); the events
// stay put in a slab, so sifting copies 24 bytes and needs no write
// barriers.
type eventHeap struct {
	items []heapItem
	slab  []event
	free  []int32
}

type heapItem struct {
	at   vtime
	seq  uint64
	slot int32
}

func (a *heapItem) before(b *heapItem) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (h *eventHeap) len() int { return len(h.items) }

// push adds e.
func (h *eventHeap) push(e event) {
	var slot int32
	if n := len(h.free); n > 0 {
		slot = h.free[n-1]
		h.free = h.free[:n-1]
		h.slab[slot] = e
	} else {
		slot = int32(len(h.slab))
		h.slab = append(h.slab, e)
	}
	h.items = append(h.items, heapItem{at: e.at, seq: e.seq, slot: slot})
	items := h.items
	i := len(items) - 1
	it := items[i]
	for i > 0 {
		parent := (i - 1) / 4
		if !it.before(&items[parent]) {
			break
		}
		items[i] = items[parent]
		i = parent
	}
	items[i] = it
}

// pop removes and returns the earliest event; the heap must not be empty.
func (h *eventHeap) pop() event {
	items := h.items
	top := items[0]
	n := len(items) - 1
	last := items[n]
	items = items[:n]
	h.items = items
	if n > 0 {
		i := 0
		for {
			l := 4*i + 1
			if l >= n {
				break
			}
			c := l
			for k := l + 1; k < l+4 && k < n; k++ {
				if items[k].before(&items[c]) {
					c = k
				}
			}
			if !items[c].before(&last) {
				break
			}
			items[i] = items[c]
			i = c
		}
		items[i] = last
	}
	e := h.slab[top.slot]
	h.slab[top.slot] = event{} // drop the message pointer for the collector
	h.free = append(h.free, top.slot)
	return e
}

// eventFIFO holds the members' periodic writes (evWork), which are
// scheduled in time order: a write is always rescheduled Work.Every after
// now, and now never goes back, so they arrive sorted and need no heap.
// They are most of a run's events (16 members writing every 100 ms against
// one heartbeat a second each); keeping them out of the heap makes both
// cheaper. The engine pops whichever of the heap and the FIFO holds the
// earlier (time, sequence) pair, so events fire in exactly the order one
// heap would give. The FIFO is a ring of pointer-free items (an evWork has
// only a node and an incarnation), which the collector need not scan.
type eventFIFO struct {
	ring       []workItem // len is a power of two
	head, size int
}

type workItem struct {
	at   vtime
	seq  uint64
	node int32
	inc  uint32
}

func (q *eventFIFO) len() int { return q.size }

// fits reports whether e can join the FIFO without breaking its order (its
// sequence number is larger than any already in it).
func (q *eventFIFO) fits(e *event) bool {
	return e.kind == evWork && e.msg == nil && e.arg == 0 && e.arg2 == 0 && q.takes(e.at)
}

// takes reports whether an evWork at at can join the FIFO without
// breaking its order.
func (q *eventFIFO) takes(at vtime) bool {
	return q.size == 0 || q.ring[(q.head+q.size-1)&(len(q.ring)-1)].at <= at
}

func (q *eventFIFO) push(e *event) {
	q.pushItem(workItem{at: e.at, seq: e.seq, node: e.node, inc: e.inc})
}

func (q *eventFIFO) pushItem(it workItem) {
	if q.size == len(q.ring) {
		ring := make([]workItem, max(64, 2*len(q.ring)))
		for i := range q.size {
			ring[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.size)&(len(q.ring)-1)] = it
	q.size++
}

// headBefore reports whether the FIFO's earliest item comes before h; the
// FIFO must not be empty.
func (q *eventFIFO) headBefore(h *heapItem) bool {
	it := &q.ring[q.head]
	if it.at != h.at {
		return it.at < h.at
	}
	return it.seq < h.seq
}

// popItem removes and returns the earliest item; the FIFO must not be
// empty.
func (q *eventFIFO) popItem() workItem {
	it := q.ring[q.head]
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.size--
	return it
}

// event returns the evWork the item stands for.
func (it workItem) event() event {
	return event{at: it.at, seq: it.seq, node: it.node, inc: it.inc, kind: evWork}
}

// peek returns the earliest item; the heap must not be empty.
func (h *eventHeap) peek() *heapItem { return &h.items[0] }
