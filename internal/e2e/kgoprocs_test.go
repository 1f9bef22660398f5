package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoProc is a stock kgo consumer running as a child process
// (internal/kgoconsumer): what it owns is what its own callbacks said.
type kgoProc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer // stderr, and the stdout lines, for failure logs
	done chan struct{}
}

// owners follows the partitions each consumer process holds, from the
// lines its callbacks print, and times the instant a condition on them
// first holds.
type owners struct {
	mu      sync.Mutex
	held    map[string]map[int32]bool
	waiters []*ownersWaiter
}

type ownersWaiter struct {
	cond func(held map[string]map[int32]bool) bool
	at   chan time.Time
}

func newOwners() *owners { return &owners{held: make(map[string]map[int32]bool)} }

// apply takes one line of consumer name, read at at.
func (o *owners) apply(name, line string, at time.Time) {
	what, list, ok := strings.Cut(line, " ")
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.held[name]
	if h == nil {
		h = make(map[int32]bool)
		o.held[name] = h
	}
	for _, s := range strings.Split(list, ",") {
		p, err := strconv.Atoi(s)
		if err != nil {
			continue
		}
		switch what {
		case "assigned":
			h[int32(p)] = true
		case "revoked", "lost":
			delete(h, int32(p))
		}
	}
	kept := o.waiters[:0]
	for _, w := range o.waiters {
		if w.cond(o.held) {
			w.at <- at
		} else {
			kept = append(kept, w)
		}
	}
	o.waiters = kept
}

// when returns a channel that receives the instant cond first holds
// (now, if it holds already).
func (o *owners) when(cond func(held map[string]map[int32]bool) bool) <-chan time.Time {
	w := &ownersWaiter{cond: cond, at: make(chan time.Time, 1)}
	o.mu.Lock()
	defer o.mu.Unlock()
	if cond(o.held) {
		w.at <- time.Now()
	} else {
		o.waiters = append(o.waiters, w)
	}
	return w.at
}

// holds returns a copy of what name holds, sorted.
func (o *owners) holds(name string) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ps []int32
	for p := range o.held[name] {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// wait waits for ch up to timeout.
func wait(tb testing.TB, ch <-chan time.Time, timeout time.Duration, what string, o *owners, procs ...*kgoProc) time.Time {
	tb.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(timeout):
		var b strings.Builder
		for _, p := range procs {
			fmt.Fprintf(&b, "%s holds %v; its output:\n%s\n", p.name, o.holds(p.name), p.output())
		}
		tb.Fatalf("timed out after %v waiting for %s\n%s", timeout, what, b.String())
		return time.Time{}
	}
}

// startKgo starts the consumer program bin as name, its lines going to o.
// The process is killed when tb ends, if still running.
func startKgo(tb testing.TB, bin string, o *owners, name string, args ...string) *kgoProc {
	tb.Helper()
	p := &kgoProc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd.Stderr = &lockedWriter{p}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			at := time.Now()
			line := sc.Text()
			p.mu.Lock()
			fmt.Fprintf(&p.out, "%s %s\n", at.Format("15:04:05.000"), line)
			p.mu.Unlock()
			o.apply(name, line, at)
		}
		p.cmd.Wait()
	}()
	tb.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
	return p
}

func (p *kgoProc) signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

func (p *kgoProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type lockedWriter struct{ p *kgoProc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	if w.p.out.Len() < 1<<20 {
		w.p.out.Write(b)
	}
	return len(b), nil
}

// createTopicN creates topic with n partitions on the server at addr.
func createTopicN(tb testing.TB, addr, topic string, n int32) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, n, 1, nil, topic); err != nil {
		tb.Fatal(err)
	}
}

// split reports whether every named consumer holds n partitions and
// together they hold all n*len(names), each once.
func split(n int, names ...string) func(map[string]map[int32]bool) bool {
	return func(held map[string]map[int32]bool) bool {
		all := make(map[int32]bool)
		for _, name := range names {
			if len(held[name]) != n {
				return false
			}
			for p := range held[name] {
				all[p] = true
			}
		}
		return len(all) == n*len(names)
	}
}

// holdsAll reports whether name holds every partition in ps.
func holdsAll(name string, ps []int32) func(map[string]map[int32]bool) bool {
	return func(held map[string]map[int32]bool) bool {
		for _, p := range ps {
			if !held[name][p] {
				return false
			}
		}
		return true
	}
}

// holdsAny reports whether name holds a partition in ps.
func holdsAny(name string, ps []int32) func(map[string]map[int32]bool) bool {
	return func(held map[string]map[int32]bool) bool {
		for _, p := range ps {
			if held[name][p] {
				return true
			}
		}
		return false
	}
}
