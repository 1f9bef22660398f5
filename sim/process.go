package sim

import (
	"slices"
	"time"
)

// launch starts a new process in slot n; it joins after the scenario's
// start-up delay.
func (w *world) launch(n *memberNode) {
	if n.alive || n.retired {
		return
	}
	n.inc++
	n.alive, n.started, n.leaving, n.connected, n.conn = true, false, false, false, 0
	n.aliveSince = w.clock.now
	n.afterLeave = 0
	w.traceLine(n.name, "launch process %d", n.inc)
	at := w.clock.now + vtime(sampleDelay(w.sc.StartDelay, n.rng))
	w.schedule(event{at: at, kind: evStart, node: n.id, inc: n.inc})
}

// crash kills n's process at once: its machine, its workers, whatever it
// was about to send. When only the process dies, its kernel closes its
// connection, and the coordinator sees the close; when its host dies
// (host), nothing tells the coordinator, which finds out when the session
// expires.
func (w *world) crash(n *memberNode, why string, host bool) {
	if !n.alive {
		return
	}
	what := "process"
	if host {
		what = "host"
	}
	w.traceLine(n.name, "%s (%s of process %d)", why, what, n.inc)
	if host {
		w.hostSilent(n)
	} else {
		w.closeConn(n)
	}
	lost := w.stopProcess(n)
	w.met.crashed(w, lost)
}

// closeConn closes the connection of n's process, as its kernel does when
// the process exits or dies, if it ever sent anything on it.
func (w *world) closeConn(n *memberNode) {
	if n.connected {
		n.connected = false
		w.net.closeConn(w, n.id, n.inc, n.conn)
	}
}

// keepaliveIdle is how long a connection is idle before the coordinator's
// kernel starts probing it (tenure serve sets TCP keepalive to 1 s idle,
// 1 s between probes).
const keepaliveIdle = vtime(time.Second)

// hostSilent starts the keepalive clock of the connection of n's process,
// whose host stopped answering now (it crashed, or a cut separates it from
// the coordinator). With Timing.KeepAlive the coordinator's kernel aborts
// the connection once it has heard nothing from that host for that long;
// the kernel of a merely paused process keeps answering, so pauses never
// start it. The host was last heard when its process last sent, or, if
// the connection was idle for a probe interval, at the last probe it
// answered (taken as now).
func (w *world) hostSilent(n *memberNode) {
	ka := w.sc.Timing.KeepAlive
	if ka <= 0 || !n.connected {
		return
	}
	last := n.heardAt
	if w.clock.now-last >= keepaliveIdle {
		last = w.clock.now
	}
	at := max(last+vtime(ka), w.clock.now)
	w.schedule(event{at: at, kind: evConnDead, arg: int64(n.id), arg2: int64(n.inc)<<32 | int64(n.conn)})
}

// connDead aborts a connection whose host stayed silent for the keepalive
// timeout, unless its host answers again (the cut healed): the coordinator
// then acts as on a close. The member's side of it is gone too (its next
// request meets a reset), so its next request opens a new connection.
func (w *world) connDead(e *event) {
	node, inc, conn := int32(e.arg), uint32(e.arg2>>32), uint32(e.arg2)
	n := w.nodes[node]
	if n.inc == inc && n.alive && !w.net.isCut(node, 0) {
		w.traceNote(noteDropped, 0, int64(evConnDead))
		return
	}
	if n.inc == inc && n.connected && n.conn == conn {
		n.connected = false
	}
	w.traceLine("coord", "keepalive: connection %d of %s#%d is dead", conn, n.name, inc)
	w.coord.connClosed(w, connKey{memberRef{node, inc}, conn})
}

// stopProcess ends n's process and returns the partitions that lost their
// only working owner with it.
func (w *world) stopProcess(n *memberNode) []int32 {
	var lost []int32
	act := int32(-1)
	if n.paused {
		act = 0 // a paused process was not counted as active
	}
	for _, p := range n.working {
		w.met.setWorking(w, p, -1, act)
		if w.met.parts[p].believers == 0 {
			lost = append(lost, p)
		}
	}
	slices.Sort(lost)
	for p := range n.claims {
		if n.claims[p].state != 0 {
			w.met.claimGone(w, n, int32(p))
		}
	}
	clear(n.claims)
	if n.alive {
		n.aliveNs += int64(w.clock.now - n.aliveSince)
	}
	n.working = n.working[:0]
	n.reports = n.reports[:0]
	n.deferred = n.deferred[:0]
	n.inflight = n.inflight[:0]
	n.alive, n.started, n.paused = false, false, false
	n.m = nil
	n.hb = nil
	n.nextTick, n.timerAt = vnever, vnever
	return lost
}

// leave asks n's process to leave the group gracefully, then to do then.
func (w *world) leave(n *memberNode, then leaveThen) {
	if !n.started {
		// Still starting: it never joined, so it just stops.
		w.closeConn(n)
		w.stopProcess(n)
		w.afterExit(n, then)
		return
	}
	if n.leaving {
		return
	}
	n.leaving, n.afterLeave = true, then
	w.met.departing(w, n)
	temporary := w.sc.Static && then == thenRestart
	w.traceLine(n.name, "leave temporary=%v", temporary)
	n.m.Leave(w.localNow(n), temporary)
	w.memberReady(n)
}

// exited handles a machine that is done: it left as asked, or stopped on an
// error it cannot recover from.
func (w *world) exited(n *memberNode, err error) {
	then := n.afterLeave
	if err != nil {
		w.met.fatal++
		w.traceLine(n.name, "stopped: %v", err)
		if !n.leaving {
			// The process gives up; a supervisor restarts it, after a
			// pause so that a persistent error does not spin.
			w.closeConn(n)
			w.stopProcess(n)
			at := w.clock.now + vtime(max(sampleDelay(n.restart, n.rng), fatalRestartDelay))
			w.schedule(event{at: at, kind: evLaunch, node: n.id})
			return
		}
	} else {
		w.traceLine(n.name, "left")
	}
	w.closeConn(n)
	w.stopProcess(n)
	w.afterExit(n, then)
}

// fatalRestartDelay is the least time a supervisor waits before it
// restarts a member that stopped on an error.
const fatalRestartDelay = time.Second

func (w *world) afterExit(n *memberNode, then leaveThen) {
	switch then {
	case thenRetire:
		n.retired = true
	case thenRestart:
		at := w.clock.now + vtime(sampleDelay(n.restart, n.rng))
		w.schedule(event{at: at, kind: evLaunch, node: n.id})
	}
}

// pausesApply reports whether pause spec i applies to the named member.
func (w *world) pausesApply(i int, name string) bool {
	ms := w.sc.Pauses[i].Members
	return len(ms) == 0 || slices.Contains(ms, name)
}

// schedulePause draws the next pause of n from spec i.
func (w *world) schedulePause(n *memberNode, i int) {
	at := w.clock.now + vtime(w.sc.Pauses[i].Every.Sample(n.rng))
	w.schedule(event{at: at, kind: evPauseStart, node: n.id, arg: int64(i)})
}

// pauseStart begins a stop-the-world pause of n's process. A random pause
// (arg >= 0: the spec) also draws the next one; a scripted pause (arg < 0)
// lasts arg2.
func (w *world) pauseStart(n *memberNode, e *event) {
	length := vtime(e.arg2)
	if e.arg >= 0 {
		spec := &w.sc.Pauses[e.arg]
		length = vtime(spec.Length.Sample(n.rng))
		if !n.retired {
			w.schedulePause(n, int(e.arg))
		}
	}
	if !n.started || n.paused || length <= 0 {
		return // not running, or already paused: the pauses merge
	}
	n.paused = true
	if e.arg < 0 {
		w.met.pausing(w, n)
	}
	for _, p := range n.working {
		w.met.setWorking(w, p, 0, -1)
	}
	n.pauses++
	w.met.pauses++
	w.met.pausedNs += int64(length)
	// Every write under way stays in flight through the pause.
	n.inflight = n.inflight[:0]
	for _, p := range n.working {
		if f := w.sc.Work.InFlight; f >= 1 || (f > 0 && n.rng.Float64() < f) {
			n.inflight = append(n.inflight, write{p, n.claims[p].token})
		}
	}
	slices.SortFunc(n.inflight, func(a, b write) int { return int(a.part - b.part) })
	w.traceLine(n.name, "pause %v", since(0, length))
	w.schedule(event{at: w.clock.now + length, kind: evPauseEnd, node: n.id, inc: n.inc})
}

// pauseEnd resumes n's process: the writes that were in flight land
// first, before the process can notice anything, then everything that
// arrived or fell due during the pause runs, in order, as after a real
// stop-the-world pause.
func (w *world) pauseEnd(n *memberNode, e *event) {
	if !n.alive || e.inc != n.inc || !n.paused {
		return
	}
	n.paused = false
	for _, p := range n.working {
		w.met.setWorking(w, p, 0, +1)
	}
	w.traceLine(n.name, "resume: %d writes in flight, %d events waiting", len(n.inflight), len(n.deferred))
	if w.sc.Work.Every > 0 {
		for _, wr := range n.inflight {
			w.write(n, wr.part, wr.token)
		}
	}
	n.inflight = n.inflight[:0]
	inc := n.inc
	for i := 0; i < len(n.deferred); i++ {
		if !n.alive || n.inc != inc || n.paused {
			break
		}
		ev := n.deferred[i]
		w.tr.record(uint8(ev.kind), w.clock.now, n.id, ev.arg, ev.arg2)
		w.handleMember(n, &ev)
	}
	if n.alive && n.inc == inc {
		n.deferred = n.deferred[:0]
	}
}

// connDrop closes the connection of a random live member process under
// it, as a proxy's idle timeout, a load balancer or a NAT table flush
// does, and draws the next drop. The process notices nothing: its next
// request opens a new connection, and the coordinator, which sees the
// close, keeps the member if it hears from it within the grace.
func (w *world) connDrop() {
	w.schedule(event{at: w.clock.now + vtime(w.sc.ConnDrops.Sample(w.connRng)), kind: evConnDrop})
	var conns []*memberNode
	for _, n := range w.nodes[1:] {
		if n.alive && n.connected {
			conns = append(conns, n)
		}
	}
	if len(conns) == 0 {
		return
	}
	n := conns[w.connRng.IntN(len(conns))]
	w.traceLine(n.name, "connection %d dropped", n.conn)
	w.met.connDrops++
	w.closeConn(n)
}

// randomCrash crashes a random running member and draws the next crash.
func (w *world) randomCrash(i int) {
	spec := &w.sc.Crashes[i]
	w.schedule(event{at: w.clock.now + vtime(spec.Every.Sample(w.crashRng)), kind: evNextCrash, arg: int64(i)})
	var running []*memberNode
	for _, n := range w.nodes[1:] {
		if n.started && !n.leaving {
			running = append(running, n)
		}
	}
	if len(running) == 0 {
		return
	}
	n := running[w.crashRng.IntN(len(running))]
	w.crash(n, "random crash", spec.Host)
	if spec.Restart != nil {
		w.schedule(event{at: w.clock.now + vtime(spec.Restart.Sample(w.crashRng)), kind: evLaunch, node: n.id})
	}
}

// action performs the scenario's timed action i.
func (w *world) action(i int) {
	a := &w.sc.Actions[i]
	switch a.Kind {
	case ActCrash:
		n := w.nodeNamed(a.Member)
		if n == nil {
			return
		}
		w.crash(n, "crash", a.Host)
		if a.Restart != nil {
			w.schedule(event{at: w.clock.now + vtime(a.Restart.Sample(w.crashRng)), kind: evLaunch, node: n.id})
		}
	case ActPause:
		if n := w.nodeNamed(a.Member); n != nil {
			w.pauseStart(n, &event{arg: -1, arg2: int64(a.Length)})
		}
	case ActCut:
		set := make(map[int32]bool, len(a.Nodes))
		for _, name := range a.Nodes {
			if name == "coord" {
				set[0] = true
			} else if n := w.nodeNamed(name); n != nil {
				set[n.id] = true
			}
		}
		w.cutID++
		w.net.addCut(w.cutID, set)
		w.traceLine("net", "cut %d: %v", w.cutID, a.Nodes)
		for _, n := range w.nodes[1:] {
			if n.alive && w.net.isCut(n.id, 0) {
				w.hostSilent(n)
			}
		}
		if a.Heal > 0 {
			w.schedule(event{at: w.clock.now + vtime(a.Heal), kind: evHeal, arg: w.cutID})
		}
	case ActRollingRestart:
		w.rollingStep(i, 0)
	case ActScaleOut:
		for range a.N {
			w.launchNew()
		}
	case ActScaleIn:
		running := w.running()
		for k := 0; k < a.N && k < len(running); k++ {
			n := running[len(running)-1-k]
			w.schedule(event{at: w.clock.now, kind: evLeave, node: n.id, inc: n.inc, arg: int64(thenRetire)})
		}
	case ActFailover:
		w.schedule(event{at: w.clock.now, kind: evFailover, arg: int64(i)})
	}
}

// launchNew adds a member slot and launches its process now.
func (w *world) launchNew() *memberNode {
	n := w.nodes[w.addMember()]
	for i := range w.sc.Pauses {
		if w.pausesApply(i, n.name) {
			w.schedulePause(n, i)
		}
	}
	w.launch(n)
	return n
}

// running returns the member slots whose process runs and is not leaving,
// in slot order.
func (w *world) running() []*memberNode {
	var out []*memberNode
	for _, n := range w.nodes[1:] {
		if n.alive && !n.leaving && !n.retired {
			out = append(out, n)
		}
	}
	return out
}

// rollingStep restarts batch b of rolling restart i. The fleet is the
// running members when the restart begins; each batch takes Surge of them.
func (w *world) rollingStep(i, b int) {
	a := &w.sc.Actions[i]
	surge := max(a.Surge, 1)
	fleet := w.rollingFleet(i)
	lo := b * surge
	if lo >= len(fleet) {
		return
	}
	hi := min(lo+surge, len(fleet))
	w.traceLine("deploy", "rolling restart batch %d: %d members", b+1, hi-lo)
	for _, id := range fleet[lo:hi] {
		n := w.nodes[id]
		if !n.alive || n.leaving {
			continue
		}
		if w.sc.Static {
			n.restart = a.Restart
			w.schedule(event{at: w.clock.now, kind: evLeave, node: n.id, inc: n.inc, arg: int64(thenRestart)})
		} else {
			w.launchNew()
			w.schedule(event{at: w.clock.now, kind: evLeave, node: n.id, inc: n.inc, arg: int64(thenRetire)})
		}
	}
	if hi < len(fleet) {
		w.schedule(event{at: w.clock.now + vtime(a.Every), kind: evRollingStep, arg: int64(i), arg2: int64(b + 1)})
	}
}

// rollingFleet returns (and on the first call fixes) the node IDs a rolling
// restart goes through.
func (w *world) rollingFleet(i int) []int32 {
	if w.fleets == nil {
		w.fleets = make(map[int][]int32)
	}
	if f, ok := w.fleets[i]; ok {
		return f
	}
	var f []int32
	for _, n := range w.running() {
		f = append(f, n.id)
	}
	w.fleets[i] = f
	return f
}

// nodeNamed returns the member slot with the given name, or nil.
func (w *world) nodeNamed(name string) *memberNode {
	for _, n := range w.nodes[1:] {
		if n.name == name {
			return n
		}
	}
	return nil
}
