package proctest

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with its name and the line.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					io.WriteString(c, name+":"+sc.Text()+"\n")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ask sends a line through addr and returns the answer, or "" with the
// error if the connection was closed without one.
func ask(t *testing.T, addr, line string) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func TestRelay(t *testing.T) {
	r, err := NewRelay()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := r.Addr()

	a, b := echoServer(t, "a"), echoServer(t, "b")
	// Not pointed yet: the connection waits, as in a listener's backlog,
	// and is served once the relay is pointed.
	early, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	early.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(early, "x\n")
	time.Sleep(50 * time.Millisecond)
	r.Point(a)
	if got, err := bufio.NewReader(early).ReadString('\n'); err != nil || got != "a:x\n" {
		t.Fatalf("a connection accepted before Point: %q, %v", got, err)
	}
	if got, err := ask(t, addr, "1"); err != nil || got != "a:1" {
		t.Fatalf("pointed at a: %q, %v", got, err)
	}
	// A long-lived connection keeps its target across a re-point, and
	// new connections go to the new one, on the same address.
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	held.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(held, "0\n")
	br := bufio.NewReader(held)
	// The target is read when the relay dials, after the accept: one
	// round trip makes sure it has.
	if got, err := br.ReadString('\n'); err != nil || got != "a:0\n" {
		t.Fatalf("held connection: %q, %v", got, err)
	}
	r.Point(b)
	if got, err := ask(t, addr, "2"); err != nil || got != "b:2" {
		t.Fatalf("re-pointed at b: %q, %v", got, err)
	}
	if r.Addr() != addr {
		t.Fatalf("address moved from %s to %s", addr, r.Addr())
	}
	io.WriteString(held, "3\n")
	if got, err := br.ReadString('\n'); err != nil || got != "a:3\n" {
		t.Fatalf("held connection: %q, %v", got, err)
	}

	// A target that refuses: accepted and closed.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	r.Point(deadAddr)
	if got, err := ask(t, addr, "4"); err == nil {
		t.Fatalf("relay to a refusing target answered %q", got)
	}

	// Close ends the connections it relays.
	r.Close()
	if _, err := br.ReadString('\n'); err == nil {
		t.Fatal("a relayed connection outlived Close")
	}
}
