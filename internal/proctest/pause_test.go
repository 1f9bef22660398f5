package proctest

import (
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestPauseStopsEveryThread pauses a process whose goroutines spin on
// every thread: when Pause returns, each thread is stopped (right after
// kill(2) returned, two of four usually still ran) and the process uses
// no more CPU.
func TestPauseStopsEveryThread(t *testing.T) {
	if os.Getenv("PROCTEST_SPIN") != "" {
		var spins atomic.Int64
		for range 4 {
			go func() {
				for {
					spins.Add(1)
				}
			}()
		}
		select {}
	}
	t.Setenv("PROCTEST_SPIN", "1")
	p, err := spawn("spinner", os.Args[0], []string{"-test.run=^TestPauseStopsEveryThread$"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	time.Sleep(200 * time.Millisecond) // its threads start and spin
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if stopped, err := p.stopped(); err != nil || !stopped {
		t.Fatalf("a thread still runs after Pause returned (err %v)", err)
	}
	before, err := p.CPU()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if after, err := p.CPU(); err != nil || after != before {
		t.Fatalf("paused, the process used CPU: %v, then %v (err %v)", before, after, err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// TestPauseExited fails on a process that has exited rather than wait.
func TestPauseExited(t *testing.T) {
	p, err := spawn("true", "true", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if err := p.Pause(); err == nil {
		t.Fatal("Pause of an exited process succeeded")
	}
}
