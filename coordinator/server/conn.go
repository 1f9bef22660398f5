package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// readBufferSize is each connection's read buffer. Frames that fit are
// decoded in place (one read syscall serves many pipelined requests);
// larger ones get their own buffer, grown as their bytes arrive.
const readBufferSize = 4096

// writeChunk is the most response bytes gathered before a write.
const writeChunk = 256 << 10

// maxKeptWriteBuffer is the largest write buffer a connection keeps
// between writes; a larger one (a big Metadata or JoinGroup response) is
// dropped after use so idle connections stay small.
const maxKeptWriteBuffer = 64 << 10

// conn is one client connection. Its reader goroutine reads, decodes and
// handles requests one at a time: requests answered on the spot
// (ApiVersions, Metadata, Heartbeat...) are written by the reader itself,
// in one write per batch of ready responses, except under TLS, where the
// reader leaves every write to the writer goroutine (the next request may
// wait in TLS's own buffer), and except a group's reply held until its
// group's store writes are durable (reply.go), which completes like a
// parked request. A request that parks (a
// JoinGroup waiting for the rebalance, a Fetch held for MaxWait) keeps its
// slot in the queue; the reader goes on reading, and responses after it
// wait. Whoever completes the slot at the head of the queue from another
// goroutine (a group's timer, another connection's request, a Fetch timer)
// kicks the connection's writer goroutine, which writes everything that is
// ready in order. The reader never writes while holding a group.
type conn struct {
	s    *Server
	nc   net.Conn  // the connection, TLS or not
	raw  net.Conn  // the TCP connection under nc (nc itself without TLS)
	ln   *listener // the listener it came in on
	br   *bufio.Reader
	addr string // remote address, for logs
	host string // remote host, the ClientHost of DescribeGroups

	// Reader-owned state.
	clientID     string
	readDeadline time.Time
	lastGroup    *groupEntry
	// viewGen is the last change of the HA set's view this connection
	// was told of by a Fetch answered NOT_LEADER_OR_FOLLOWER (view.go);
	// a new one starts at the current change (clusterView.connGen).
	viewGen atomic.Uint64
	// principal is who the connection acts as, in Kafka's form
	// ("User:alice"): AnonymousPrincipal until a TLS client certificate
	// or SASL authentication names someone. Authorization reads it.
	principal string
	auth      authState // authn.go
	quota     connQuota // request-rate quotas (quota.go)

	mu sync.Mutex
	// members are the group members whose latest requests this
	// connection carried (connloss.go); membersLost, once their groups
	// were told the connection closed. A list is held by its address,
	// so that adding to it costs one lookup in the map.
	members     map[*groupEntry]*trackedIDs
	membersLost bool
	// waiters are the requests waiting for a takeover, in arrival
	// order, and waitLooping says a goroutine steps them
	// (takeoverwait.go).
	waiters     []takeoverWaiter
	waitLooping bool

	q         []*slot // response queue; q[head:] are pending
	head      int
	free      []*slot
	writing   bool // a flusher owns the socket's write side, wbuf and batch
	closed    bool // dead: deliveries are dropped
	stopping  bool // the server is shutting down: the reader must stop
	waitSpace bool
	space     chan struct{} // wakes a reader waiting for queue space
	kick      chan struct{} // wakes the writer
	done      chan struct{} // closed when the reader has finished
	batch     []*slot
	wbuf      []byte
	writeDL   time.Time // current write deadline
	stopDL    time.Time // write deadline once stopping
}

func newConn(s *Server, nc, raw net.Conn, ln *listener) *conn {
	c := &conn{
		s:     s,
		nc:    nc,
		raw:   raw,
		ln:    ln,
		br:    bufio.NewReaderSize(nc, readBufferSize),
		addr:  nc.RemoteAddr().String(),
		space: make(chan struct{}, 1),
		kick:  make(chan struct{}, 1),
		done:  make(chan struct{}),

		principal: AnonymousPrincipal,
	}
	if s.view != nil {
		c.viewGen.Store(s.view.connGen(time.Now(), s.cfg.ViewSettle))
	}
	c.host = c.addr
	if h, _, err := net.SplitHostPort(c.addr); err == nil {
		c.host = h
	}
	return c
}

// AnonymousPrincipal is the principal of a connection nobody
// authenticated, as Kafka names it.
const AnonymousPrincipal = "User:ANONYMOUS"

// Reasons a connection closes, the label of tenure_connections_closed_total.
const (
	closeEOF      = "eof"
	closeIdle     = "idle"
	closeProtocol = "protocol"
	closeWrite    = "write"
	closeRead     = "read"
	closeShutdown = "shutdown"
)

// serve runs the reader; it returns once the connection is closed.
func (c *conn) serve() {
	if reason, err := c.startAuth(); reason != "" {
		c.finish(reason, err)
		return
	}
	reason, err := c.readLoop()
	c.s.quotas.release(&c.quota)
	c.finish(reason, err)
}

func (c *conn) readLoop() (string, error) {
	now := time.Now()
	for {
		if !c.waitThrottle() || !c.waitForSpace() {
			return c.stopReason(), nil
		}
		if !c.refreshReadDeadline(now) {
			return closeShutdown, nil
		}
		body, owned, err := c.readFrame()
		if err != nil {
			var ne net.Error
			switch {
			case c.isStopping():
				return closeShutdown, nil
			case c.authTimedOut():
				return closeAuthTimeout, errAuthTimeout
			case errors.Is(err, errNegativeSize), errors.Is(err, errFrameTooLarge):
				if errors.Is(err, errFrameTooLarge) {
					c.s.m.limits.WithLabelValues("frame_size").Inc()
				}
				return closeProtocol, err
			case errors.As(err, &ne) && ne.Timeout() && !owned:
				if c.pending() > 0 {
					// A parked request keeps the connection alive.
					now = time.Now()
					c.readDeadline = time.Time{}
					continue
				}
				return closeIdle, nil
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
				return closeEOF, nil
			case errors.Is(err, io.ErrUnexpectedEOF):
				return closeProtocol, errClosedMidFrame
			}
			return closeRead, err
		}
		now = time.Now()
		err = c.handleFrame(body, owned, now)
		if !owned {
			c.br.Discard(4 + len(body))
		}
		if err != nil {
			return closeReason(err), err
		}
		// A pipelining client's next request may already be here: answer
		// it too before writing, so both responses go out in one write.
		// Under TLS the read buffer holds one record at a time, and the
		// next may be waiting in TLS's own buffer: the writer writes,
		// batching what the reader answers meanwhile.
		if !c.hasBufferedFrame() {
			if c.nc != c.raw {
				c.kickWriter()
			} else {
				c.flush()
			}
		}
	}
}

// hasBufferedFrame reports whether a complete frame is already in the read
// buffer, so reading it cannot block.
func (c *conn) hasBufferedFrame() bool {
	n := c.br.Buffered()
	if n < 4 {
		return false
	}
	p, _ := c.br.Peek(4)
	size := int32(binary.BigEndian.Uint32(p))
	return size >= 0 && int(size) <= n-4
}

// readFrame returns the next frame's body. A frame that fits the read
// buffer is returned in place (owned false: valid until the caller
// discards it); a larger one is read into its own buffer (owned true).
// A timeout with owned false consumed nothing and may be retried.
func (c *conn) readFrame() (body []byte, owned bool, err error) {
	p, err := c.br.Peek(4)
	if err != nil {
		return nil, false, c.midFrame(err)
	}
	size := int32(binary.BigEndian.Uint32(p))
	switch {
	case size < 0:
		return nil, false, errNegativeSize
	case size > c.frameLimit():
		return nil, false, errFrameTooLarge
	}
	total := 4 + int(size)
	if total <= c.br.Size() {
		p, err := c.br.Peek(total)
		if err != nil {
			return nil, false, c.midFrame(err)
		}
		return p[4:], false, nil
	}
	c.br.Discard(4)
	body, err = readGrowing(c.br, int(size))
	return body, true, err
}

// midFrame turns an EOF after part of a frame into io.ErrUnexpectedEOF.
func (c *conn) midFrame(err error) error {
	if errors.Is(err, io.EOF) && c.br.Buffered() > 0 {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readGrowing reads exactly n bytes, growing its buffer as they arrive, so
// a client that announces a large frame and sends little costs little.
func readGrowing(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, 64<<10))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, min(n, 2*cap(buf))-len(buf))...)[:len(buf)]
		}
		m, err := r.Read(buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// refreshReadDeadline keeps the idle deadline between IdleTimeout and 9/8
// of it after the last request, resetting it only when it has run down
// below IdleTimeout, so the common path does not touch the runtime's
// timers. It reports false once the server is stopping.
func (c *conn) refreshReadDeadline(now time.Time) bool {
	idle := c.s.cfg.IdleTimeout
	if c.readDeadline.Sub(now) >= idle {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.readDeadline = now.Add(idle + idle/8)
	c.nc.SetReadDeadline(c.readDeadline)
	return true
}

// handleFrame decodes one request and handles it. An error closes the
// connection.
func (c *conn) handleFrame(body []byte, owned bool, now time.Time) error {
	if c.auth.raw && !c.auth.done {
		return c.handleRawSASL(body)
	}
	h, rest, err := parseHeader(body)
	if err != nil {
		return err
	}
	if err := checkHeader(h); err != nil {
		if err != errApiVersionsTooNew {
			return fmt.Errorf("%w: key %d (%s) version %d", err, h.Key, kmsg.NameForKey(h.Key), h.Version)
		}
		// KIP-511: answer v0 with our ApiVersions range so the client
		// retries at a version we serve; the body is not parsed.
		sl := c.newSlot(h)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = h.Version
		sl.req = req
		c.enqueue(sl)
		c.respond(sl, apiVersionsTooNew())
		return nil
	}
	if err := c.admit(h.Key); err != nil {
		return err
	}
	if !owned && !apis[h.Key].aliasFree {
		rest = append([]byte(nil), rest...)
	}
	c.setClientID(h)
	sl := c.newSlot(h)
	sl.start = now
	req := sl.request(h.Key)
	if err := decodeBody(req, h.Version, rest); err != nil {
		c.freeSlot(sl)
		return fmt.Errorf("%w: %s version %d", err, kmsg.NameForKey(h.Key), h.Version)
	}
	sl.req = req
	c.enqueue(sl)
	c.s.dispatch(c, sl, now)
	return c.afterAuthRequest()
}

func (c *conn) setClientID(h header) {
	if !h.HasClientID {
		c.clientID = ""
		return
	}
	if string(h.ClientID) != c.clientID {
		c.clientID = string(h.ClientID)
	}
}

// newSlot takes a slot for a request with header h.
func (c *conn) newSlot(h header) *slot {
	c.mu.Lock()
	var sl *slot
	if n := len(c.free); n > 0 {
		sl = c.free[n-1]
		c.free = c.free[:n-1]
	}
	c.mu.Unlock()
	if sl == nil {
		sl = &slot{c: c, seq: 1}
	}
	sl.corr, sl.key, sl.version = h.Corr, h.Key, h.Version
	return sl
}

func (c *conn) freeSlot(sl *slot) {
	c.mu.Lock()
	c.recycle(sl)
	c.mu.Unlock()
}

// recycle returns sl to the free list; c.mu must be held.
func (c *conn) recycle(sl *slot) {
	sl.state = slotFree
	sl.req, sl.resp, sl.timer, sl.held = nil, nil, nil, nil
	sl.seq++
	if len(c.free) < c.s.cfg.MaxInFlight {
		c.free = append(c.free, sl)
	}
}

// enqueue appends sl to the response queue.
func (c *conn) enqueue(sl *slot) {
	c.mu.Lock()
	sl.state = slotWaiting
	if len(c.q) == cap(c.q) && c.head > 0 {
		n := copy(c.q, c.q[c.head:])
		clear(c.q[n:])
		c.q, c.head = c.q[:n], 0
	}
	c.q = append(c.q, sl)
	c.mu.Unlock()
}

func (c *conn) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q) - c.head
}

func (c *conn) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

func (c *conn) stopReason() string {
	if c.isStopping() {
		return closeShutdown
	}
	return closeWrite
}

// waitForSpace blocks while the connection has MaxInFlight requests
// pending. It reports false if the connection closed or the server is
// stopping meanwhile.
func (c *conn) waitForSpace() bool {
	for {
		c.mu.Lock()
		if c.stopping || c.closed {
			c.mu.Unlock()
			return false
		}
		if len(c.q)-c.head < c.s.cfg.MaxInFlight {
			c.mu.Unlock()
			return true
		}
		c.waitSpace = true
		c.mu.Unlock()
		<-c.space
	}
}

// wakeReader unblocks a reader in waitForSpace; c.mu must be held.
func (c *conn) wakeReader() {
	if c.waitSpace {
		c.waitSpace = false
		select {
		case c.space <- struct{}{}:
		default:
		}
	}
}

// respond completes sl from the reader goroutine, which flushes after the
// request is handled.
func (c *conn) respond(sl *slot, resp kmsg.Response) {
	c.deliver(sl, resp, 0, false)
}

// deliver completes sl with resp. seq, if not zero, must match the slot's
// (a timer's delivery); kick wakes the writer when sl is at the head of the
// queue (a delivery from outside the connection's reader). It reports
// whether the response was taken: a late reply to a closed connection, or
// a second answer, is dropped.
func (c *conn) deliver(sl *slot, resp kmsg.Response, seq uint64, kick bool) bool {
	c.mu.Lock()
	if c.closed || sl.state != slotWaiting || (seq != 0 && sl.seq != seq) {
		c.mu.Unlock()
		return false
	}
	sl.resp, sl.state = resp, slotDone
	if sl.timer != nil {
		sl.timer.Stop()
		sl.timer = nil
	}
	atHead := c.head < len(c.q) && c.q[c.head] == sl
	// Read under c.mu: once it is released the writer may recycle sl
	// for the reader's next request.
	key, start := sl.key, sl.start
	c.mu.Unlock()
	c.s.m.observeHeartbeat(key, start)
	if kick && atHead {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// kickWriter wakes the writer goroutine.
func (c *conn) kickWriter() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// writeLoop is the writer goroutine: it flushes when kicked.
func (c *conn) writeLoop() {
	for {
		select {
		case <-c.kick:
			c.flush()
		case <-c.done:
			return
		}
	}
}

// flush writes every response ready at the head of the queue, in order,
// one write per batch. Only one goroutine flushes at a time; another that
// finds the socket busy returns at once, and the busy one picks up its
// responses before it lets go.
func (c *conn) flush() {
	c.mu.Lock()
	if c.writing || c.closed {
		c.mu.Unlock()
		return
	}
	c.writing = true
	for {
		batch := c.batch[:0]
		for c.head < len(c.q) && c.q[c.head].state == slotDone {
			batch = append(batch, c.q[c.head])
			c.q[c.head] = nil
			c.head++
		}
		if c.head == len(c.q) {
			c.q, c.head = c.q[:0], 0
		}
		if len(batch) == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.wakeReader()
		dl := c.nextWriteDeadline()
		c.mu.Unlock()

		if !dl.IsZero() {
			c.nc.SetWriteDeadline(dl)
		}
		buf := c.wbuf[:0]
		var err error
		for i, sl := range batch {
			buf = appendResponse(buf, sl.corr, sl.outgoing())
			c.s.m.countResponse(sl.resp)
			// Write once per batch, or once per writeChunk of a
			// batch of large responses, so the buffer stays small.
			if i == len(batch)-1 || len(buf) >= writeChunk {
				if _, err = c.nc.Write(buf); err != nil {
					break
				}
				buf = buf[:0]
			}
		}
		if cap(buf) > maxKeptWriteBuffer {
			buf = nil
		}
		c.wbuf = buf[:0]

		c.mu.Lock()
		for i, sl := range batch {
			c.recycle(sl)
			batch[i] = nil
		}
		c.batch = batch[:0]
		if err != nil {
			c.writing = false
			wasClosed := c.closed
			c.closeLocked()
			c.mu.Unlock()
			if !wasClosed {
				c.s.closedConn(c, closeWrite, err)
			}
			return
		}
	}
}

// nextWriteDeadline returns the write deadline to set before the next
// write, or zero to keep the current one: WriteTimeout from now, refreshed
// only when it has run below half, so the common path does not touch the
// runtime's timers; at shutdown, the shutdown deadline. c.mu must be held.
func (c *conn) nextWriteDeadline() time.Time {
	if c.stopping {
		if c.writeDL.Equal(c.stopDL) {
			return time.Time{}
		}
		c.writeDL = c.stopDL
		return c.writeDL
	}
	now := time.Now()
	if c.writeDL.Sub(now) >= c.s.cfg.WriteTimeout/2 {
		return time.Time{}
	}
	c.writeDL = now.Add(c.s.cfg.WriteTimeout)
	return c.writeDL
}

// closeLocked marks the connection dead and closes the socket; c.mu must
// be held. Parked Fetch timers stop; requests parked in groups stay there
// and their replies are dropped when they come.
func (c *conn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	for _, sl := range c.q[c.head:] {
		if sl.timer != nil {
			sl.timer.Stop()
			sl.timer = nil
		}
	}
	// The TCP connection, not TLS's: tls.Conn.Close writes a close_notify
	// alert, which waits for a writer blocked on a client that does not
	// read.
	c.raw.Close()
	c.wakeReader()
}

// stop asks the reader to stop because the server is shutting down.
func (c *conn) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	c.stopDL = time.Now().Add(c.s.cfg.ShutdownTimeout)
	c.nc.SetReadDeadline(time.Now())
	c.waitSpace = true
	c.wakeReader()
}

// finish runs when the reader stops. At shutdown it first answers every
// request still waiting (a held Fetch with the answer it is held with, a
// parked group request with COORDINATOR_NOT_AVAILABLE) and writes them out
// within ShutdownTimeout.
func (c *conn) finish(reason string, err error) {
	if reason == closeShutdown {
		type answer struct {
			sl   *slot
			resp kmsg.Response
		}
		c.mu.Lock()
		var waiting []answer
		for _, sl := range c.q[c.head:] {
			if sl.state == slotWaiting {
				resp := sl.held
				if resp == nil {
					resp = errorResponse(sl.req, shutdownCode)
				}
				waiting = append(waiting, answer{sl, resp})
			}
		}
		c.mu.Unlock()
		for _, w := range waiting {
			c.deliver(w.sl, w.resp, 0, false)
		}
		c.mu.Lock()
		deadline := c.stopDL
		c.mu.Unlock()
		for {
			c.flush()
			c.mu.Lock()
			idle := c.closed || (!c.writing && c.head == len(c.q))
			c.mu.Unlock()
			if idle || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	c.stopAuthTimer()
	if reason == closeProtocol || reason == closeAuth {
		// Answers to the valid requests before the bad one still go out
		// (the refusal of a failed authentication among them), after
		// what the writer goroutine may be writing.
		deadline := time.Now().Add(time.Second)
		for {
			c.flush()
			c.mu.Lock()
			busy := c.writing && !c.closed
			c.mu.Unlock()
			if !busy || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	c.mu.Lock()
	wasClosed := c.closed
	c.closeLocked()
	c.mu.Unlock()
	close(c.done)
	if !wasClosed {
		c.s.closedConn(c, reason, err)
	}
	c.s.connMembersLost(c, reason)
}

// logClosed logs a closed connection at a level fitting the reason.
func (c *conn) logClosed(log *zap.Logger, reason string, err error) {
	fields := []zap.Field{zap.String("remote", c.addr), zap.String("reason", reason)}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	switch reason {
	case closeEOF, closeShutdown:
		log.Debug("connection closed", fields...)
	case closeIdle:
		log.Info("connection closed", fields...)
	default:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			fields = append(fields, zap.String("hint", "client stopped reading or sending"))
		}
		log.Warn("connection closed", fields...)
	}
}
