package server

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
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
	const mod = "github.com/tenure-dev/tenure/"
	bins := proctest.Build(b, mod+"cmd/tenure", mod+"coordinator/server/internal/tenureprof",
		mod+"coordinator/server/internal/nologic", mod+"coordinator/server/internal/kfakeserver")
	return serverBinaries{tenure: bins[0], tenureprof: bins[1], nologic: bins[2], kfake: bins[3]}
}

// serverProcess is a running server child process.
type serverProcess struct {
	*proctest.Process
	name string
	addr string
}

// startProcess starts bin with args on a free loopback port (args
// containing "{addr}" get it) and waits until it accepts connections. It
// is stopped with SIGTERM when the benchmark ends.
func startProcess(b *testing.B, name, bin string, args ...string) *serverProcess {
	b.Helper()
	p := proctest.Start(b, name, bin, args...)
	return &serverProcess{Process: p, name: name, addr: p.Addr}
}

func (p *serverProcess) stop() { p.Stop() }

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpu returns the process's user+system CPU time so far, and the user
// part of it.
func (p *serverProcess) cpu(b *testing.B) (total, user time.Duration) {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
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
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.Pid()))
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
