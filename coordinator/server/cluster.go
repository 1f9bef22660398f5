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

// coordinatorNode is the node clients should send group requests to: this
// one while it leads, else the leader etcd names; ok is false when there
// is none.
func (s *Server) coordinatorNode(now time.Time) (Node, bool) {
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
	return l, ok
}

// notLeadingCode is the answer to a group request this node cannot serve
// because it does not lead: NOT_COORDINATOR when another node leads (the
// client finds it), COORDINATOR_NOT_AVAILABLE when none does (an election
// is under way, or etcd has lost its quorum: nothing is granted until one
// node leads again).
func (s *Server) notLeadingCode(now time.Time) int16 {
	if _, ok := s.coordinatorNode(now); ok {
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}
