package server

import (
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSetKeepAlive checks the socket options a KeepAlive of 5 s sets on an
// accepted connection: probes after 1 s, every 1 s, 4 of them, and a 5 s
// user timeout; and that 0 leaves the connection as accepted.
func TestSetKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accept := func() *net.TCPConn {
		t.Helper()
		cc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sc.Close() })
		return sc.(*net.TCPConn)
	}
	opts := func(tc *net.TCPConn) map[string]int {
		t.Helper()
		rc, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, o := range []struct {
			name       string
			level, opt int
		}{
			{"keepalive", unix.SOL_SOCKET, unix.SO_KEEPALIVE},
			{"idle", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			{"interval", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
			{"count", unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
			{"user-timeout-ms", unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
		} {
			var v int
			var gerr error
			if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), o.level, o.opt) }); err != nil {
				t.Fatal(err)
			}
			if gerr != nil {
				t.Fatalf("getsockopt %s: %v", o.name, gerr)
			}
			out[o.name] = v
		}
		return out
	}

	on := accept()
	if err := setKeepAlive(on, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"keepalive": 1, "idle": 1, "interval": 1, "count": 4, "user-timeout-ms": 5000}
	if got := opts(on); !maps.Equal(got, want) {
		t.Errorf("KeepAlive 5s: got %v, want %v", got, want)
	}

	off := accept()
	before := opts(off)
	if err := setKeepAlive(off, 0); err != nil {
		t.Fatal(err)
	}
	if got := opts(off); !maps.Equal(got, before) {
		t.Errorf("KeepAlive 0 changed the options: %v, was %v", got, before)
	}
	if before["user-timeout-ms"] != 0 {
		t.Errorf("an accepted connection has a user timeout of %d ms before any is set", before["user-timeout-ms"])
	}
}

// TestKeepAliveDeadHost checks with the kernel's own TCP what KeepAlive is
// for: a connection whose peer's host goes silent (the loopback interface
// of a private network namespace taken down: no FIN, no reset, nothing) ends
// about KeepAlive after the peer was last heard, while a connection whose
// peer is alive but silent (a paused process: its kernel still answers the
// probes) stays open. It runs itself again in a new network namespace, so
// it needs root and unshare(1); it skips without them.
func TestKeepAliveDeadHost(t *testing.T) {
	if os.Getenv("TENURE_TEST_NETNS") != "1" {
		unshare, err := exec.LookPath("unshare")
		if err != nil || os.Geteuid() != 0 {
			t.Skip("needs root and unshare(1) for a private network namespace")
		}
		if _, err := exec.LookPath("ip"); err != nil {
			t.Skip("needs ip(8)")
		}
		cmd := exec.Command(unshare, "-n", os.Args[0], "-test.run", "^TestKeepAliveDeadHost$", "-test.v")
		cmd.Env = append(os.Environ(), "TENURE_TEST_NETNS=1")
		out, err := cmd.CombinedOutput()
		if err != nil && strings.Contains(string(out), "unshare failed") {
			t.Skipf("no network namespace: %s", out)
		}
		t.Logf("in a new network namespace:\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("link", "set", "lo", "up")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if err := setKeepAlive(s, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		// A request and its response, as a heartbeat; then silence.
		buf := make([]byte, 2)
		if _, err := c.Write([]byte("hb")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte("ok")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	ended := func(s net.Conn, within time.Duration) (time.Duration, error) {
		start := time.Now()
		_ = s.SetReadDeadline(start.Add(within))
		_, err := s.Read(make([]byte, 1))
		return time.Since(start), err
	}

	// Alive but silent: the client's kernel answers every probe.
	c1, s1 := pair()
	defer c1.Close()
	defer s1.Close()
	if d, err := ended(s1, 5*time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection of a live, silent peer ended after %v: %v", d, err)
	}

	// The peer's host goes silent.
	c2, s2 := pair()
	defer c2.Close()
	defer s2.Close()
	last := time.Now()
	ip("link", "set", "lo", "down")
	_, err = ended(s2, 20*time.Second)
	d := time.Since(last)
	if !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("the connection of a dead peer ended after %v with %v, want a timeout", d, err)
	}
	t.Logf("dead peer's connection ended %v after it was last heard (keepalive 3s)", d.Round(10*time.Millisecond))
	if d < 2*time.Second || d > 6*time.Second {
		t.Errorf("ended %v after the peer was last heard, want about 3s", d)
	}
}
