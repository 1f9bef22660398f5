//go:build unix

package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one process of a run: started, killed with SIGKILL, paused with
// SIGSTOP and restarted with the same arguments ("{life}" in them becomes
// the number of the life, from 1), its output appended to one log file
// across its lives.
type proc struct {
	name string
	bin  string
	args []string
	log  string // output file
	// addr, if set, is where the process accepts connections once ready.
	addr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current life has exited
	paused  bool
	lives   int
	exitErr error
}

// start starts a new life of the process and waits up to timeout for it to
// accept connections on addr (if set).
func (p *proc) start(timeout time.Duration) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.lives++
	fmt.Fprintf(f, "==== chaos: life %d of %s starts at %s\n", p.lives, p.name, time.Now().Format(time.RFC3339Nano))
	args := make([]string, len(p.args))
	for i, a := range p.args {
		args[i] = strings.ReplaceAll(a, "{life}", strconv.Itoa(p.lives))
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		f.Close()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.paused = cmd, done, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	if p.addr == "" {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("chaos: %s exited while starting: %v (see %s)", p.name, p.exitErr, p.log)
		default:
		}
		if c, err := net.DialTimeout("tcp", p.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("chaos: %s does not accept connections on %s after %v (see %s)", p.name, p.addr, timeout, p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig to the current life, if it runs.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL, as kill -9 does, and waits for the exit.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop resumes the process if paused, sends SIGTERM and waits up to grace
// for the exit, then kills it. It reports whether the process exited on its
// own.
func (p *proc) stop(grace time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(grace):
		p.kill()
		return false
	}
}
