package workload

import (
	"context"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Pause simulates a stop-the-world pause of a worker process (a long
// garbage collection, a frozen virtual machine) from inside the process,
// so that a demo or a test can watch a zombie being fenced.
//
// While a pause is on:
//
//   - the connections made through [Pause.Dialer] or wrapped by
//     [Pause.Conn] carry nothing: writes wait, and what arrives is handed
//     to the reader only once the pause ends, as for a frozen process
//     whose kernel buffers the traffic. Give the member's client this
//     dialer and its heartbeats and commits stop reaching the coordinator;
//   - [Pause.Hold] blocks: a [Worker] calls it between the check of its
//     claim and the write that check allowed, so a write it had decided on
//     goes out right after the pause, under the token it held before.
//
// What it cannot freeze is code that does no I/O through those points: the
// member library's own clock keeps running, so it notices the missing
// heartbeats and cancels its claims during the pause, where a really
// frozen process would notice only after waking up. The work goroutines
// do not see those cancellations until the pause ends, and their pending
// writes go out either way, which is the case the fence must catch.
//
// The zero Pause is ready to use and not paused; a nil *Pause never
// pauses. A Pause is safe for concurrent use.
type Pause struct {
	mu     sync.Mutex
	resume chan struct{} // non-nil while paused; closed when the pause ends
	held   int           // calls of Hold that waited in the current pause
	armed  chan struct{} // non-nil while the next Hold is to begin a pause; closed when one begins
}

// Begin starts a pause; false if one is already on.
func (p *Pause) Begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.begin()
}

func (p *Pause) begin() bool {
	if p.resume != nil {
		return false
	}
	p.resume, p.held = make(chan struct{}), 0
	if p.armed != nil {
		close(p.armed)
		p.armed = nil
	}
	return true
}

// arm makes the next [Pause.Hold] begin a pause, and returns a channel
// closed once a pause has begun.
func (p *Pause) arm() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == nil {
		p.armed = make(chan struct{})
	}
	return p.armed
}

// disarm undoes arm; a pause that began meanwhile stays on.
func (p *Pause) disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = nil
}

// End ends the pause, releasing everything it held, and returns how many
// [Pause.Hold] calls it held: the writes that go out late. Ending no pause
// returns 0.
func (p *Pause) End() (held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		return 0
	}
	close(p.resume)
	p.resume = nil
	return p.held
}

// Paused reports whether a pause is on.
func (p *Pause) Paused() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resume != nil
}

// Hold blocks while a pause is on, and reports whether it did. Nothing
// interrupts it but the end of the pause: a frozen goroutine does not see
// its context either. A pause that [Pause.Run] armed begins here, so that
// it catches this write between its check and itself.
func (p *Pause) Hold() bool {
	return p.wait(nil, true)
}

// wait blocks while a pause is on or until stop is closed; true if it
// waited. counted marks the waits that End reports, the calls of Hold,
// which also begin an armed pause.
func (p *Pause) wait(stop <-chan struct{}, counted bool) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	if counted && p.armed != nil {
		p.begin()
	}
	resume := p.resume
	if resume != nil && counted {
		p.held++
	}
	p.mu.Unlock()
	if resume == nil {
		return false
	}
	select {
	case <-resume:
	case <-stop:
	}
	return true
}

// Run pauses for the given length at the first [Pause.Hold] after the
// given delay, logging both ends; it returns when the pause is over. The
// pause waits for a Hold so that it freezes a write decided before it,
// which goes out after it with the token held then: begun at a time
// instead, it could find every work goroutine in a commit, which the
// pause blocks and which fails once the claim is lost, and hold no
// write. If ctx ends first, it cuts the pause short (a process asked to
// stop should not wait out a demo's pause) and returns.
func (p *Pause) Run(ctx context.Context, after, length time.Duration, log *zap.Logger) {
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return
	}
	armed := p.arm()
	select {
	case <-armed:
	case <-ctx.Done():
		p.disarm()
		select {
		case <-armed: // a Hold began it meanwhile: cut short below
		default:
			return
		}
	}
	log.Warn("pause begins: no heartbeats, commits or writes until it ends", zap.Duration("length", length))
	t.Reset(length)
	select {
	case <-t.C:
		log.Warn("pause ends: writes decided before it go out now, with the tokens held then", zap.Int("held_writes", p.End()))
	case <-ctx.Done():
		log.Warn("pause cut short by shutdown", zap.Int("held_writes", p.End()))
	}
}

// Dialer wraps dial (a net.Dialer's DialContext if nil) so that every
// connection it makes is frozen by the pause, and no connection is made
// during one. Pass it to kgo.Dialer.
func (p *Pause) Dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		p.wait(ctx.Done(), false)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return p.Conn(c), nil
	}
}

// Conn wraps c so that the pause freezes it.
func (p *Pause) Conn(c net.Conn) net.Conn {
	return &pausedConn{Conn: c, p: p, closed: make(chan struct{})}
}

// pausedConn is a connection that carries nothing during a pause. Close
// releases its waits, so a client can be closed during a pause.
type pausedConn struct {
	net.Conn
	p         *Pause
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *pausedConn) Read(b []byte) (int, error) {
	c.p.wait(c.closed, false)
	n, err := c.Conn.Read(b)
	// What arrived during a pause is seen after it. The deadlines the
	// reader set do not cut this wait short: a frozen reader does not see
	// them expire either.
	c.p.wait(c.closed, false)
	return n, err
}

func (c *pausedConn) Write(b []byte) (int, error) {
	c.p.wait(c.closed, false)
	return c.Conn.Write(b)
}

func (c *pausedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
