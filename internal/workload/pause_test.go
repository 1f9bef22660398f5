package workload_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/workload"
)

// quiet is how long a test waits to see that something blocked stays
// blocked. A correct Pause never releases early, so a short wait cannot
// fail a correct implementation; it only bounds how likely a broken one
// is to slip through.
const quiet = 100 * time.Millisecond

// returns runs f in a goroutine and returns a channel closed when f has
// returned.
func returns(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	return done
}

func mustBlock(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s did not wait for the end of the pause", what)
	case <-time.After(quiet):
	}
}

func mustReturn(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still blocked after the pause ended", what)
	}
}

func TestPauseHold(t *testing.T) {
	var nilPause *workload.Pause
	if nilPause.Hold() || nilPause.Paused() {
		t.Fatal("a nil Pause paused")
	}
	var p workload.Pause
	if p.Hold() {
		t.Fatal("Hold waited with no pause on")
	}
	if p.End() != 0 {
		t.Fatal("End of no pause reported held calls")
	}
	if !p.Begin() || p.Begin() || !p.Paused() {
		t.Fatal("Begin: want true, then false while paused")
	}
	var held1, held2 bool
	done1 := returns(func() { held1 = p.Hold() })
	done2 := returns(func() { held2 = p.Hold() })
	mustBlock(t, done1, "Hold")
	if n := p.End(); n != 2 {
		t.Errorf("End reported %d held calls, want 2", n)
	}
	mustReturn(t, done1, "Hold")
	mustReturn(t, done2, "Hold")
	if !held1 || !held2 {
		t.Error("Hold did not report that it waited")
	}
	if p.Paused() || p.Hold() {
		t.Error("still paused after End")
	}
}

// echoServer accepts one connection on a loopback port and returns the
// server's end of it once dialled.
func listen(t *testing.T) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err == nil {
			ch <- c
		}
		close(ch)
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), ch
}

// TestPauseConn checks that a paused connection carries nothing: what the
// peer sends is read only after the pause, what is written leaves only
// after it, no connection is dialled during it, and Close releases a
// reader.
func TestPauseConn(t *testing.T) {
	var p workload.Pause
	dial := p.Dialer(nil)
	addr, accepted := listen(t)
	ctx := testenv.Context(t)
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	defer peer.Close()

	// Unpaused, bytes flow both ways.
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(peer, buf); err != nil || buf[0] != 'a' {
		t.Fatalf("peer read %q, %v", buf, err)
	}

	// A reader already waiting when the pause begins sees the peer's
	// bytes only after it.
	var got []byte
	read := returns(func() {
		b := make([]byte, 1)
		n, _ := c.Read(b)
		got = b[:n]
	})
	time.Sleep(quiet / 2) // let the reader block in the kernel
	p.Begin()
	if _, err := peer.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, read, "a read of bytes that arrived during the pause")

	// A write during the pause leaves after it.
	wrote := returns(func() { c.Write([]byte("c")) })
	mustBlock(t, wrote, "a write")
	peerRead := returns(func() { io.ReadFull(peer, buf) })
	mustBlock(t, peerRead, "the peer's read of a write made during the pause")

	// No dial during the pause, unless its context ends.
	dctx, cancel := context.WithTimeout(ctx, quiet)
	_, derr := dial(dctx, "tcp", addr)
	cancel()
	if !errors.Is(derr, context.DeadlineExceeded) {
		t.Errorf("dial during the pause: %v, want the context's deadline", derr)
	}

	p.End()
	mustReturn(t, read, "read")
	mustReturn(t, wrote, "write")
	mustReturn(t, peerRead, "peer read")
	if string(got) != "b" || buf[0] != 'c' {
		t.Errorf("after the pause: read %q, peer read %q; want b and c", got, buf)
	}

	// Closing a connection releases a reader held by a pause.
	p.Begin()
	defer p.End()
	blocked := returns(func() { c.Read(make([]byte, 1)) })
	peer.Write([]byte("d"))
	mustBlock(t, blocked, "read")
	c.Close()
	mustReturn(t, blocked, "a read of a closed connection")
}

// holdUntilHeld calls Hold until a pause holds it, as a work goroutine
// does at each write, and returns once that pause has ended.
func holdUntilHeld(t *testing.T, p *workload.Pause) {
	deadline := time.Now().Add(5 * time.Second)
	for !p.Hold() {
		if time.Now().After(deadline) {
			t.Error("no pause held a Hold within 5s")
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPauseRun checks that Run begins its pause at the first Hold after
// its delay, not at the delay's end: a pause that began while every work
// goroutine was elsewhere (in a commit, which it blocks) would hold no
// write, and show no zombie write being fenced.
func TestPauseRun(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	var p workload.Pause
	done := returns(func() { p.Run(context.Background(), 0, quiet, zap.New(core)) })
	mustBlock(t, done, "Run with no write to hold")
	if p.Paused() {
		t.Fatal("the pause began before a write reached it")
	}
	holdUntilHeld(t, &p)
	mustReturn(t, done, "Run")
	entries := logs.All()
	if len(entries) != 2 || entries[0].Message != "pause begins: no heartbeats, commits or writes until it ends" ||
		entries[1].ContextMap()["held_writes"] != int64(1) {
		t.Fatalf("logs %+v, want the beginning and the end with one held write", entries)
	}

	// A shutdown before any write came leaves no pause behind.
	ctx, cancel := context.WithCancel(context.Background())
	core, logs = observer.New(zap.InfoLevel)
	done = returns(func() { p.Run(ctx, 0, time.Hour, zap.New(core)) })
	mustBlock(t, done, "Run with no write to hold")
	cancel()
	mustReturn(t, done, "Run after its context ended")
	var heldAfter bool
	mustReturn(t, returns(func() { heldAfter = p.Hold() }), "a Hold after Run returned")
	if heldAfter || p.Paused() || logs.Len() != 0 {
		t.Fatalf("a pause after Run returned, or logs %+v", logs.All())
	}

	// A shutdown cuts the pause short.
	ctx, cancel = context.WithCancel(context.Background())
	core, logs = observer.New(zap.InfoLevel)
	done = returns(func() { p.Run(ctx, 0, time.Hour, zap.New(core)) })
	held := returns(func() { holdUntilHeld(t, &p) })
	testenv.Eventually(t, 5*time.Second, "the pause to begin", p.Paused)
	mustBlock(t, held, "Hold")
	cancel()
	mustReturn(t, done, "Run after its context ended")
	mustReturn(t, held, "Hold")
	if p.Paused() || logs.FilterMessage("pause cut short by shutdown").FilterField(zap.Int("held_writes", 1)).Len() != 1 {
		t.Fatalf("still paused, or logs %+v", logs.All())
	}
}
