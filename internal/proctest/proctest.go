// Package proctest runs the programs tenure's tests use as real child
// processes: built with the go command, started on free loopback ports,
// stopped, paused or killed with SIGKILL. It is for tests only.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds the named packages of the module (or any main package the
// module requires, such as the etcd server's) with the go command into a
// directory that lives as long as tb, and returns the path of each binary,
// in order. A binary is named after its package's last path element that
// is not a major version ("go.etcd.io/etcd/server/v3" builds "server").
func Build(tb testing.TB, pkgs ...string) []string {
	tb.Helper()
	dir := tb.TempDir()
	var bins []string
	for _, pkg := range pkgs {
		out, err := BuildInto(dir, pkg)
		if err != nil {
			tb.Fatal(err)
		}
		bins = append(bins, out)
	}
	return bins
}

// BuildInto builds pkg as Build does, into dir, and returns the binary's
// path. For binaries that outlive one test, such as those that a
// package's parallel tests share.
func BuildInto(dir, pkg string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building test binaries needs the go command: %w", err)
	}
	name := path.Base(pkg)
	if len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = path.Base(path.Dir(pkg))
	}
	out := filepath.Join(dir, name)
	if b, err := exec.Command(goBin, "build", "-o", out, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// Process is a child process of a test: a server whose output is kept for
// the test's failure message, and which can be killed without warning.
type Process struct {
	Name string
	// Addr is the loopback address the process was given ({addr} in its
	// arguments), or for StartServe the address its listener bound.
	Addr string
	// Listeners and HTTP are the addresses a StartServe process bound:
	// each Kafka listener's by name, and the status page's.
	Listeners map[string]string
	HTTP      string

	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result, once done
}

// Start starts bin with args, replacing "{addr}" in them with a free
// loopback address, and waits until the process accepts connections on it.
// A port taken between the check and the use is retried. The process is
// stopped (SIGTERM, then SIGKILL) when tb ends, and its output logged if
// tb failed.
func Start(tb testing.TB, name, bin string, args ...string) *Process {
	tb.Helper()
	var lastErr error
	for range 3 {
		addr, err := FreeAddr()
		if err != nil {
			tb.Fatal(err)
		}
		p, err := StartOn(name, addr, bin, args...)
		if err == nil {
			tb.Cleanup(func() {
				p.Stop()
				if tb.Failed() {
					tb.Logf("output of %s:\n%s", name, p.Output())
				}
			})
			return p
		}
		lastErr = err
	}
	tb.Fatalf("start %s: %v", name, lastErr)
	return nil
}

// StartOn starts bin as Start does, on a given address, and waits up to
// 60 s for it to accept connections there. The caller stops it.
func StartOn(name, addr, bin string, args ...string) (*Process, error) {
	full := make([]string, len(args))
	for i, a := range args {
		full[i] = strings.ReplaceAll(a, "{addr}", addr)
	}
	p, err := spawn(name, bin, full)
	if err != nil {
		return nil, err
	}
	p.Addr = addr
	if err := p.waitReady("does not accept connections on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// StartUntil starts bin with args and waits up to 60 s until ready
// accepts what the process wrote so far; a process that binds its ports
// itself (port 0) and logs them leaves no window between picking a port
// and binding it, which Start's FreeAddr does: another process, or an
// outgoing connection's local port, can take a port FreeAddr returned
// before the child binds it. The caller stops the process.
func StartUntil(name, bin string, ready func(output string) bool, args ...string) (*Process, error) {
	p, err := spawn(name, bin, args)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady("not ready within 60 s", func() bool { return ready(p.out.String()) }); err != nil {
		return nil, err
	}
	return p, nil
}

// spawn starts bin with args, its output captured.
func spawn(name, bin string, args []string) (*Process, error) {
	p := &Process{Name: name, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready for up to 60 s; it kills the process when the
// time is up, and reports why it is not ready (notReady) or how it exited.
func (p *Process) waitReady(notReady string, ready func() bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v\n%s", p.Name, p.err, p.out)
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("%s %s\n%s", p.Name, notReady, p.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// FreeAddr returns a loopback address with a port nobody listens on.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Pid returns the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPU returns the user and system CPU time the process has used so far,
// from /proc/<pid>/stat (Linux only), at the kernel's resolution of 10 ms.
// It fails once the process has exited.
func (p *Process) CPU() (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("%s CPU: %w", p.Name, err)
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis: utime and stime are the
	// 14th and 15th fields, the 12th and 13th after it.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("%s CPU: cannot parse %q", p.Name, s)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s CPU: cannot parse %q", p.Name, s)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// Output returns what the process wrote so far (its first MiB).
func (p *Process) Output() string { return p.out.String() }

// Kill sends SIGKILL, as `kill -9` does, and waits for the exit.
func (p *Process) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Signal sends sig (SIGSTOP and SIGCONT pause and resume the process).
// A SIGSTOP stops the process some time after Signal returns; Pause
// waits for it.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Pause sends SIGSTOP and returns once every thread of the process has
// stopped (Linux only: it reads /proc/<pid>/task). kill(2) returns once
// the signal is queued: the thread that takes it must be scheduled to
// start the stop, and until then the others run on. On a loaded machine
// that took up to 90 ms here, long enough for a request sent to the
// "paused" process to be read and answered by it.
func (p *Process) Pause() error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		stopped, err := p.stopped()
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not stopped 10 s after SIGSTOP", p.Name)
		}
		time.Sleep(time.Millisecond)
	}
}

// stopped reports whether every thread of the process is stopped: state
// T (or t, stopped under a tracer) in /proc/<pid>/task/<tid>/stat.
func (p *Process) stopped() (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("%s threads: %w", p.Name, err)
	}
	for _, task := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread exited
		}
		// The state is the first field after the command name, which
		// may hold spaces and parentheses: read from the last ')'.
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return false, fmt.Errorf("%s threads: cannot parse %q", p.Name, s)
		}
		switch s[i+2] {
		case 'T', 't':
		case 'Z', 'X':
			return false, fmt.Errorf("%s exited", p.Name)
		default:
			return false, nil
		}
	}
	return true, nil
}

// Stop sends SIGTERM and waits for the exit, with SIGKILL after 10 s.
func (p *Process) Stop() { p.StopWithin(10 * time.Second) }

// StopWithin sends SIGTERM and waits for the exit, with SIGKILL after d:
// for a process whose graceful stop takes longer than Stop allows and
// whose exit path matters (a CPU profile is written as it returns).
func (p *Process) StopWithin(d time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot exit
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		p.Kill()
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // keep the first MiB
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
