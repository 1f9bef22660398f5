package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// Server is a tenure coordinator speaking the Kafka protocol. Create it
// with New and run it with Serve.
type Server struct {
	cfg        Config
	core       coordinator.Config // cfg.Core with the server's topic registry
	log        *zap.Logger
	m          *metrics
	topics     *topicRegistry
	topicStore store.TopicStore
	logStore   store.LogStore
	authz      *authz
	signing    *signing
	quotas     *quotas
	perIP      connsPerIP
	standby    *standby // nil without Config.Standby
	// collectedAt is when the last collection ahead of a takeover
	// began (standby_gc.go).
	collectMu   sync.Mutex
	collectedAt time.Time

	// lead is the term during which this node coordinates groups: for a
	// single node, from the load at start-up to shutdown; in an HA set,
	// each term the node wins. Nil while it does not lead.
	lead atomic.Pointer[term]
	// sharded is Config.Cluster when it spreads groups over shards;
	// shards then holds each shard's term on this node instead of lead.
	sharded ShardedCluster
	shards  []shardSlot
	// loadingLead is set while a leadership term loads the groups.
	loadingLead loadGate
	// ledCount is how many terms this node holds now (the leading
	// gauge is 1 while it is above 0).
	ledCount atomic.Int32

	// coreHook, if set (by tests), runs before every use of a group's
	// core, inside the recovery that contains a core's panic to its
	// group.
	coreHook func(group string)

	// storeCtx is the context of store calls: it outlives the Serve
	// context so that a request being handled at shutdown still
	// persists before its reply.
	storeCtx context.Context

	// listeners are what Serve serves, their addresses resolved; selfNode
	// is this node with their advertised addresses (without a Cluster).
	listeners []*listener
	selfNode  Node
	// tls is the configuration of the TLS listeners; creds checks the
	// SASL listeners' clients.
	tls   *tls.Config
	creds *credentials

	// view is what this node tells clients of its HA set (view.go); nil
	// without a Cluster.
	view *clusterView

	// stopTerms ends the terms goroutine of an HA node at shutdown.
	stopTerms func()
	// unknown remembers the clients told of a missing topic.
	unknown unknownTopics
	// topicMisses coalesces the topic reloads of requests naming a topic
	// an HA node does not hold (knowTopics).
	topicMisses topicMisses

	serving atomic.Bool
	closing atomic.Bool
	connMu  sync.Mutex
	conns   map[*conn]struct{}
	nconns  int
	connWG  sync.WaitGroup
}

// New returns a Server for cfg, which it validates.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		m:        newMetrics(cfg.Registerer),
		topics:   newTopicRegistry(cfg.MaxTopics, cfg.MaxPartitions),
		conns:    make(map[*conn]struct{}),
		storeCtx: context.Background(),
	}
	s.authz = newAuthz(&cfg)
	s.signing = newSigning(&cfg)
	s.quotas = newQuotas(cfg.QuotaRequestRate, cfg.QuotaConnectionRequestRate)
	s.core = cfg.Core
	s.core.Topics = s.topics
	s.core.IssueGrants = cfg.SignGrants
	s.tls = serverTLS(cfg.TLS)
	cs := cfg.Credentials
	if cs == nil {
		cs, _ = cfg.Store.(store.CredentialStore)
	}
	s.creds = newCredentials(cs)
	if sc, ok := cfg.Cluster.(ShardedCluster); ok && sc.Shards() > 1 {
		s.sharded = sc
		s.shards = make([]shardSlot, sc.Shards())
	}
	if cfg.Standby != nil && cfg.Cluster != nil {
		s.standby = newStandby(s, cfg.Standby)
	}
	if cfg.Cluster != nil {
		s.view = newClusterView(s)
	}
	s.selfNode = Node{ID: cfg.NodeID}
	s.topicStore = cfg.TopicStore
	s.logStore = cfg.LogStore
	if ls, ok := cfg.Store.(store.LogStore); ok && s.logStore == nil {
		s.logStore = ls
	}
	if s.topicStore == nil {
		s.topicStore = cfg.Store.(store.TopicStore) // Validate checked
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(newGroupSums(s))
	}
	return s, nil
}

// ErrServing is returned by Serve when the Server is already serving or
// has served.
var ErrServing = errors.New("server: Serve called twice")

// Serve loads every topic and group from the store, then accepts
// connections on lns and serves them until ctx is cancelled or a listener
// fails. lns are the listeners of Config.Listeners, in order (one, the
// PLAINTEXT listener, without them). In
// an HA set (Config.Cluster) it serves at once, and coordinates groups
// during each term it wins, loading them at the term's start. Then it
// shuts down gracefully: it stops accepting, stops every group's timers,
// lets the store writes already queued finish, answers the requests still
// in flight (a parked Fetch with its empty answer at once, a parked
// JoinGroup or SyncGroup with COORDINATOR_NOT_AVAILABLE so its client
// looks for the coordinator again), closes every connection and returns.
// It returns nil after a cancellation, and the load's or the listener's
// error otherwise. lns are closed on return.
func (s *Server) Serve(ctx context.Context, lns ...net.Listener) error {
	if !s.serving.CompareAndSwap(false, true) {
		return ErrServing
	}
	ln := multiListener(lns)
	if err := s.resolveListeners(lns); err != nil {
		ln.Close()
		return err
	}
	// Keys first: no group may answer before its grants can be signed.
	stopKeys, keyErr := s.startKeys(ctx)
	if keyErr != nil {
		ln.Close()
		return keyErr
	}
	defer stopKeys()
	termCtx, stopTerms := context.WithCancel(ctx)
	defer stopTerms()
	termsDone := make(chan struct{})
	if s.cfg.Cluster == nil {
		tm := s.newTerm(nil, s.cfg.Store, -1, &s.lead)
		go tm.writer.run()
		defer tm.writer.close()
		if _, err := s.load(ctx, tm); err != nil {
			ln.Close()
			tm.groups.closeAll()
			return err
		}
		s.lead.Store(tm)
		s.ledCount.Add(1)
		s.m.leading.Set(1)
		close(termsDone)
	} else {
		if _, err := s.refreshTopics(ctx); err != nil {
			ln.Close()
			return err
		}
		go func() {
			defer close(termsDone)
			var wg sync.WaitGroup
			defer wg.Wait()
			if s.standby != nil {
				// Follow what this node may take before its first term
				// asks the standby for it.
				s.standby.shards()
				wg.Go(func() { s.standby.run(termCtx) })
			}
			s.runTerms(termCtx)
		}()
		go s.refreshTopicsLoop(termCtx)
		viewDone := make(chan struct{})
		go func() {
			defer close(viewDone)
			s.view.run(termCtx)
		}()
		defer func() { <-viewDone }()
	}
	s.stopTerms = func() {
		stopTerms()
		<-termsDone
	}
	stopACLs, aclErr := s.startACLs(ctx)
	if aclErr != nil {
		ln.Close()
		s.shutdown()
		return aclErr
	}
	defer stopACLs()
	if err := s.declareTopics(); err != nil {
		ln.Close()
		s.shutdown()
		return err
	}
	for _, l := range s.listeners {
		s.log.Info("serving",
			zap.String("listener", l.Name), zap.Stringer("protocol", l.Protocol),
			zap.String("listen", l.bound.String()), zap.String("advertise", l.advertise),
			zap.Int32("node", s.self().ID))
	}

	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			s.closing.Store(true)
			ln.Close()
		case <-stopped:
		}
	}()
	err := s.acceptAll(lns)
	close(stopped)
	s.closing.Store(true)
	ln.Close()
	s.shutdown()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// acceptAll runs an accept loop on each listener; when one ends, by a
// failure or a cancellation, it closes the others. It returns the first
// failure.
func (s *Server) acceptAll(lns []net.Listener) error {
	errc := make(chan error, len(lns))
	for i, ln := range lns {
		go func() { errc <- s.acceptLoop(ln, s.listeners[i]) }()
	}
	var first error
	for range lns {
		err := <-errc
		if first == nil && err != nil {
			first = err
		}
		if s.closing.CompareAndSwap(false, true) {
			multiListener(lns).Close()
		}
	}
	return first
}

func (s *Server) acceptLoop(ln net.Listener, l *listener) error {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("server: accept: %w", err)
		}
		backoff = 0
		s.addConn(nc, l)
	}
}

// isTemporary reports accept errors that a retry may cure (too many open
// files and the like).
func isTemporary(err error) bool {
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}

func (s *Server) addConn(raw net.Conn, ln *listener) {
	s.connMu.Lock()
	if s.closing.Load() {
		s.connMu.Unlock()
		raw.Close()
		return
	}
	if s.nconns >= s.cfg.MaxConnections {
		s.connMu.Unlock()
		s.m.limits.WithLabelValues("connections").Inc()
		s.log.Warn("connection refused: connection limit reached",
			zap.String("remote", raw.RemoteAddr().String()), zap.Int("limit", s.cfg.MaxConnections))
		raw.Close()
		return
	}
	if !s.admitIP(remoteIP(raw), raw.RemoteAddr().String()) {
		s.connMu.Unlock()
		raw.Close()
		return
	}
	if err := setKeepAlive(raw, s.cfg.KeepAlive); err != nil {
		s.log.Warn("connection keepalive not set", zap.String("remote", raw.RemoteAddr().String()), zap.Error(err))
	}
	nc := raw
	if ln.Protocol.TLS() {
		nc = tls.Server(raw, s.tls)
	}
	c := newConn(s, nc, raw, ln)
	s.conns[c] = struct{}{}
	s.nconns++
	s.connWG.Add(2)
	s.connMu.Unlock()
	s.m.connections.Inc()
	go func() {
		defer s.connWG.Done()
		c.serve()
	}()
	go func() {
		defer s.connWG.Done()
		c.writeLoop()
	}()
}

// closedConn forgets a closed connection and logs why it closed.
func (s *Server) closedConn(c *conn, reason string, err error) {
	s.connMu.Lock()
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		s.nconns--
		s.releaseIP(remoteIP(c.nc))
		s.m.connections.Dec()
	}
	s.connMu.Unlock()
	s.m.connClosed.WithLabelValues(reason).Inc()
	c.logClosed(s.log, reason, err)
}

// eachConn calls fn for every open connection.
func (s *Server) eachConn(fn func(*conn)) {
	s.connMu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.connMu.Unlock()
	for _, c := range cs {
		fn(c)
	}
}

// shutdownCode is the error for a group request still parked when the
// server shuts down: a retriable coordinator error, so the client looks the
// coordinator up again and retries there.
var shutdownCode = kerr.CoordinatorNotAvailable.Code

func (s *Server) shutdown() {
	if s.cfg.Cluster != nil {
		// The term ends with the node: its groups are dropped, and their
		// clients go to the next leader.
		s.stopTerms()
	} else if tm := s.lead.Load(); tm != nil {
		tm.groups.closeAll()
		// Replies held for writes already queued go out once those land.
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		if !tm.writer.drain(ctx) {
			s.log.Warn("store writes still in flight at shutdown; their requests are answered COORDINATOR_NOT_AVAILABLE")
		}
		cancel()
	}
	s.eachConn((*conn).stop)
	s.connWG.Wait()
	s.log.Info("stopped")
}

// resolveListeners pairs lns with the configured listeners and resolves
// their advertised addresses.
func (s *Server) resolveListeners(lns []net.Listener) error {
	cfgs := s.cfg.listeners()
	if len(lns) != len(cfgs) {
		return fmt.Errorf("server: Serve got %d net.Listeners for %d configured listeners", len(lns), len(cfgs))
	}
	s.selfNode.Listeners = make(map[string]string, len(cfgs))
	for i, ln := range lns {
		l, err := resolveListener(cfgs[i], ln.Addr())
		if err != nil {
			return err
		}
		if host, _, _ := net.SplitHostPort(l.advertise); net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
			s.log.Warn("advertising an unspecified address; clients cannot connect to it, set the advertised address",
				zap.String("listener", l.Name), zap.String("advertise", l.advertise))
		}
		s.listeners = append(s.listeners, l)
		s.selfNode.Listeners[l.Name] = l.advertise
	}
	s.selfNode.Addr = s.listeners[0].advertise
	return nil
}

// multiListener closes several listeners at once.
type multiListener []net.Listener

func (m multiListener) Close() error {
	var errs []error
	for _, ln := range m {
		errs = append(errs, ln.Close())
	}
	return errors.Join(errs...)
}
