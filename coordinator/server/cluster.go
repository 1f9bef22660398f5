package server

import (
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// Cluster is the HA set a server belongs to (package ha implements it on
// etcd, and `tenure serve` wires it). Every node answers Metadata, listing
// the live nodes, and FindCoordinator, naming the leader; only the leader,
// during a term, coordinates groups: the others answer group requests
// NOT_COORDINATOR, so stock clients look the coordinator up again and move
// to the leader by themselves.
type Cluster interface {
	// Self is this node.
	Self() Node
	// Nodes are the live nodes, sorted by ID.
	Nodes() []Node
	// Leader is the node etcd says leads, if any. It may lag: it only
	// tells clients where to go, it never decides who coordinates.
	Leader() (Node, bool)
	// Terms delivers each leadership term this node wins, in order; it
	// is closed when the node leaves the set.
	Terms() <-chan Term
}

// Succession is a Cluster that knows the order in which its nodes lead
// (ha: the candidate keys by create revision). With it, survivors point a
// dead leader's broker ID at the node that will lead after it before the
// election is decided, rather than at the lowest live node, from which
// the alias moved once more when another node won.
type Succession interface {
	// Candidates are the live nodes that stand for leadership, in the
	// order in which they lead: the first is the leader, or was it if
	// it died and its candidacy has not expired yet; each next one
	// leads once all before it are gone. It may lag, like Leader.
	Candidates() []Node
}

// Term is one leadership term of this node: while it is valid, this node
// coordinates every group, writing through the term's store.
type Term interface {
	// Store is the group store of the term. Its writes must fail once
	// another node may lead (etcdstore.Guard on the leader key), so a
	// deposed leader that wakes from a pause writes nothing.
	Store() store.Store
	// Valid reports whether the term still holds at now (a monotonic
	// reading). It must turn false before another node can win a term,
	// and never turn true again.
	Valid(now time.Time) bool
	// Done is closed when the term ends.
	Done() <-chan struct{}
}

// A HandoverTerm is a Term that knows a store revision above every write
// of the terms before it (ha.Term.HandoverRevision): the standby that
// holds every write up to it holds the last of the node it takes over
// from, so the takeover waits for that revision rather than read the
// store's current one first.
type HandoverTerm interface {
	Term
	HandoverRevision() int64
}

// ShardedCluster is an HA set whose groups are spread over shards, each
// with an owner of its own (tenure serve --shards): a Cluster that
// implements it hands out shard terms instead of leadership terms, and
// the server coordinates the groups of the shards it holds a term of,
// answering NOT_COORDINATOR for the others and pointing clients at their
// shard's owner.
type ShardedCluster interface {
	Cluster
	// Shards is the number of shards, above 1, fixed for the set.
	Shards() int
	// ShardOf is the shard of a group, in [0, Shards()).
	ShardOf(group string) int
	// ShardOwner is the node etcd says owns shard s, if any. Like
	// Leader it may lag, and only tells clients where to go.
	ShardOwner(s int) (Node, bool)
	// ShardTerms delivers each shard term this node wins; this node
	// holds any number at once, at most one per shard. It is closed
	// when the node leaves the set.
	ShardTerms() <-chan ShardTerm
}

// ShardTerm is a term of one shard: while it is valid, this node
// coordinates the shard's groups, writing through the term's store,
// which holds those groups only.
type ShardTerm interface {
	Term
	// Shard is the term's shard.
	Shard() int
	// Release tells the cluster that the server has stopped acting on
	// the ended term: its groups are dropped and its writes settled, so
	// the shard's next owner may take it.
	Release()
}

// Node is one node of an HA set, as clients are told to reach it.
type Node struct {
	ID   int32
	Addr string // host:port: its first listener's
	// Listeners are the node's advertised host:port by listener name. A
	// node without any (registered by an older tenure) is reached at
	// Addr whatever the listener.
	Listeners map[string]string
	// HTTP is the host:port of the node's HTTP listener (tenure serve
	// --http), where the admin API forwards what only the leader can do;
	// "" if the node has none.
	HTTP string
}

// hostPortOn splits the address n advertises on the listener named name,
// for Metadata and FindCoordinator; ok is false when n has no such
// listener, and Kafka then leaves the node out.
func (n Node) hostPortOn(name string) (host string, port int32, ok bool) {
	addr := n.Addr
	if len(n.Listeners) > 0 {
		if addr, ok = n.Listeners[name]; !ok {
			return "", -1, false
		}
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, -1, true
	}
	pn, _ := strconv.Atoi(p)
	return host, int32(pn), true
}

// self is this node as clients reach it.
func (s *Server) self() Node {
	if s.cfg.Cluster != nil {
		return s.cfg.Cluster.Self()
	}
	return s.selfNode
}

// nodes are the nodes Metadata lists.
func (s *Server) nodes() []Node {
	if s.cfg.Cluster != nil {
		if ns := s.cfg.Cluster.Nodes(); len(ns) > 0 {
			return ns
		}
	}
	return []Node{s.self()}
}

// coordinatorNode is the node clients should send the group's requests
// to: this one while it coordinates the group, else the leader (the
// shard's owner) etcd names; ok is false when there is none.
func (s *Server) coordinatorNode(group string, now time.Time) (Node, bool) {
	if s.loading(group) {
		return s.self(), true // it serves once loaded; Kafka names it too
	}
	if s.sharded != nil {
		return s.shardOwner(s.sharded.ShardOf(group), now)
	}
	return s.leaderNode(now)
}

// controllerNode is the node Metadata names as controller, which serves
// topic deletions: the leader, or the owner of shard 0.
func (s *Server) controllerNode(now time.Time) (Node, bool) {
	if s.sharded != nil {
		return s.shardOwner(0, now)
	}
	return s.leaderNode(now)
}

// shardOwner is the node that coordinates shard sh: this one while it
// holds a valid term of it, else its owner as etcd names it.
func (s *Server) shardOwner(sh int, now time.Time) (Node, bool) {
	if s.shardTerm(sh, now) != nil {
		return s.self(), true
	}
	o, ok := s.sharded.ShardOwner(sh)
	if ok && o.ID == s.self().ID {
		return Node{}, false // etcd still names this node, but its term is over
	}
	return s.liveNode(o, ok)
}

func (s *Server) leaderNode(now time.Time) (Node, bool) {
	if s.leading(now) != nil {
		return s.self(), true
	}
	if s.cfg.Cluster == nil {
		return Node{}, false
	}
	l, ok := s.cfg.Cluster.Leader()
	if ok && l.ID == s.self().ID {
		// etcd still names this node, but its term is over or in
		// doubt: there is no coordinator to send anyone to yet.
		return Node{}, false
	}
	return s.liveNode(l, ok)
}

// notLeadingCode is the answer to a request for group that this node
// cannot serve because it does not coordinate the group:
// COORDINATOR_LOAD_IN_PROGRESS while it loads the group's term, else
// redirectCode.
func (s *Server) notLeadingCode(group string, now time.Time) int16 {
	if s.loading(group) {
		return kerr.CoordinatorLoadInProgress.Code
	}
	_, known := s.coordinatorNode(group, now)
	return redirectCode(known)
}

// redirectCode is NOT_COORDINATOR when another node coordinates (the
// client finds it), COORDINATOR_NOT_AVAILABLE when none does (an
// election or a shard's move is under way, or etcd has lost its quorum:
// nothing is granted until a node holds the term again).
func redirectCode(known bool) int16 {
	if known {
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}
