//go:build unix

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tenure-dev/tenure/internal/chaos/check"
)

// inject carries out fault f, which the schedule numbered i: it starts the
// fault, waits f.For, heals it, and records both ends. It returns early,
// healed, if ctx ends.
func (r *run) inject(ctx context.Context, i int, f Fault) {
	tag := fmt.Sprintf("f%d", i)
	target, heal, err := r.start(ctx, tag, f)
	rec := check.Fault{Kind: f.Kind, Target: target, Start: time.Now()}
	if err != nil {
		r.event(map[string]any{"fault": i, "kind": f.Kind, "target": target, "error": err.Error()})
		r.logf("fault %d %s: %v", i, f.Kind, err)
		return
	}
	r.event(map[string]any{"fault": i, "kind": f.Kind, "target": target, "phase": "start", "for": f.For.String()})
	r.logf("%s (target %s)", f, target)
	t := time.NewTimer(f.For)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	if err := heal(); err != nil {
		r.event(map[string]any{"fault": i, "kind": f.Kind, "target": target, "phase": "heal", "error": err.Error()})
		r.logf("fault %d %s: heal: %v", i, f.Kind, err)
		r.failHeal(fmt.Errorf("fault %d (%s %s) did not heal: %w", i, f.Kind, target, err))
	}
	rec.End = time.Now()
	r.event(map[string]any{"fault": i, "kind": f.Kind, "target": target, "phase": "healed"})
	r.mu.Lock()
	r.done = append(r.done, rec)
	r.mu.Unlock()
}

// start starts fault f and returns the process it hit and the function that
// heals it.
func (r *run) start(ctx context.Context, tag string, f Fault) (string, func() error, error) {
	switch f.Kind {
	case KillWorker, KillNode, KillEtcd, KillCommitter, KillLeader,
		PauseWorker, PauseEtcd, PauseCommitter, PauseLeader:
		name := f.Target
		if f.Kind == KillLeader || f.Kind == PauseLeader {
			name = r.leader(ctx)
		}
		p := r.procs[name]
		if p == nil {
			return name, nil, fmt.Errorf("no process %q", name)
		}
		if isKill(f.Kind) {
			p.kill()
			return name, func() error { return r.restart(p) }, nil
		}
		p.signal(syscall.SIGSTOP)
		return name, func() error { p.signal(syscall.SIGCONT); return nil }, nil
	}

	// Network faults: pick the links, then the toxics.
	var (
		name  string
		match func(from, to string) bool
	)
	touches := func(n string) func(from, to string) bool {
		return func(from, to string) bool { return from == n || to == n }
	}
	switch f.Kind {
	case Latency:
		name = f.Target
		switch name {
		case "leader":
			name = r.leader(ctx)
			match = touches(name)
		case "all":
			match = func(string, string) bool { return true }
		default:
			match = touches(name)
		}
	case CutCoordinators:
		name = f.Target
		match = func(from, to string) bool { return from == name && strings.HasPrefix(to, "n") }
	case IsolateWorker, ResetWorker, OneWay, EtcdMinority:
		name = f.Target
		match = touches(name)
	case IsolateLeader, ResetLeader:
		name = r.leader(ctx)
		match = touches(name)
	case QuorumLoss:
		name = strings.Join(f.Targets, ",")
		match = func(from, to string) bool {
			return slices.Contains(f.Targets, from) || slices.Contains(f.Targets, to)
		}
	default:
		return "", nil, fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	var toxics []toxic
	switch f.Kind {
	case Latency:
		attrs := map[string]int{"latency": int(f.Latency / time.Millisecond), "jitter": int(f.Jitter / time.Millisecond)}
		toxics = []toxic{{Type: "latency", Stream: "upstream", Attributes: attrs}, {Type: "latency", Stream: "downstream", Attributes: attrs}}
	case ResetWorker, ResetLeader:
		toxics = []toxic{{Type: "reset_peer", Stream: "upstream", Attributes: map[string]int{"timeout": 0}}}
	case OneWay:
		toxics = []toxic{{Type: "timeout", Stream: f.Stream, Attributes: map[string]int{"timeout": 0}}}
	default: // a black hole both ways
		toxics = []toxic{{Type: "timeout", Stream: "upstream", Attributes: map[string]int{"timeout": 0}}, {Type: "timeout", Stream: "downstream", Attributes: map[string]int{"timeout": 0}}}
	}
	links, err := r.fab.inject(tag, match, toxics...)
	if err != nil {
		r.fab.heal(tag)
		return name, nil, err
	}
	if len(links) == 0 {
		return name, nil, fmt.Errorf("no link of %q", name)
	}
	return name, func() error { r.fab.heal(tag); return nil }, nil
}

// restart starts a killed process again, retrying while it fails to come
// up (a tenure node waits for its previous life's lease; a port may be
// slow to free).
func (r *run) restart(p *proc) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		if err = p.start(30 * time.Second); err == nil {
			return nil
		}
	}
	return err
}

// isKill reports whether a process fault kills (rather than pauses).
func isKill(kind string) bool {
	switch kind {
	case KillWorker, KillNode, KillEtcd, KillCommitter, KillLeader:
		return true
	}
	return false
}
