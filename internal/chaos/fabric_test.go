//go:build unix

package chaos

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line with itself until the test ends.
func echoServer(t *testing.T) string {
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
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr on a new connection and reports
// whether it came back within the timeout, and the error if not.
func roundTrip(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo returned " + line)
	}
	return nil
}

func TestFabricFaults(t *testing.T) {
	f := newFabric()
	defer f.close()
	up := echoServer(t)
	wn, err := f.add("w0", "n0", up)
	if err != nil {
		t.Fatal(err)
	}
	w1, err := f.add("w1", "n0", up)
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(wn, time.Second); err != nil {
		t.Fatalf("through a clean link: %v", err)
	}
	blackHole := []toxic{{Type: "timeout", Stream: "upstream", Attributes: map[string]int{"timeout": 0}}, {Type: "timeout", Stream: "downstream", Attributes: map[string]int{"timeout": 0}}}
	links, err := f.inject("f1", func(from, to string) bool { return from == "w0" }, blackHole...)
	if err != nil || len(links) != 1 || links[0] != "w0>n0" {
		t.Fatalf("inject on w0's links: %v, %v", links, err)
	}
	if err := roundTrip(wn, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a black hole: %v, want a timeout", err)
	}
	if err := roundTrip(w1, time.Second); err != nil {
		t.Fatalf("another client's link to the same server: %v", err)
	}
	f.heal("f1")
	if err := roundTrip(wn, time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	// One way: what the client sends arrives, nothing comes back.
	if _, err := f.inject("f2", func(from, to string) bool { return from == "w0" }, toxic{Type: "timeout", Stream: "downstream", Attributes: map[string]int{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(wn, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a one-way cut: %v, want a timeout", err)
	}
	f.heal("f2")
	// Resets: a connection that carries data is reset.
	if _, err := f.inject("f3", func(from, to string) bool { return to == "n0" }, toxic{Type: "reset_peer", Stream: "upstream", Attributes: map[string]int{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{wn, w1} {
		if err := roundTrip(addr, time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("through a reset: %v, want the connection reset or closed", err)
		}
	}
	f.healAll()
	if err := roundTrip(w1, time.Second); err != nil {
		t.Fatalf("after healing everything: %v", err)
	}
}
