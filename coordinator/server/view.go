package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// What survivors tell stock clients (docs/DESIGN.md has the measured
// story). Stock clients cache their coordinator by broker ID and dial the
// address Metadata last gave that ID; they rarely look the coordinator up
// again while its address refuses connections. So a node of an HA set
// keeps a view of the set as clients should see it:
//
//   - live nodes: the registered nodes minus those its probe of their
//     Kafka listener finds down (peers.go), since a dead node's
//     registration outlives it by up to an election TTL;
//   - departed nodes (registration gone, or probed down) stay in Metadata
//     for aliasFor under their broker ID, at the address of the node that
//     took their groups (the leader; with shards, the owner of most of
//     their shards, once all have an owner; while that is not known, the
//     next candidate for leadership in a one-leader set, else the live
//     node with the lowest ID, so that every survivor names the same
//     address: aliasTarget): a client that dials
//     its old coordinator's ID lands on a live node, which answers, and
//     points it on if it must;
//   - partition leadership is spread over the live nodes, so a dead
//     node's partitions move, and clients whose fetches fail reload
//     metadata;
//   - each change of what clients should see answers the parked Fetches,
//     and each connection's next Fetch, NOT_LEADER_OR_FOLLOWER once (the
//     "moved" signal), which makes clients reload metadata and look their
//     coordinator up again; within ViewSettle of a change that departed a
//     node, a new connection's first Fetch is told too (connGen).

// ViewNotifier is a Cluster that announces changes of its view (Nodes,
// Leader, ShardOwner): Changed returns a channel closed at the next
// change. Without it the server looks again every second.
type ViewNotifier interface {
	Changed() <-chan struct{}
}

// aliasFor is how long a departed node's broker ID stays in Metadata at
// its successor's address: longer than any client keeps retrying an old
// coordinator (kgo's backoff and retries, librdkafka's and kafkajs'
// reconnects), short enough that the list does not grow without end.
const aliasFor = 10 * time.Minute

// viewRecheck is how often the view is recomputed without a change
// announced: a term that ends by its deadline, an alias that expires.
const viewRecheck = time.Second

// departure is a node that left the live set, aliased until aliasFor
// after it left.
type departure struct {
	node   Node
	since  time.Time
	shards []int // the shards it owned when it left (with shards)
}

// viewSnap is the view as Metadata reads it.
type viewSnap struct {
	live     []Node // sorted by ID; this node is always among them
	liveIDs  []int32
	departed []departure // sorted by ID
	gen      uint64      // the changes clients were told of up to this snapshot
	// changed is when the view clients see last changed (zero: never
	// since the first refresh); read with a monotonic clock.
	changed time.Time
	// departed is when the departed nodes or their aliases' targets last
	// changed while some node was departed (zero: never): a change that
	// moves clients off a node (connGen).
	departedAt time.Time
}

// settling reports whether the view clients see changed less than settle
// before now: clients may still be moving their connections to the
// addresses the change gave their brokers' IDs (Config.ViewSettle).
func (v *clusterView) settling(now time.Time, settle time.Duration) bool {
	snap := v.snap.Load()
	return snap != nil && coordinator.ViewSettling(snap.changed, now, settle)
}

// told is the change count a connection must have been told of to be
// up to date.
func (v *clusterView) told() uint64 {
	if snap := v.snap.Load(); snap != nil {
		return snap.gen
	}
	return 0
}

// connGen is the change count a connection accepted at now starts as told
// of: the current one, except within settle of a change that moved
// clients off a departed node, when the connection's first Fetch is told
// "moved" too. A client that connects to a survivor then was most likely
// sent there by that change (its connection to the dead node failed and
// it reloaded metadata), and it may hold state from before it that only
// the moved signal makes it drop: kafkajs 2.2.4 heartbeats the
// coordinator it found at its last join until a Fetch error makes it
// join again (consumerGroup.js, recoverFromFetch), and a member whose
// partitions were all led by the dead node has no connection to a
// survivor that the change could tell (docs/FAILOVER.md). A new connection
// is no sign that its client heard of the change.
func (v *clusterView) connGen(now time.Time, settle time.Duration) uint64 {
	snap := v.snap.Load()
	if snap == nil {
		return 0
	}
	if snap.gen > 0 && coordinator.ViewSettling(snap.departedAt, now, settle) {
		return snap.gen - 1
	}
	return snap.gen
}

// clusterView is a node's view of its HA set as clients should see it.
type clusterView struct {
	s *Server

	// snap is the view as Metadata reads it. Its gen counts the changes
	// clients are told of; each connection remembers the last it was told
	// (conn.viewGen).
	snap atomic.Pointer[viewSnap]

	chMu sync.Mutex
	ch   chan struct{} // closed and replaced at every refresh

	poke chan struct{} // a probe's verdict changed

	probeMu sync.RWMutex // guards probes; only run writes it
	probes  map[int32]*peerProbe

	// Owned by the run goroutine.
	departed    map[int32]departure
	known       map[int32]Node // live at the last refresh
	lastOwner   []int32        // the last live owner of each shard, -1 if none yet
	fingerprint string
	aliasPrint  string // the departed nodes' part of fingerprint
}

func newClusterView(s *Server) *clusterView {
	v := &clusterView{
		s:        s,
		ch:       make(chan struct{}),
		poke:     make(chan struct{}, 1),
		probes:   map[int32]*peerProbe{},
		departed: map[int32]departure{},
		known:    map[int32]Node{},
	}
	if s.sharded != nil {
		v.lastOwner = make([]int32, s.sharded.Shards())
		for i := range v.lastOwner {
			v.lastOwner[i] = -1
		}
	}
	return v
}

// changes returns a channel closed at the view's next refresh.
func (v *clusterView) changes() <-chan struct{} {
	v.chMu.Lock()
	defer v.chMu.Unlock()
	return v.ch
}

// down reports whether node id is registered but probed down.
func (v *clusterView) down(id int32) bool {
	p := v.probeOf(id)
	return p != nil && p.down.Load()
}

func (v *clusterView) probeOf(id int32) *peerProbe {
	v.probeMu.RLock()
	defer v.probeMu.RUnlock()
	return v.probes[id]
}

// run keeps the view until ctx ends.
func (v *clusterView) run(ctx context.Context) {
	defer v.stopProbes()
	vn, _ := v.s.cfg.Cluster.(ViewNotifier)
	tick := time.NewTicker(viewRecheck)
	defer tick.Stop()
	for {
		var changed <-chan struct{}
		if vn != nil {
			changed = vn.Changed()
		}
		v.refresh(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-v.poke:
		case <-tick.C:
		}
	}
}

// refresh recomputes the view from the cluster's and the probes'.
func (v *clusterView) refresh(ctx context.Context, now time.Time) {
	s := v.s
	self := s.self()
	reg := s.cfg.Cluster.Nodes()
	v.syncProbes(ctx, reg, self.ID)

	live := make([]Node, 0, len(reg)+1)
	hasSelf := false
	for _, n := range reg {
		if n.ID == self.ID {
			hasSelf = true
			live = append(live, self)
			continue
		}
		if !v.down(n.ID) {
			live = append(live, n)
		}
	}
	if !hasSelf {
		// Deregistered (leaving, or between leases): it still answers.
		live = append(live, self)
		slices.SortFunc(live, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	}
	isLive := make(map[int32]bool, len(live))
	for _, n := range live {
		isLive[n.ID] = true
	}

	// Departures first, with the shards they owned before this refresh.
	for id, n := range v.known {
		if isLive[id] {
			continue
		}
		d := departure{node: n, since: now}
		for sh, o := range v.lastOwner {
			if o == id {
				d.shards = append(d.shards, sh)
			}
		}
		v.departed[id] = d
		s.log.Info("node left the live set; its broker ID now points at its successor",
			zap.Int32("node", id), zap.String("addr", n.Addr), zap.Bool("probed_down", v.down(id)))
	}
	clear(v.known)
	for _, n := range live {
		v.known[n.ID] = n
		delete(v.departed, n.ID)
	}
	for id, d := range v.departed {
		if now.Sub(d.since) > aliasFor {
			delete(v.departed, id)
		}
	}
	for sh := range v.lastOwner {
		if o, ok := s.sharded.ShardOwner(sh); ok && isLive[o.ID] {
			v.lastOwner[sh] = o.ID
		}
	}

	snap := &viewSnap{live: live}
	for _, n := range live {
		snap.liveIDs = append(snap.liveIDs, n.ID)
	}
	for _, d := range v.departed {
		snap.departed = append(snap.departed, d)
	}
	slices.SortFunc(snap.departed, func(a, b departure) int { return cmp.Compare(a.node.ID, b.node.ID) })

	// What clients see: the live nodes and where each alias points. The
	// change count travels in the snapshot it counts, so a Fetch checked
	// against a snapshot is never told of that snapshot's own change
	// afterwards, nor is a connection made from it, unless connGen counts
	// it untold on purpose.
	var b, aliases strings.Builder
	for _, n := range live {
		fmt.Fprintf(&b, "%d=%s;", n.ID, n.Addr)
	}
	for _, d := range snap.departed {
		fmt.Fprintf(&aliases, "%d>%d;", d.node.ID, s.aliasTarget(d, live, now).ID)
	}
	b.WriteString(aliases.String())
	snap.gen = v.told()
	if prev := v.snap.Load(); prev != nil {
		snap.changed = prev.changed
		snap.departedAt = prev.departedAt
	}
	changed := false
	if fp := b.String(); fp != v.fingerprint {
		changed = v.fingerprint != ""
		v.fingerprint = fp
		if changed {
			snap.gen++
			snap.changed = now
		}
	}
	if ap := aliases.String(); ap != v.aliasPrint {
		v.aliasPrint = ap
		if changed && ap != "" {
			snap.departedAt = now
		}
	}
	v.snap.Store(snap)

	down := 0
	v.probeMu.RLock()
	for _, p := range v.probes {
		if p.down.Load() {
			down++
		}
	}
	v.probeMu.RUnlock()
	s.m.peersDown.Set(float64(down))

	if changed {
		s.m.viewChanges.Inc()
		s.log.Info("the set's view changed; telling fetching clients to reload metadata",
			zap.String("view", v.fingerprint), zap.Uint64("view_gen", snap.gen))
		s.eachConn(func(c *conn) { c.moved(snap.gen) })
	}

	v.chMu.Lock()
	close(v.ch)
	v.ch = make(chan struct{})
	v.chMu.Unlock()
}

// aliasTarget is the live node a departed node's broker ID points at: the
// node that took its groups (the leader; with shards, the owner of most of
// the shards it held, ties to the lower ID) once that is known, and until
// then, in a one-leader set, the node that will lead (the first live
// candidate after the departed node, Succession), else the live node with
// the lowest ID. live is sorted by ID and holds this node.
//
// Every survivor must give the same answer from the same view: a client
// that reads Metadata from one survivor and then another would otherwise
// see the ID move between them, and kgo redials a broker whose address
// changed, closing the connection it heartbeats on. So the fallback is no
// node's own choice (it used to be the answering node itself), and with
// shards the successor counts only once every shard the node held has a
// live owner again: counting shards as they are taken moved the alias
// from the first taker to the node that ends with most.
func (s *Server) aliasTarget(d departure, live []Node, now time.Time) Node {
	fallback := live[0]
	if s.sharded == nil {
		if l, ok := s.leaderNode(now); ok {
			return l
		}
		if n, ok := s.successor(d, live); ok {
			return n
		}
		return fallback
	}
	if len(d.shards) == 0 {
		return fallback
	}
	count := map[int32]int{}
	byID := map[int32]Node{}
	for _, sh := range d.shards {
		o, ok := s.shardOwner(sh, now)
		if !ok {
			return fallback // the takeover is still under way
		}
		count[o.ID]++
		byID[o.ID] = o
	}
	best, bestN := fallback, 0
	for id, n := range count {
		if n > bestN || n == bestN && id < best.ID {
			best, bestN = byID[id], n
		}
	}
	return best
}

// successor is the live node that will lead after departed node d: the
// first live candidate other than d in the order in which candidates lead.
// Every survivor reads the same candidate keys, so each names the same
// node, and it is the node that wins once d's candidacy expires (ha's
// TestCandidatesNameTheSuccessor), so the alias need not move again. A
// candidate whose candidacy is renewed meanwhile (a lease replaced) goes
// to the back and may change the answer; that is the rare move left.
func (s *Server) successor(d departure, live []Node) (Node, bool) {
	sc, ok := s.cfg.Cluster.(Succession)
	if !ok {
		return Node{}, false
	}
	for _, c := range sc.Candidates() {
		if c.ID == d.node.ID {
			continue
		}
		if i, found := slices.BinarySearchFunc(live, c.ID, func(n Node, id int32) int { return cmp.Compare(n.ID, id) }); found {
			return live[i], true
		}
	}
	return Node{}, false
}

// metadataBrokers are the brokers Metadata lists: the live nodes, and the
// departed ones at their successors' addresses.
func (s *Server) metadataBrokers(now time.Time) (brokers []Node, leaders []int32) {
	if s.view == nil {
		ns := s.nodes()
		for _, n := range ns {
			leaders = append(leaders, n.ID)
		}
		return ns, leaders
	}
	snap := s.view.snap.Load()
	if snap == nil {
		ns := s.nodes()
		for _, n := range ns {
			leaders = append(leaders, n.ID)
		}
		return ns, leaders
	}
	brokers = append(brokers, snap.live...)
	for _, d := range snap.departed {
		alias := s.aliasTarget(d, snap.live, now)
		alias.ID = d.node.ID
		brokers = append(brokers, alias)
	}
	return brokers, snap.liveIDs
}

// liveNode filters out a node the probe finds down: it is no coordinator
// to send anyone to.
func (s *Server) liveNode(n Node, ok bool) (Node, bool) {
	if !ok || s.view == nil || n.ID == s.self().ID || !s.view.down(n.ID) {
		return n, ok
	}
	return Node{}, false
}

// partitionLeader spreads a topic's partitions over the live nodes.
func partitionLeader(topic string, p int32, live []int32) int32 {
	if len(live) == 1 {
		return live[0]
	}
	h := xxhash.Sum64String(topic) + uint64(p)
	return live[h%uint64(len(live))]
}
