package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// route returns the index of the node m's group is sent to; or, if none
// is known, parks m with the group (starting a lookup if none is under
// way) and returns -1. m's lane's lock is held.
func (f *fleet) route(m *fleetMember) int {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.coord >= 0 {
		g.sendingLocked()
		return g.coord
	}
	f.parkLocked(m)
	return -1
}

// park parks m with its group, as route does, if the group has no
// coordinator, and reports whether it did. m's lane's lock is held.
func (f *fleet) park(m *fleetMember) bool {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.coord >= 0 {
		return false
	}
	f.parkLocked(m)
	return true
}

// parkLocked adds m to its group's waiters, starting a lookup if none is
// under way. g.mu is held.
func (f *fleet) parkLocked(m *fleetMember) {
	g := m.g
	g.waiters = append(g.waiters, m)
	if !g.looking {
		g.looking = true
		f.wg.Add(1)
		go f.lookup(g)
	}
}

// lookup finds g's coordinator, asking the nodes in turn, no sooner than
// the group's backoff allows, then sends the members that waited for it.
func (f *fleet) lookup(g *fleetGroup) {
	defer f.wg.Done()
	for {
		g.mu.Lock()
		wait := time.Until(g.retry)
		g.mu.Unlock()
		if wait > 0 {
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		node, ok := f.find(g.name)
		g.mu.Lock()
		g.curOut.lookups++
		if !ok {
			g.backoffLocked(time.Now())
			g.mu.Unlock()
			continue
		}
		g.coord, g.looking = node, false
		g.foundLocked(time.Now(), len(g.waiters))
		waiters := g.waiters
		g.waiters = nil
		g.mu.Unlock()
		for _, m := range waiters {
			m.lane.mu.Lock()
			m.lane.requeueLocked(m, time.Since(f.base))
			m.lane.mu.Unlock()
		}
		return
	}
}

// find asks the nodes in turn for group's coordinator until one names a
// node (its index) or says there is none.
func (f *fleet) find(group string) (int, bool) {
	first := int(f.lookups.Add(1))
	for i := range f.finders {
		node := (first + i) % len(f.finders)
		addr, took, err := f.ask(node, group)
		if kerrCode(err) == kerr.CoordinatorNotAvailable.Code && took >= findStale {
			// Decided when it arrived, answered after the lookups held
			// before it on the finder's connection: stale. A stock
			// client's own lookup would have been held and answered
			// afresh; so is this one, at once, not after a back-off.
			f.outages.findStale.Add(1)
			addr, took, err = f.ask(node, group)
		}
		if err != nil {
			if kerrCode(err) != 0 {
				f.outages.findNone.Add(1)
				return -1, false // the set answered: no coordinator yet
			}
			f.outages.noteDown(took)
			continue
		}
		if n, ok := f.nodeOf[addr]; ok {
			return n, true
		}
		f.violation(false, "FindCoordinator for %s named %s, not a node of the set", group, addr)
		return -1, false
	}
	return -1, false
}

// findStale: a lookup answered COORDINATOR_NOT_AVAILABLE this long after
// it was sent waited behind held lookups. A node of an HA set holds a
// FindCoordinator while no live node coordinates its group, up to 16 a
// connection (server.Config.MaxParkedPerConnection); the fleet's lookups
// of every group share one connection to each node, so past 16 the
// node answers at once, but after the held ones, when the next term
// begins: a stale "none yet" that would send the group into a back-off
// just as a coordinator is there, which no stock client, whose one
// lookup is held on its own connection, meets.
const findStale = 250 * time.Millisecond

// ask asks node for group's coordinator through its finder, and says
// how long that took.
func (f *fleet) ask(node int, group string) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.timeout)
	defer cancel()
	asked := time.Now()
	addr, err := findCoordinatorAt(ctx, f.finders[node], group)
	return addr, time.Since(asked), err
}

// lost forgets that node coordinates g after it refused or did not
// answer, and backs the group's next lookup off.
func (g *fleetGroup) lost(node int, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.coord == node {
		g.coord = -1
		g.backoffLocked(now)
		g.lostLocked(now)
	}
}

// Lookups of a group without a coordinator back off from 50 ms to 500 ms:
// a dead node's groups wait for its lease to expire, and thousands of
// them must not flood the survivors meanwhile.
const (
	findBackoffMin = 50 * time.Millisecond
	findBackoffMax = 500 * time.Millisecond
)

func (g *fleetGroup) backoffLocked(now time.Time) {
	g.backoff = min(max(2*g.backoff, findBackoffMin), findBackoffMax)
	g.retry = now.Add(g.backoff)
}

func (g *fleetGroup) servedBy(node int, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.backoff = 0
	g.servedLocked(now)
	if len(g.served) == 0 || g.served[len(g.served)-1].node != node {
		g.served = append(g.served, serving{node: node, at: now})
	}
}

// last returns the node that served g last, and since when; false if
// none has. Without history's copy: a check that polls every group
// every few milliseconds shares the cores with the nodes it measures.
func (g *fleetGroup) last() (serving, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.served) == 0 {
		return serving{}, false
	}
	return g.served[len(g.served)-1], true
}

// history returns the nodes that served g, in order.
func (g *fleetGroup) history() []serving {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.served)
}

// findCoordinatorAt asks the node cl is seeded with, and only it, for
// group's coordinator; an error with a Kafka code if it has none.
func findCoordinatorAt(ctx context.Context, cl *kgo.Client, group string) (string, error) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{group}
	resp, err := fc.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return "", err
	}
	if len(resp.Coordinators) != 1 {
		return "", fmt.Errorf("FindCoordinator for %s: %d answers", group, len(resp.Coordinators))
	}
	c := resp.Coordinators[0]
	if c.ErrorCode != 0 {
		return "", kerr.ErrorForCode(c.ErrorCode)
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), nil
}
