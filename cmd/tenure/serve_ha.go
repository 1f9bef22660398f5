package main

import (
	"context"
	"errors"
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
}

var _ server.Cluster = (*haCluster)(nil)

// joinCluster joins this node (reachable by Kafka clients at advertise,
// and on each listener at its address in listeners, and by the other
// nodes' admin API at httpAddr, "" if it serves none) to the HA set on
// cli's etcd. storeOpts are the group store's options, to which each term
// adds its guard.
func joinCluster(ctx context.Context, cli *clientv3.Client, advertise string, listeners map[string]string, httpAddr, prefix string, ttl time.Duration,
	storeOpts []etcdstore.Opt, log *zap.Logger, reg prometheus.Registerer) (*haCluster, error) {
	opts := []ha.Opt{ha.Prefix(prefix), ha.ElectionTTL(ttl), ha.Logger(log), ha.Registerer(reg), ha.Listeners(listeners)}
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
		if errors.Is(err, ha.ErrInvalidOption) || time.Now().After(deadline) {
			return nil, err
		}
		log.Warn("cannot join the HA set yet; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c := &haCluster{node: node, cli: cli, storeOpts: storeOpts, log: log,
		terms: make(chan server.Term), cancel: cancel, done: make(chan struct{})}
	go c.run(runCtx)
	log.Info("joined the HA set", zap.Int32("node", node.Self().ID), zap.String("advertise", advertise),
		zap.String("http", httpAddr), zap.Duration("election_ttl", ttl))
	return c, nil
}

// run opens a guarded store for each term the node wins and hands the
// term to the server; the store closes when the term ends, before the
// node can win the next one.
func (c *haCluster) run(ctx context.Context) {
	defer close(c.done)
	defer close(c.terms)
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

// close leaves the set: the node resigns (another node takes over at once)
// and revokes its lease.
func (c *haCluster) close() error {
	c.cancel()
	<-c.done
	return c.node.Close()
}

func (c *haCluster) Self() server.Node { return serverNode(c.node.Self()) }

func (c *haCluster) Nodes() []server.Node {
	ns := c.node.Nodes()
	out := make([]server.Node, len(ns))
	for i, n := range ns {
		out[i] = serverNode(n)
	}
	return out
}

func (c *haCluster) Leader() (server.Node, bool) {
	n, ok := c.node.Leader()
	return serverNode(n), ok
}

func (c *haCluster) Terms() <-chan server.Term { return c.terms }

func serverNode(n ha.NodeInfo) server.Node {
	return server.Node{ID: n.ID, Addr: n.Addr, HTTP: n.HTTP, Listeners: n.Listeners}
}

// haTerm is a won term with its guarded store.
type haTerm struct {
	t  *ha.Term
	st *etcdstore.Store
}

func (h *haTerm) Store() store.Store       { return h.st }
func (h *haTerm) Valid(now time.Time) bool { return h.t.Valid(now) }
func (h *haTerm) Done() <-chan struct{}    { return h.t.Done() }
