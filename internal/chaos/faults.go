//go:build unix

package chaos

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	nothing := func() error { return nil }
	switch f.Kind {
	case LoseNode, FreezeNode:
		name, err := r.coordinatorOf(ctx, f.Target)
		if err != nil {
			return f.Target, nil, err
		}
		p := r.procs[name]
		r.mu.Lock()
		r.gone[name] = f.Kind == FreezeNode
		r.mu.Unlock()
		if f.Kind == FreezeNode {
			p.signal(syscall.SIGSTOP)
			return name, nothing, nil
		}
		p.kill()
		// Its port refuses from now on, as a dead process's does, also
		// through the clients' proxies (a proxy that accepted and
		// closed would be a load balancer in front of a dead node).
		r.fab.stop(func(_, to string) bool { return to == name })
		return name, nothing, nil
	case JoinNode:
		r.mu.Lock()
		k := len(r.nodes)
		r.mu.Unlock()
		p, err := r.addNode(k)
		if err != nil {
			return "", nil, err
		}
		if err := p.start(30 * time.Second); err != nil {
			return p.name, nil, err
		}
		r.mu.Lock()
		r.nodes = append(r.nodes, p)
		r.mu.Unlock()
		return p.name, nothing, nil
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

// frozen reports whether node name was frozen for good.
func (r *run) frozen(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone[name]
}

// coordinatorOf names the node that coordinates group, as the live nodes
// answer FindCoordinator (dialled directly, not through the fabric). It
// asks again while the answer is an error or a node lost or frozen
// before (survivors name it until its lease expires), up to 15 s.
func (r *run) coordinatorOf(ctx context.Context, group string) (string, error) {
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for {
		r.mu.Lock()
		var seeds []string
		byAddr := map[string]string{}
		for _, n := range r.nodes {
			if _, gone := r.gone[n.name]; !gone {
				seeds = append(seeds, n.addr)
				byAddr[n.addr] = n.name
			}
		}
		r.mu.Unlock()
		name, err := findCoordinator(ctx, seeds, group)
		if err == nil {
			if n, ok := byAddr[name]; ok {
				return n, nil
			}
			err = fmt.Errorf("the coordinator %s is no live node", name)
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("chaos: the coordinator of %s: %w", group, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// findCoordinator asks seeds for group's coordinator and returns its
// host:port.
func findCoordinator(ctx context.Context, seeds []string, group string) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(0))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(cctx, cl)
	if err != nil {
		return "", err
	}
	host, port, code := resp.Host, resp.Port, resp.ErrorCode
	if len(resp.Coordinators) > 0 {
		c := resp.Coordinators[0]
		host, port, code = c.Host, c.Port, c.ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}
