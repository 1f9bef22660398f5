package proctest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Relay forwards every connection it accepts to a target set after it has
// bound its own port, without binding again. A test that must advertise an
// address before the process behind it has bound one (port 0, read from
// its log) puts a relay between the two: the address clients dial is
// bound once and held. toxiproxy's Proxy.Update cannot do this: a new
// upstream stops the proxy, closing its listener, and starts it again on
// the same port, and in that window a port-0 bind or an outgoing
// connection anywhere on the machine may take the port ("bind: address
// already in use"), after which the advertised address is lost.
//
// A connection accepted before the first Point waits for it, as one that
// a listener's backlog holds until the server accepts: a peer that dials a
// node which registered but has not logged its port yet must not find it
// down (the set's peer probe would count a departure). A target that
// refuses closes the accepted connection at once.
type Relay struct {
	ln      net.Listener
	target  atomic.Pointer[string]
	pointed chan struct{}
	once    sync.Once
	done    chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewRelay binds 127.0.0.1:0 and serves until Close.
func NewRelay() (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, conns: map[net.Conn]struct{}{}, pointed: make(chan struct{}), done: make(chan struct{})}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the relay's own bound address.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Point sends the connections accepted from now on to target.
func (r *Relay) Point(target string) {
	r.target.Store(&target)
	r.once.Do(func() { close(r.pointed) })
}

// Close stops accepting and closes every relayed connection.
func (r *Relay) Close() {
	r.mu.Lock()
	if !r.closed {
		close(r.done)
	}
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.relay(c)
	}
}

// track registers c, or closes it if the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

func (r *Relay) relay(c net.Conn) {
	defer r.wg.Done()
	if !r.track(c) {
		return
	}
	defer r.untrack(c)
	select {
	case <-r.pointed:
	case <-r.done:
		return
	}
	t := r.target.Load()
	up, err := net.Dial("tcp", *t)
	if err != nil {
		return
	}
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	// Either side ending ends both: the deferred untracks close them, and
	// the other copy returns.
	<-done
	c.Close()
	up.Close()
	<-done
}
