package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wire is one pipelined Kafka connection of the fleet to one node, lighter
// than a kgo client's for a load generator: requests are encoded with
// kmsg into a buffer that a writer goroutine sends when flushed, one
// system call for all that queued meanwhile, and a reader decodes the responses
// from a buffered reader, in request order (the server answers in
// order), handing each to its request's callback. A broken connection
// fails every request in flight; the next send dials again, unless a
// dial failed less than wireRedial ago.
type wire struct {
	addr    string
	timeout time.Duration // of a dial, and of a response once its request is sent
	format  *kmsg.RequestFormatter

	mu        sync.Mutex
	conn      *wireConn // nil while none is up
	downUntil time.Time
	scratch   []byte
}

// wireRedial spaces dials to a node that refused one: a dead node's
// groups are tried by thousands of members.
const wireRedial = 100 * time.Millisecond

var (
	errWireDown   = errors.New("e2e: the node refused a connection a moment ago")
	errWireClosed = errors.New("e2e: connection closed")
)

type wireConn struct {
	w    *wire
	nc   net.Conn
	kick chan struct{} // something to write
	done chan struct{} // closed when the connection fails

	// Under w.mu:
	buf     []byte     // encoded requests not written yet
	pending []inflight // sent or queued, not answered, in order
	corr    int32
	dead    bool
}

type inflight struct {
	corr int32
	resp kmsg.Response
	done func(kmsg.Response, error)
}

func newWire(addr string, timeout time.Duration) *wire {
	return &wire{addr: addr, timeout: timeout, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID("tenure-e2e"))}
}

// send queues req, to be written at the next flush; done is called with
// its response or the connection's failure, on the reader's goroutine.
// req is encoded before send returns, so the caller may reuse it. An
// error means req was not queued (and done will not be called).
func (w *wire) send(req kmsg.Request, done func(kmsg.Response, error)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.conn
	if c == nil {
		if time.Now().Before(w.downUntil) {
			return errWireDown
		}
		nc, err := net.DialTimeout("tcp", w.addr, w.timeout)
		if err != nil {
			w.downUntil = time.Now().Add(wireRedial)
			return err
		}
		c = &wireConn{w: w, nc: nc, kick: make(chan struct{}, 1), done: make(chan struct{})}
		w.conn = c
		go c.write()
		go c.read()
	}
	c.corr++
	// AppendRequest writes the frame's size at the start of the slice it
	// is given: a frame of its own, then copied.
	w.scratch = w.format.AppendRequest(w.scratch[:0], req, c.corr)
	c.buf = append(c.buf, w.scratch...)
	c.pending = append(c.pending, inflight{corr: c.corr, resp: req.ResponseKind(), done: done})
	return nil
}

// up reports whether a connection is up: a send then queues on it,
// rather than dialing or failing at once.
func (w *wire) up() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn != nil
}

// flush has the requests queued so far written, in one write.
func (w *wire) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		select {
		case w.conn.kick <- struct{}{}:
		default:
		}
	}
}

// close fails the connection, if one is up.
func (w *wire) close() {
	w.mu.Lock()
	c := w.conn
	w.mu.Unlock()
	if c != nil {
		c.fail(errWireClosed)
	}
}

func (c *wireConn) write() {
	var spare []byte
	for {
		select {
		case <-c.done:
			return
		case <-c.kick:
		}
		c.w.mu.Lock()
		b := c.buf
		c.buf = spare[:0]
		c.w.mu.Unlock()
		if len(b) == 0 {
			spare = b
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.w.timeout))
		if _, err := c.nc.Write(b); err != nil {
			c.fail(err)
			return
		}
		spare = b
	}
}

func (c *wireConn) read() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var size [4]byte
	var body []byte
	for {
		// An answer is due within the timeout of its request; an idle
		// connection just waits.
		if br.Buffered() == 0 {
			c.nc.SetReadDeadline(time.Now().Add(c.w.timeout))
		}
		n, err := io.ReadFull(br, size[:])
		if err != nil {
			if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && c.idle() {
				continue
			}
			c.fail(err)
			return
		}
		// ReadFrom copies what it keeps: the buffer is reused.
		if n := int(binary.BigEndian.Uint32(size[:])); cap(body) < n {
			body = make([]byte, n)
		} else {
			body = body[:n]
		}
		if _, err := io.ReadFull(br, body); err != nil {
			c.fail(err)
			return
		}
		c.w.mu.Lock()
		if len(c.pending) == 0 {
			c.w.mu.Unlock()
			c.fail(errors.New("e2e: a response to no request"))
			return
		}
		p := c.pending[0]
		c.pending = c.pending[1:]
		c.w.mu.Unlock()
		r := kbin.Reader{Src: body}
		if corr := r.Int32(); corr != p.corr {
			c.fail(fmt.Errorf("e2e: response %d to request %d", corr, p.corr))
			p.done(nil, errWireClosed)
			return
		}
		if p.resp.IsFlexible() {
			kmsg.SkipTags(&r)
		}
		p.done(p.resp, p.resp.ReadFrom(r.Src))
	}
}

func (c *wireConn) idle() bool {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return len(c.pending) == 0
}

// fail closes the connection and fails every request in flight on it.
func (c *wireConn) fail(err error) {
	c.w.mu.Lock()
	if c.dead {
		c.w.mu.Unlock()
		return
	}
	c.dead = true
	if c.w.conn == c {
		c.w.conn = nil
	}
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.w.mu.Unlock()
	c.nc.Close()
	for _, p := range pending {
		p.done(nil, err)
	}
}
