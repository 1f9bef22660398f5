package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// outage is one loss of a group's coordinator as the fleet saw it, from
// the first heartbeat refused or left unanswered to the first one a node
// answered again: where a takeover's time goes on the clients' side,
// which the nodes' logs and profiles do not show. A member learns of the
// loss only when its own next heartbeat fails, as a stock client does.
type outage struct {
	lost    time.Time // the first heartbeat refused or unanswered
	found   time.Time // the last lookup that named a node, before served
	sent    time.Time // the first heartbeat sent after found
	served  time.Time // the first heartbeat answered
	lookups int       // FindCoordinator rounds from lost to served
	waiters int       // members that waited for the lookup at found
}

// outageStats are the fleet-wide counts of the lookups and queues behind
// the outages: whether a lookup stalls on a dead node, and how long the
// lanes' queues of due members grow.
type outageStats struct {
	findDown    atomic.Int64 // FindCoordinator attempts with no answer (a dead node)
	findDownMax atomic.Int64 // the longest of them, in nanoseconds
	findNone    atomic.Int64 // lookups answered without a coordinator (backed off)
	findStale   atomic.Int64 // answers without a coordinator asked again at once (findStale)
	readyMax    atomic.Int64 // the longest queue of due members of a lane
}

// reset starts the counts afresh (at a kill).
func (s *outageStats) reset() {
	s.findDown.Store(0)
	s.findDownMax.Store(0)
	s.findNone.Store(0)
	s.findStale.Store(0)
	s.readyMax.Store(0)
}

// noteDown counts a FindCoordinator attempt that took d and got no answer.
func (s *outageStats) noteDown(d time.Duration) {
	s.findDown.Add(1)
	for {
		cur := s.findDownMax.Load()
		if int64(d) <= cur || s.findDownMax.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// noteReady records a lane's queue of due members at length n.
func (s *outageStats) noteReady(n int) {
	for {
		cur := s.readyMax.Load()
		if int64(n) <= cur || s.readyMax.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

// lostLocked starts an outage at now unless one is under way. g.mu is held.
func (g *fleetGroup) lostLocked(now time.Time) {
	if g.curOut.lost.IsZero() {
		g.curOut = outage{lost: now}
	}
}

// foundLocked records a lookup that named a node at now, for the members
// waiting for it. g.mu is held.
func (g *fleetGroup) foundLocked(now time.Time, waiters int) {
	if g.curOut.lost.IsZero() {
		return
	}
	g.curOut.found, g.curOut.sent, g.curOut.waiters = now, time.Time{}, waiters
}

// sendingLocked records the first heartbeat routed to the node a lookup
// found. g.mu is held.
func (g *fleetGroup) sendingLocked() {
	if !g.curOut.found.IsZero() && g.curOut.sent.IsZero() {
		g.curOut.sent = time.Now()
	}
}

// servedLocked ends the outage under way, if any, at now. g.mu is held.
func (g *fleetGroup) servedLocked(now time.Time) {
	if g.curOut.lost.IsZero() {
		return
	}
	g.curOut.served = now
	g.lastOut, g.curOut = g.curOut, outage{}
}

// lastOutage returns g's last outage that ended.
func (g *fleetGroup) lastOutage() outage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastOut
}

// outageTimes are the outages of a set of groups that began after a
// kill, each list sorted: when each group noticed (lost) and when its
// lookup found the new coordinator (found), from the kill's sending; how
// long its lookup took (lookup), how long its first heartbeat then waited
// in its lane (queued), and how long the new coordinator took to answer
// it (answer); with the group served last.
type outageTimes struct {
	lost, found, lookup, queued, answer []time.Duration
	lookups                             []int
	last                                outage
	lastName                            string
}

// outageTimesOf gathers the outages of groups that began after killed
// (when the kill was sent).
func outageTimesOf(groups []*fleetGroup, killed time.Time) outageTimes {
	var st outageTimes
	for _, g := range groups {
		o := g.lastOutage()
		if o.lost.Before(killed) || o.served.IsZero() {
			continue
		}
		st.lost = append(st.lost, o.lost.Sub(killed))
		if !o.found.IsZero() {
			st.found = append(st.found, o.found.Sub(killed))
			st.lookup = append(st.lookup, o.found.Sub(o.lost))
			if !o.sent.IsZero() {
				st.queued = append(st.queued, o.sent.Sub(o.found))
				st.answer = append(st.answer, o.served.Sub(o.sent))
			}
		}
		st.lookups = append(st.lookups, o.lookups)
		if o.served.After(st.last.served) {
			st.last, st.lastName = o, g.name
		}
	}
	for _, ds := range [][]time.Duration{st.lost, st.found, st.lookup, st.queued, st.answer} {
		slices.Sort(ds)
	}
	slices.Sort(st.lookups)
	return st
}

// most returns the longest of ds, sorted, or 0.
func most(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)-1]
}

// outageReport describes the outages of st, which began after killed:
// the quantiles of each step, the group served last, and the lookups' and
// lanes' counts since stats were reset.
func (f *fleet) outageReport(st outageTimes, killed time.Time) string {
	if len(st.lost) == 0 {
		return "the clients saw no outage after the kill"
	}
	q := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		at := func(p float64) time.Duration {
			return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(time.Millisecond)
		}
		return fmt.Sprintf("%v/%v/%v/%v", at(0.5), at(0.9), at(0.99), ds[len(ds)-1].Round(time.Millisecond))
	}
	since := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Sub(killed).Round(time.Millisecond).String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "clients' view of %d groups (p50/p90/p99/max): noticed %s after the kill; lookup %s; queued in the lane %s; answered %s; lookups per group %d/%d (p50/max). ",
		len(st.lost), q(st.lost), q(st.lookup), q(st.queued), q(st.answer), st.lookups[len(st.lookups)/2], st.lookups[len(st.lookups)-1])
	fmt.Fprintf(&b, "The last, %s: noticed %s, found %s (%d members waiting), sent %s, served %s after the kill, %d lookups. ",
		st.lastName, since(st.last.lost), since(st.last.found), st.last.waiters, since(st.last.sent), since(st.last.served), st.last.lookups)
	fmt.Fprintf(&b, "FindCoordinator attempts without an answer %d (longest %v), lookups answered without a coordinator %d (stale answers asked again %d); longest queue of due members in a lane %d",
		f.outages.findDown.Load(), time.Duration(f.outages.findDownMax.Load()).Round(time.Millisecond), f.outages.findNone.Load(), f.outages.findStale.Load(), f.outages.readyMax.Load())
	return b.String()
}
