package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// formatGate upgrades an HA set's store node by node: the prefix's format
// is raised to the newest this build reads (etcdstore.FormatVersion) only
// once every registered node reads it, and the groups write what only
// that format's readers read (the targets in group values,
// etcdstore.TargetsFormat) only once the prefix is raised. Until then
// they write what the build before reads, so that a group an older node
// takes over restores. The raise is one-way and decided by one etcd
// transaction for the whole set (FormatReaders' comparison): a node that
// registers meanwhile makes it fail, and after it an older tenure refuses
// the store (etcdstore.ErrNewerFormat), which the gate reports.
type formatGate struct {
	node  *ha.Node
	cli   *clientv3.Client
	opts  []etcdstore.Opt // the prefix, the logger
	log   *zap.Logger
	every time.Duration // how often to look without a change of the view

	open atomic.Bool
	m    *ha.FormatMetrics

	// reported are the nodes behind, by ID, as the last check logged
	// them (with the format the set was at); run's alone.
	reported map[int32]reportedNode
}

type reportedNode struct{ reads, at int }

// newFormatGate makes the gate of node and registers its gauges with reg
// (nil: none).
func newFormatGate(node *ha.Node, cli *clientv3.Client, prefix string, log *zap.Logger, reg prometheus.Registerer) (*formatGate, error) {
	m, err := ha.NewFormatMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &formatGate{node: node, cli: cli, opts: []etcdstore.Opt{etcdstore.Prefix(prefix), etcdstore.Logger(log)}, log: log,
		every: 10 * time.Second, reported: map[int32]reportedNode{}, m: m}, nil
}

// groupTargets is server.Config.GroupTargets.
func (g *formatGate) groupTargets() bool { return g.open.Load() }

// run checks at every change of the node's view of the set (a node
// registering or leaving), and every g.every, until ctx ends.
func (g *formatGate) run(ctx context.Context) {
	tick := time.NewTicker(g.every)
	defer tick.Stop()
	for {
		changed := g.node.Changed()
		g.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// maxRaiseAttempts bounds the raises a check tries while nodes register
// or other nodes raise the format meanwhile.
const maxRaiseAttempts = 4

// check reads who is behind and the prefix's format, raises the format
// if nobody is, and opens the gate once the format is there.
func (g *formatGate) check(ctx context.Context) {
	for range maxRaiseAttempts {
		behind, unchanged, err := g.node.FormatReaders(ctx, etcdstore.FormatVersion)
		if err != nil {
			g.log.Debug("store format: cannot read the nodes' registrations; trying again later", zap.Error(err))
			return
		}
		var v int
		if len(behind) == 0 {
			v, err = etcdstore.RaiseFormat(ctx, g.cli, etcdstore.FormatVersion, []clientv3.Cmp{unchanged}, g.opts...)
			if errors.Is(err, etcdstore.ErrFormatChanged) {
				continue // a node registered, or another raised it: look again
			}
		} else {
			v, err = etcdstore.ReadFormat(ctx, g.cli, g.opts...)
		}
		if err != nil {
			g.log.Debug("store format: cannot read or raise it; trying again later", zap.Error(err))
			return
		}
		g.settle(v, behind)
		return
	}
}

// settle records what a check found: the prefix at format v, and the
// nodes behind this build's format.
func (g *formatGate) settle(v int, behind []ha.NodeInfo) {
	g.m.Format.Set(float64(v))
	g.m.Behind.Set(float64(len(behind)))
	if v >= etcdstore.TargetsFormat && !g.open.Swap(true) {
		g.log.Info("store format: group values carry their epoch bumps' targets from now on",
			zap.Int("format", v), zap.Int("behind", len(behind)))
	}
	now := make(map[int32]reportedNode, len(behind))
	older := 0
	for _, n := range behind {
		reads := n.Format
		if reads == 0 {
			// Registered by a tenure from before NodeInfo.Format, which
			// came with format 6: it reads 5 at most.
			reads = etcdstore.TargetsFormat - 1
		}
		// Raised before it registered: its store refuses to open.
		tooOld := v > reads
		if tooOld {
			older++
		}
		r := reportedNode{reads: n.Format, at: v}
		now[n.ID] = r
		if prev, ok := g.reported[n.ID]; ok && prev == r {
			continue // logged already
		}
		fields := []zap.Field{zap.Int32("node", n.ID), zap.String("addr", n.Addr), zap.Int("reads", n.Format),
			zap.Int("store_format", v), zap.Int("this_node_reads", etcdstore.FormatVersion)}
		if tooOld {
			g.log.Error("store format: a node of the HA set is older than the store; it cannot open it, and any group or shard it takes over stays offline: upgrade it, or stop it",
				fields...)
		} else {
			g.log.Warn("store format: a node of the HA set reads no newer format; the store stays at its own, and group values carry no targets, until every node reads the newer one",
				fields...)
		}
	}
	g.m.Older.Set(float64(older))
	g.reported = now
}
