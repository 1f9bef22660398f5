package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// haCluster makes an ha.Node the server's Cluster: every node of the set
// runs one; each term the node wins gets a group store of its own, guarded
// by the term's leader key, so that a deposed leader's writes fail in etcd
// whatever its clock says.
type haCluster struct {
	node      *ha.Node
	cli       *clientv3.Client
	storeOpts []etcdstore.Opt
	log       *zap.Logger
	terms     chan server.Term
	cancel    context.CancelFunc
	done      chan struct{}
	// shardTerms carries the shard terms with their stores, with
	// --shards above 1 (run hands out no leadership terms then).
	shardTerms chan server.ShardTerm
	// gate says when the groups may write what only this build reads
	// (server.Config.GroupTargets); gateDone closes when its loop ends.
	gate     *formatGate
	gateDone chan struct{}
}

var (
	_ server.ShardedCluster = (*haCluster)(nil)
	_ server.Succession     = (*haCluster)(nil)
)

// joinCluster joins this node (reachable by Kafka clients at advertise,
// and on each listener at its address in listeners, and by the other
// nodes' admin API at httpAddr, "" if it serves none) to the HA set on
// cli's etcd, with the groups in shards shards (1: one leader).
// preferID is the node ID to take on a first join if free (-1: the lowest
// free one). storeOpts are the group store's options, to which each term adds its
// guard (and its shard).
func joinCluster(ctx context.Context, cli *clientv3.Client, advertise string, listeners map[string]string, httpAddr, prefix string, ttl time.Duration,
	shards int, preferID int32, storeOpts []etcdstore.Opt, log *zap.Logger, reg prometheus.Registerer) (*haCluster, error) {
	opts := []ha.Opt{ha.Prefix(prefix), ha.ElectionTTL(ttl), ha.Logger(log), ha.Registerer(reg), ha.Listeners(listeners), ha.Shards(shards),
		ha.PreferID(preferID), ha.ReadsFormat(etcdstore.FormatVersion)}
	if httpAddr != "" {
		opts = append(opts, ha.HTTPAddr(httpAddr))
	}
	// etcd may still be electing its own leader (the nodes of a new
	// cluster start together): retry for a while, saying why.
	deadline := time.Now().Add(etcdStartTimeout)
	var node *ha.Node
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		var err error
		node, err = ha.Join(ctx, cli, advertise, opts...)
		if err == nil {
			break
		}
		if errors.Is(err, ha.ErrInvalidOption) || errors.Is(err, ha.ErrShardCount) || time.Now().After(deadline) {
			return nil, err
		}
		log.Warn("cannot join the HA set yet; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
	gate, err := newFormatGate(node, cli, prefix, log, reg)
	if err != nil {
		node.Close()
		return nil, err
	}
	// Before the first term: a set already raised writes targets from
	// its first step, one with an older node never does.
	gate.check(ctx)
	runCtx, cancel := context.WithCancel(context.Background())
	c := &haCluster{node: node, cli: cli, storeOpts: storeOpts, log: log,
		terms: make(chan server.Term), cancel: cancel, done: make(chan struct{}),
		shardTerms: make(chan server.ShardTerm, 2*shards), gate: gate, gateDone: make(chan struct{})}
	go func() {
		defer close(c.gateDone)
		gate.run(runCtx)
	}()
	if shards > 1 {
		go c.runShards(runCtx)
	} else {
		go c.run(runCtx)
	}
	log.Info("joined the HA set", zap.Int32("node", node.Self().ID), zap.String("advertise", advertise),
		zap.String("http", httpAddr), zap.Duration("election_ttl", ttl), zap.Int("shards", shards))
	return c, nil
}

// run opens a guarded store for each term the node wins and hands the
// term to the server; the store closes when the term ends, before the
// node can win the next one.
func (c *haCluster) run(ctx context.Context) {
	defer close(c.done)
	defer close(c.terms)
	defer close(c.shardTerms) // none: one leader
	for {
		var t *ha.Term
		select {
		case <-ctx.Done():
			return
		case t = <-c.node.Terms():
			if t == nil {
				return
			}
		}
		// Opening the store takes the fence over: a previous leader's
		// store writes nothing more, guard or not.
		st, err := etcdstore.New(ctx, c.cli, append(c.storeOpts, etcdstore.Guard(t.Guard()))...)
		if err != nil {
			c.log.Error("won a term but cannot open the store; waiting for the term to end", zap.Error(err))
			select {
			case <-t.Done():
			case <-ctx.Done():
			}
			continue
		}
		select {
		case c.terms <- &haTerm{t: t, st: st}:
			select {
			case <-t.Done():
			case <-ctx.Done():
			}
		case <-t.Done():
		case <-ctx.Done():
		}
		st.Close()
	}
}

// runShards opens a store of the shard's groups, guarded by the shard's
// owner key, for each shard term the node wins, and hands both to the
// server, which closes the store when it releases the term. Stores open
// one at a time, so that the terms of a shard reach the server in order.
func (c *haCluster) runShards(ctx context.Context) {
	defer close(c.done)
	defer close(c.shardTerms)
	count := c.node.ShardCount()
	// One Combiner for every shard store of the node: the shards' writes
	// at once go to etcd in one request, each guarded by its own shard's
	// owner key and fence. It is never closed: it holds nothing between
	// requests, and each store ends its own writes when it closes.
	comb := etcdstore.NewCombiner(c.cli, c.storeOpts...)
	for {
		var t *ha.Term
		select {
		case <-ctx.Done():
			return
		case t = <-c.node.ShardTerms():
			if t == nil {
				return
			}
		}
		st, err := etcdstore.New(ctx, c.cli, append(c.storeOpts, etcdstore.Guard(t.Guard()), etcdstore.Shard(t.Shard(), count), etcdstore.Combine(comb))...)
		if err != nil {
			// The owner key is this node's until the term ends; it then
			// moves, or is won again with a fresh store.
			c.log.Error("won a shard but cannot open its store; serving nothing of it this term",
				zap.Int("shard", t.Shard()), zap.Error(err))
			go func() {
				<-t.Done()
				t.Release()
			}()
			continue
		}
		ht := &haShardTerm{haTerm: haTerm{t: t, st: st}}
		select {
		case c.shardTerms <- ht:
		case <-ctx.Done():
			ht.Release()
			return
		}
	}
}

// close leaves the set: the node resigns (another node takes over at once)
// and revokes its lease.
func (c *haCluster) close() error {
	c.cancel()
	<-c.done
	<-c.gateDone
	err := c.node.Close()
	// Terms the server did not take (it stopped first) end with the node.
	for t := range c.shardTerms {
		t.Release()
	}
	return err
}

// handOffFirst returns the context to serve under: on a stop (ctx ends),
// the node first hands its shards, or its leadership, to the other nodes
// (Leave, within ttl), then goes on answering for grace, so that every member sends a
// request, is answered NOT_COORDINATOR and finds its group's new owner,
// and only then ends the returned context, which closes the connections.
// Stock clients whose coordinator's port just closes redial it rather
// than look it up again, and their sessions expire.
func handOffFirst(ctx context.Context, c *haCluster, ttl, grace time.Duration, log *zap.Logger) context.Context {
	serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer stop()
		<-ctx.Done()
		lctx, cancel := context.WithTimeout(context.Background(), ttl)
		defer cancel()
		start := time.Now()
		held, err := c.node.Leave(lctx)
		if err != nil {
			log.Warn("stopping before the hand-off finished; the rest moves when the lease is revoked", zap.Error(err))
			return
		}
		if held == 0 {
			return
		}
		log.Info("groups handed off; sending clients to their new coordinators before stopping",
			zap.Duration("took", time.Since(start)), zap.Duration("grace", grace))
		time.Sleep(grace)
	}()
	return serveCtx
}

// handOffGrace is how long a stopping node answers after handing its
// shards off: two KIP-848 heartbeat intervals, and at least the 3 s a
// classic client heartbeats at by default, at most 10 s.
func handOffGrace(heartbeat time.Duration) time.Duration {
	return min(max(2*heartbeat, 3*time.Second), 10*time.Second)
}

func (c *haCluster) Shards() int                         { return c.node.ShardCount() }
func (c *haCluster) ShardOf(group string) int            { return ha.ShardOf(group, c.node.ShardCount()) }
func (c *haCluster) ShardTerms() <-chan server.ShardTerm { return c.shardTerms }
func (c *haCluster) StandbyShards() []int                { return c.node.StandbyShards() }

func (c *haCluster) ShardOwner(s int) (server.Node, bool) {
	n, ok := c.node.ShardOwner(s)
	return serverNode(n), ok
}

func (c *haCluster) Self() server.Node { return serverNode(c.node.Self()) }

func (c *haCluster) Changed() <-chan struct{} { return c.node.Changed() }

func (c *haCluster) Nodes() []server.Node { return serverNodes(c.node.Nodes()) }

func (c *haCluster) Leader() (server.Node, bool) {
	n, ok := c.node.Leader()
	return serverNode(n), ok
}

func (c *haCluster) Candidates() []server.Node { return serverNodes(c.node.Candidates()) }

func (c *haCluster) Terms() <-chan server.Term { return c.terms }

func serverNode(n ha.NodeInfo) server.Node {
	return server.Node{ID: n.ID, Addr: n.Addr, HTTP: n.HTTP, Listeners: n.Listeners}
}

func serverNodes(ns []ha.NodeInfo) []server.Node {
	out := make([]server.Node, len(ns))
	for i, n := range ns {
		out[i] = serverNode(n)
	}
	return out
}

// haTerm is a won term with its guarded store.
type haTerm struct {
	t  *ha.Term
	st *etcdstore.Store
}

func (h *haTerm) Store() store.Store       { return h.st }
func (h *haTerm) Valid(now time.Time) bool { return h.t.Valid(now) }
func (h *haTerm) Done() <-chan struct{}    { return h.t.Done() }

// HandoverRevision makes the term a server.HandoverTerm: the standby
// catches up to it without reading etcd's revision first.
func (h *haTerm) HandoverRevision() int64 { return h.t.HandoverRevision() }

var (
	_ server.HandoverTerm = (*haTerm)(nil)
	_ server.HandoverTerm = (*haShardTerm)(nil)
)

// haShardTerm is a won shard term with the store of the shard's groups.
type haShardTerm struct {
	haTerm
	once sync.Once
}

func (h *haShardTerm) Shard() int { return h.t.Shard() }

// Release closes the store, whose writes the server has settled, then
// lets the node hand the shard on.
func (h *haShardTerm) Release() {
	h.once.Do(func() {
		h.st.Close()
		h.t.Release()
	})
}
