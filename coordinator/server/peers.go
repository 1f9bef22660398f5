package server

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// probeClosedWithin: a peer whose listener accepts a connection and
// closes it this soon is down too. A proxy in front of a dead node (or
// of one cut off), and a node shutting down, accept and close at once; a
// live tenure node waits for a request.
const probeClosedWithin = 50 * time.Millisecond

// probeHold is how many probe intervals a probe holds a connection that
// stayed open before it dials again. A dial every interval was a
// listener's accept, a connection's goroutines and three wake-ups on
// both nodes, eight times a second per pair of nodes at the default: 8%
// of a three-node set's CPU at 3,000 operations per second in
// BenchmarkCapacity (docs/CAPACITY.md). A peer that dies, or shuts down,
// closes the held connection (its kernel does, on a kill -9), which the
// probe sees at once and dials again; a listener that starts refusing
// new connections while the held one stays open (a firewall's reject) is
// found at the next dial, within probeHold intervals.
const probeHold = 8

// peerProbe probes one registered peer's Kafka listener every
// Config.PeerProbe, until stopped.
type peerProbe struct {
	node   Node
	down   atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}
}

// syncProbes starts a probe for each registered peer that has none and
// stops those of peers no longer registered (or whose address changed).
func (v *clusterView) syncProbes(ctx context.Context, reg []Node, self int32) {
	every := v.s.cfg.PeerProbe
	if every <= 0 {
		return
	}
	want := make(map[int32]Node, len(reg))
	for _, n := range reg {
		if n.ID != self && n.Addr != "" {
			want[n.ID] = n
		}
	}
	v.probeMu.Lock()
	defer v.probeMu.Unlock()
	for id, p := range v.probes {
		if n, ok := want[id]; !ok || n.Addr != p.node.Addr {
			p.cancel()
			delete(v.probes, id)
		}
	}
	for id, n := range want {
		if _, ok := v.probes[id]; ok {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		p := &peerProbe{node: n, cancel: cancel, done: make(chan struct{})}
		v.probes[id] = p
		go v.runProbe(pctx, p, every)
	}
}

func (v *clusterView) stopProbes() {
	v.probeMu.Lock()
	ps := v.probes
	v.probes = map[int32]*peerProbe{}
	v.probeMu.Unlock()
	for _, p := range ps {
		p.cancel()
		<-p.done
	}
}

func (v *clusterView) runProbe(ctx context.Context, p *peerProbe, every time.Duration) {
	defer close(p.done)
	// A dial that hangs (packets dropped) says nothing either way; it
	// must not hold the next probe for long.
	timeout := max(4*every, time.Second)
	for {
		dialed := time.Now()
		c, down, sure := probeConn(ctx, p.node.Addr, timeout)
		if sure && down != p.down.Load() {
			p.down.Store(down)
			if down {
				v.s.log.Warn("peer probed down: its listener refuses or drops connections",
					zap.Int32("node", p.node.ID), zap.String("addr", p.node.Addr))
				v.s.readyForTakeover()
			} else {
				v.s.log.Info("peer probed up again", zap.Int32("node", p.node.ID), zap.String("addr", p.node.Addr))
			}
			select {
			case v.poke <- struct{}{}:
			default:
			}
		}
		if c != nil {
			holdOpen(ctx, c, probeHold*every)
			c.Close()
		}
		// At most one dial an interval, however soon a held connection
		// closed.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(dialed.Add(every))):
		}
	}
}

// holdOpen returns when c closes (the peer closed it, or reset it), when
// the peer sends something, after hold, or when ctx ends.
func holdOpen(ctx context.Context, c net.Conn, hold time.Duration) {
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	c.SetReadDeadline(time.Now().Add(hold))
	var b [1]byte
	c.Read(b[:])
}

// probe connects to addr: down if the connection is refused (or reset),
// or accepted and closed within probeClosedWithin; up if it stays open;
// sure is false when the dial failed otherwise (timed out, a name that
// does not resolve, ctx ended).
func probe(ctx context.Context, addr string, timeout time.Duration) (down, sure bool) {
	c, down, sure := probeConn(ctx, addr, timeout)
	if c != nil {
		c.Close()
	}
	return down, sure
}

// probeConn is probe, returning also the connection while it stays open
// (up, and the peer sent nothing), for the caller to close.
func probeConn(ctx context.Context, addr string, timeout time.Duration) (_ net.Conn, down, sure bool) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
			return nil, true, true
		}
		// A timeout (packets dropped), a name that does not resolve:
		// nothing certain.
		return nil, false, false
	}
	c.SetReadDeadline(time.Now().Add(probeClosedWithin))
	var b [1]byte
	_, err = c.Read(b[:])
	var ne net.Error
	switch {
	case err == nil:
		c.Close()
		return nil, false, true // it spoke first; not a tenure node, but alive
	case errors.As(err, &ne) && ne.Timeout():
		return c, false, true
	}
	c.Close()
	return nil, true, true // closed (EOF, reset) at once
}
