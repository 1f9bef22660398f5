package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// groupSums collects the gauges summed over every group this node
// coordinates: tenure_unowned_partitions and tenure_takeover_awaited_members.
//
// It reads the groups in Collect, never in a metric's Write (as a GaugeFunc
// does). The registry runs each collector's Collect on a goroutine of its
// own but writes every metric on the one goroutine that gathers them, and
// reading a group takes its lock, whose holder may be waiting for a metric
// vector: observe, under the group's lock, asks a per-group vector for the
// group's series, and the vector's Collect holds the vector's read lock
// while it hands its series to the gatherer. With a GaugeFunc, a gatherer
// waiting for a group's lock stopped that Collect, the Collect's read lock
// stopped a new group's series (a writer), the waiting writer stopped every
// reader of the vector, and one of them held the lock the gatherer waited
// for: a scrape during a fleet's join stopped the node for good. From a
// Collect the gatherer keeps taking the vector's series while the sums
// wait for the groups.
type groupSums struct {
	s                *Server
	unowned, awaited *prometheus.Desc
}

func newGroupSums(s *Server) *groupSums {
	return &groupSums{
		s: s,
		unowned: prometheus.NewDesc("tenure_unowned_partitions",
			"Partitions of the groups this node coordinates that their members subscribe to and nobody owns, summed over the groups, read at scrape time: during hand-offs, and after a crash until the session expires; a group whose last member was expelled (not left) counts the partitions it committed, until a member joins or leaves.",
			nil, nil),
		awaited: prometheus.NewDesc("tenure_takeover_awaited_members",
			"Members of the groups this node coordinates that it restored at a takeover, under the takeover grace, and has not heard from since, read at scrape time: clients still finding their new coordinator after a fail-over.",
			nil, nil),
	}
}

func (c *groupSums) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.unowned
	ch <- c.awaited
}

// Collect sums both over every loaded group, one lock of each.
func (c *groupSums) Collect(ch chan<- prometheus.Metric) {
	unowned, awaited := 0, 0
	for _, tm := range c.s.ledTerms(time.Now()) {
		for _, e := range tm.groups.snapshot() {
			e.mu.Lock()
			if e.g != nil && !e.gone {
				st := e.g.Stats()
				unowned += st.Unowned
				awaited += st.Awaited
			}
			e.mu.Unlock()
		}
	}
	ch <- prometheus.MustNewConstMetric(c.unowned, prometheus.GaugeValue, float64(unowned))
	ch <- prometheus.MustNewConstMetric(c.awaited, prometheus.GaugeValue, float64(awaited))
}
