package server

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// probePeer is a peer's listener for a probe: it counts the connections
// it accepts and keeps them open, as a live tenure node keeps a
// connection that sent nothing yet.
type probePeer struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
}

func listenProbePeer(t *testing.T, addr string) *probePeer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &probePeer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
		}
	}()
	return p
}

// die closes the listener and every connection, as a peer's kernel does
// when the peer is killed.
func (p *probePeer) die() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestProbeHoldsConnection: a probe of a live peer holds the connection
// it dialed, so that it dials about once every probeHold intervals
// instead of every interval; when the peer dies, the held connection's
// closing makes the probe dial again at the next interval and find it
// down; once the peer listens again, up.
func TestProbeHoldsConnection(t *testing.T) {
	peer := listenProbePeer(t, "127.0.0.1:0")
	addr := peer.ln.Addr().String()
	v := &clusterView{s: &Server{log: zap.NewNop()}, poke: make(chan struct{}, 1)}
	every := 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	p := &peerProbe{node: Node{ID: 1, Addr: addr}, cancel: cancel, done: make(chan struct{})}
	go v.runProbe(ctx, p, every)
	defer func() { cancel(); <-p.done }()

	start := time.Now()
	time.Sleep(40 * every)
	elapsed := time.Since(start)
	// A dial every interval would be 40; held, one every probeHold
	// intervals, so 5 and the first (a loaded machine dials fewer).
	if n, most := peer.accepted.Load(), int64(elapsed/(probeHold*every))+2; n < 1 || n > most {
		t.Fatalf("%d dials in %v of probing every %v, want 1 to %d", n, elapsed.Round(time.Millisecond), every, most)
	}
	if p.down.Load() {
		t.Fatal("a live peer probed down")
	}
	peer.die()
	eventually(t, 5*time.Second, "the dead peer to be probed down", func() bool { return p.down.Load() })
	select {
	case <-v.poke:
	default:
		t.Fatal("the view was not poked when the peer went down")
	}
	again := listenProbePeer(t, addr)
	defer again.die()
	eventually(t, 5*time.Second, "the peer to be probed up again", func() bool { return !p.down.Load() })
}
