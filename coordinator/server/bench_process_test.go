package server

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The process benchmarks run each server as a child process of the
// benchmark, so that the server's CPU can be read from /proc and the
// load generator (this process) does not share its runtime.
var (
	benchWindow = flag.Duration("tenure.window", time.Second,
		"length of each measured load phase of the process benchmarks")
	benchProfileDir = flag.String("tenure.profiledir", "",
		"if set, each server process of the heartbeat benchmarks writes a CPU profile here (<server>-<protocol>.pprof); "+
			"tenure then runs as internal/tenureprof, the same server with a profile")
)

// serverBinaries are the three servers the heartbeat benchmarks compare.
type serverBinaries struct {
	tenure, tenureprof, nologic, kfake string
}

// buildServers builds tenure, the no-logic server and the kfake server
// into a temporary directory of b.
func buildServers(b *testing.B) serverBinaries {
	b.Helper()
	dir := b.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("the process benchmarks build their servers with the go command: %v", err)
	}
	const mod = "github.com/tenure-dev/tenure/"
	cmd := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator),
		mod+"cmd/tenure", mod+"coordinator/server/internal/tenureprof",
		mod+"coordinator/server/internal/nologic", mod+"coordinator/server/internal/kfakeserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return serverBinaries{
		tenure:     filepath.Join(dir, "tenure"),
		tenureprof: filepath.Join(dir, "tenureprof"),
		nologic:    filepath.Join(dir, "nologic"),
		kfake:      filepath.Join(dir, "kfakeserver"),
	}
}

// serverProcess is a running server child process.
type serverProcess struct {
	name string
	addr string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, once done
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

// startProcess starts bin with args on a free loopback port (args
// containing "{addr}" get it) and waits until it accepts connections. It
// is stopped with SIGTERM when the benchmark ends.
func startProcess(b *testing.B, name, bin string, args ...string) *serverProcess {
	b.Helper()
	var lastErr error
	for range 3 { // the free port may be taken between check and use
		p, err := tryStartProcess(name, bin, args)
		if err == nil {
			b.Cleanup(p.stop)
			return p
		}
		lastErr = err
	}
	b.Fatalf("start %s: %v", name, lastErr)
	return nil
}

func tryStartProcess(name, bin string, args []string) (*serverProcess, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	full := make([]string, len(args))
	for i, a := range args {
		full[i] = strings.ReplaceAll(a, "{addr}", addr)
	}
	p := &serverProcess{name: name, addr: addr, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, full...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited: %v\n%s", name, p.err, p.out)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s does not accept connections on %s\n%s", name, addr, p.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 10 s).
func (p *serverProcess) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpu returns the process's user+system CPU time so far, and the user
// part of it.
func (p *serverProcess) cpu(b *testing.B) (total, user time.Duration) {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("%s CPU: %v", p.name, err)
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis: utime and stime are the
	// 14th and 15th fields, the 12th and 13th after it.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("%s CPU: cannot parse %q", p.name, s)
	}
	return time.Duration(utime+stime) * clockTick, time.Duration(utime) * clockTick
}

// syscalls returns the process's read and write system calls so far
// (/proc/<pid>/io), or zeros if they cannot be read.
func (p *serverProcess) syscalls() (reads, writes int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			reads, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			writes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return reads, writes
}
