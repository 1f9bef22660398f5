package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
)

// Options are the simulation-only settings of one run, kept apart from the
// settings under test (the [Scenario]), as asim keeps its seed and tick
// apart from the cluster's settings.
type Options struct {
	// Seed selects the run: the same scenario and seed give the same run,
	// event for event, on any machine and at any GOMAXPROCS.
	Seed uint64
	// Trace, if not nil, receives a readable line for every notable event
	// (messages, claim changes, coordinator events, process changes).
	// Tracing changes nothing but speed: the trace hash is the same.
	Trace io.Writer
	// TimelinePartition selects the partition whose ownership history the
	// report lists, counting the partitions of all topics in order (the
	// first topic's partition 3 is 3); -1 lists none.
	TimelinePartition int
	// CheckAliasing makes the network hash every message when it is sent
	// and check the hash on arrival, so that a core which modifies a
	// message after handing it over is caught. It costs an encoding per
	// message; tests turn it on.
	CheckAliasing bool
	// MeasureCPU times every call into the coordinator core with the
	// process's clock and reports the total. Measuring reads the wall
	// clock outside the simulated world; it does not change the run.
	MeasureCPU bool
	// Logger receives debug messages about the run; nil is zap.NewNop().
	Logger *zap.Logger
}

// Run simulates one run of sc with opts and returns its report. It returns
// an error for an invalid scenario and, with the seed that reproduces it,
// for a broken invariant in the simulator or a core.
func Run(sc *Scenario, opts Options) (rep *Report, err error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			rep = nil
			err = fmt.Errorf("sim: scenario %s seed %d: panic: %v\n%s", sc.Name, opts.Seed, r, debug.Stack())
		}
	}()
	w, err := newWorld(sc, opts)
	if err != nil {
		return nil, err
	}
	w.run()
	w.log.Debug("simulated", zap.String("scenario", sc.Name), zap.Uint64("seed", opts.Seed),
		zap.Duration("virtual", w.clock.now.Duration()), zap.Int64("events", w.events), zap.Error(w.err))
	if err := w.tr.flush(); err != nil && w.err == nil {
		w.err = fmt.Errorf("sim: writing the trace: %w", err)
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.report(), nil
}

// RNG streams: each concern draws from its own stream of the seed, so that
// a change in how often one concern draws (say, a new network delay) does
// not shift the draws of the others.
const (
	streamNetwork uint64 = iota + 1
	streamCoordinator
	streamCrashes
	streamWork
	streamConn               // connection closes: their own stream, so that modelling them shifts no other draw
	streamElection           // fail-overs' election delays (failover ttl=)
	streamGroup              // the group's name
	streamMember   = 1 << 32 // + node: the member's own stream
)

func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream*0x9e3779b97f4a7c15+1))
}

// bg is the context handed to fences and the store; nothing in the
// simulated world blocks or is cancelled.
var bg = context.Background()

// world is one run in progress: the clock, the event heap and every node.
// It is single-threaded: nothing in it starts a goroutine or reads a clock.
type world struct {
	sc   *Scenario
	opts Options
	log  *zap.Logger

	clock clock
	heap  eventHeap
	fifo  eventFIFO // periodic writes, in time order (see eventFIFO)
	seq   uint64
	tr    *tracer

	layout layout
	net    network
	coord  *coordNode
	// nodes are the member nodes by node index; nodes[0] is nil (node 0
	// is the coordinator).
	nodes []*memberNode
	// byID maps member IDs, as the coordinator knows them, to the process
	// that used them.
	byID map[string]memberRef

	res resource
	met metrics

	crashRng *rand.Rand
	workRng  *rand.Rand
	connRng  *rand.Rand
	electRng *rand.Rand
	// group is the group every simulated member joins.
	group string

	events int64
	err    error
	cutID  int64
	// fleets are the members each rolling restart goes through, fixed
	// when it begins.
	fleets map[int][]int32
}

// memberRef names one incarnation of one member node.
type memberRef struct {
	node int32
	inc  uint32
}

func newWorld(sc *Scenario, opts Options) (*world, error) {
	w := &world{
		sc:       sc,
		opts:     opts,
		log:      opts.Logger,
		tr:       newTracer(opts.Trace),
		byID:     make(map[string]memberRef),
		crashRng: newRand(opts.Seed, streamCrashes),
		workRng:  newRand(opts.Seed, streamWork),
		connRng:  newRand(opts.Seed, streamConn),
		electRng: newRand(opts.Seed, streamElection),
		group:    groupName(opts.Seed),
	}
	if w.log == nil {
		w.log = zap.NewNop()
	}
	w.layout.init(sc.Topics)
	w.net = network{
		def:   sc.Network,
		over:  make(map[string]*Link),
		rng:   newRand(opts.Seed, streamNetwork),
		check: opts.CheckAliasing,
	}
	for name, l := range sc.Links {
		l := l
		w.net.over[name] = &l
	}
	w.net.addNode(0, "coord")
	var err error
	w.coord, err = newCoordNode(w)
	if err != nil {
		return nil, err
	}
	n := w.layout.n
	w.res.init(n)
	w.met.init(w, n, opts.TimelinePartition)
	w.nodes = []*memberNode{nil}

	for range sc.Members {
		w.schedule(event{at: 0, kind: evLaunch, node: w.addMember()})
	}
	for i := range sc.Pauses {
		for _, m := range w.nodes[1:] {
			if w.pausesApply(i, m.name) {
				w.schedulePause(m, i)
			}
		}
	}
	for i := range sc.Crashes {
		w.schedule(event{at: vtime(sc.Crashes[i].Every.Sample(w.crashRng)), kind: evNextCrash, arg: int64(i)})
	}
	for i, a := range sc.Actions {
		w.schedule(event{at: vtime(a.At), kind: evAction, arg: int64(i)})
	}
	if sc.ConnDrops != nil {
		w.schedule(event{at: vtime(sc.ConnDrops.Sample(w.connRng)), kind: evConnDrop})
	}
	w.schedule(event{at: vtime(sc.Duration), kind: evEnd})
	return w, nil
}

// schedule adds e to the heap, stamping it with the next sequence number.
func (w *world) schedule(e event) {
	if e.at < w.clock.now {
		panic(fmt.Sprintf("sim: event %v scheduled at %v, before now %v", e.kind, e.at, w.clock.now))
	}
	w.seq++
	e.seq = w.seq
	if w.fifo.fits(&e) {
		w.fifo.push(&e)
		return
	}
	w.heap.push(e)
}

// scheduleWork schedules an evWork of node's process inc at at, as
// schedule(event{at: at, kind: evWork, node: node, inc: inc}) does, without
// building the event when it joins the FIFO.
func (w *world) scheduleWork(at vtime, node int32, inc uint32) {
	if at < w.clock.now || !w.fifo.takes(at) {
		w.schedule(event{at: at, kind: evWork, node: node, inc: inc})
		return
	}
	w.seq++
	w.fifo.pushItem(workItem{at: at, seq: w.seq, node: node, inc: inc})
}

// pending reports whether any event is scheduled.
func (w *world) pending() bool { return w.heap.len() > 0 || w.fifo.len() > 0 }

// workFirst reports whether the earliest scheduled event is the FIFO's
// (a periodic write) rather than the heap's.
func (w *world) workFirst() bool {
	return w.fifo.len() > 0 && (w.heap.len() == 0 || w.fifo.headBefore(w.heap.peek()))
}

// next removes and returns the earliest event of the heap and the FIFO.
func (w *world) next() event {
	if w.workFirst() {
		return w.fifo.popItem().event()
	}
	return w.heap.pop()
}

// fireWork fires one evWork from the FIFO, exactly as run and memberEvent
// would fire it as an event: the same trace record, the same dropping of a
// dead process's write and deferral of a paused one's.
func (w *world) fireWork(it workItem) {
	w.clock.advance(it.at)
	w.events++
	w.tr.record(uint8(evWork), it.at, it.node, 0, 0)
	n := w.nodes[it.node]
	if !n.alive || it.inc != n.inc {
		w.traceNote(noteDropped, it.node, int64(evWork))
		return
	}
	if n.paused {
		w.traceNote(noteDeferred, it.node, int64(evWork))
		n.deferred = append(n.deferred, it.event())
		return
	}
	w.work(n)
}

// run fires events in order until the end of the scenario.
func (w *world) run() {
	for w.pending() && w.err == nil {
		if w.workFirst() {
			// Most events are periodic writes: fired here without
			// building an event or going through dispatch.
			w.fireWork(w.fifo.popItem())
			continue
		}
		e := w.heap.pop()
		w.clock.advance(e.at)
		w.events++
		w.tr.record(uint8(e.kind), e.at, e.node, e.arg, e.arg2)
		if e.kind == evEnd {
			break
		}
		w.dispatch(&e)
	}
	w.met.finish(w.clock.now)
}

func (w *world) dispatch(e *event) {
	switch e.kind {
	case evDeliver:
		if e.node == 0 {
			w.coord.deliver(w, e.msg)
			return
		}
		w.memberEvent(e)
	case evCoordTimer:
		w.coord.timer(w, e)
	case evLaunch:
		w.launch(w.nodes[e.node])
	case evCrash:
		w.crash(w.nodes[e.node], "crash", false)
	case evNextCrash:
		w.randomCrash(int(e.arg))
	case evPauseStart:
		w.pauseStart(w.nodes[e.node], e)
	case evPauseEnd:
		w.pauseEnd(w.nodes[e.node], e)
	case evAction:
		w.action(int(e.arg))
	case evRollingStep:
		w.rollingStep(int(e.arg), int(e.arg2))
	case evHeal:
		w.net.heal(e.arg)
		w.traceLine("net", "heal cut %d", e.arg)
	case evFailover:
		w.coord.failover(w, w.sc.Actions[e.arg].takeover(w.electRng))
	case evTakeover:
		w.fail(w.coord.takeover(w))
	case evConnDrop:
		w.connDrop()
	case evConnDead:
		w.connDead(e)
	case evConnClosed:
		w.coord.connClosed(w, connKey{memberRef{int32(e.arg), uint32(e.arg2 >> 32)}, uint32(e.arg2)})
	default:
		w.memberEvent(e)
	}
}

// fail stops the run with err (if not nil).
func (w *world) fail(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

// traceNote adds a note to the trace hash (and nothing to the text).
func (w *world) traceNote(k noteKind, node int32, a int64) {
	w.tr.record(128+uint8(k), w.clock.now, node, a, 0)
}

// traceLine writes a readable trace line if a trace is wanted.
func (w *world) traceLine(who, format string, args ...any) {
	if w.tr.text() {
		w.tr.line(w.clock.now, who, format, args...)
	}
}

// layout numbers the partitions of all topics consecutively.
type layout struct {
	topics []Topic
	base   map[string]int32 // first global index of each topic
	n      int
}

func (l *layout) init(topics []Topic) {
	l.topics = topics
	l.base = make(map[string]int32, len(topics))
	for _, t := range topics {
		l.base[t.Name] = int32(l.n)
		l.n += int(t.Partitions)
	}
}

// index returns the global index of a topic's partition.
func (l *layout) index(topic string, p int32) (int32, bool) {
	b, ok := l.base[topic]
	if !ok || p < 0 {
		return 0, false
	}
	i := b + p
	if int(i) >= l.n {
		return 0, false
	}
	if t, _ := l.locate(i); t != topic {
		return 0, false
	}
	return i, true
}

// locate returns the topic and partition of a global index.
func (l *layout) locate(i int32) (string, int32) {
	for _, t := range l.topics {
		if b := l.base[t.Name]; i >= b && i < b+t.Partitions {
			return t.Name, i - b
		}
	}
	return "", -1
}

// name renders a global index as topic/partition.
func (l *layout) name(i int32) string {
	t, p := l.locate(i)
	if p < 0 {
		return "?" + itoa(int(i))
	}
	return t + "/" + itoa(int(p))
}

// errTimedOut is what a member's shell reports when a heartbeat gets no
// response within the request timeout.
var errTimedOut = errors.New("sim: heartbeat timed out")

// since returns the duration between two virtual times.
func since(from, to vtime) time.Duration { return time.Duration(to - from) }
