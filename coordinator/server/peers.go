package server

import (
	"context"
	"errors"
	"io"
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
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if down, sure := probe(ctx, p.node.Addr, timeout); sure && down != p.down.Load() {
			p.down.Store(down)
			if down {
				v.s.log.Warn("peer probed down: its listener refuses or drops connections",
					zap.Int32("node", p.node.ID), zap.String("addr", p.node.Addr))
				v.s.collectBeforeTakeover()
			} else {
				v.s.log.Info("peer probed up again", zap.Int32("node", p.node.ID), zap.String("addr", p.node.Addr))
			}
			select {
			case v.poke <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe connects to addr: down if the connection is refused (or reset),
// or accepted and closed within probeClosedWithin; up if it stays open;
// sure is false when the dial failed otherwise (timed out, a name that
// does not resolve, ctx ended).
func probe(ctx context.Context, addr string, timeout time.Duration) (down, sure bool) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
			return true, true
		}
		// A timeout (packets dropped), a name that does not resolve:
		// nothing certain.
		return false, false
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(probeClosedWithin))
	var b [1]byte
	_, err = c.Read(b[:])
	var ne net.Error
	switch {
	case err == nil:
		return false, true // it spoke first; not a tenure node, but alive
	case errors.As(err, &ne) && ne.Timeout():
		return false, true
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return true, true
	}
	return true, true
}
