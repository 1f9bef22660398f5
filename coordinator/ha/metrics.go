package ha

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-dev/tenure/coordinator/internal/promreg"
)

// endReason is why a term ended: the reason label of
// tenure_leader_lost_total, and what the logs say.
type endReason string

const (
	// reasonInDoubt: the lease's deadline passed without an acknowledged
	// renewal, so etcd may be about to expire it.
	reasonInDoubt endReason = "in_doubt"
	// reasonLeaseLost: etcd says the lease no longer exists.
	reasonLeaseLost endReason = "lease_lost"
	// reasonDeposed: the leader key was deleted while the lease lived (an
	// operator, or a revocation the node did not make).
	reasonDeposed endReason = "deposed"
	// reasonResigned: Term.Resign.
	reasonResigned endReason = "resigned"
	// reasonClosed: Node.Close, or a lease given up during recovery.
	reasonClosed endReason = "closed"
	// reasonMoved: the shard's placement moved it to another node.
	reasonMoved endReason = "moved"
)

var allReasons = []endReason{reasonInDoubt, reasonLeaseLost, reasonDeposed, reasonResigned, reasonClosed}

var shardReasons = []endReason{reasonInDoubt, reasonLeaseLost, reasonDeposed, reasonClosed, reasonMoved}

// metrics are the node's Prometheus metrics; nil fields when no
// Registerer was given.
type metrics struct {
	leader     prometheus.Gauge
	terms      prometheus.Counter
	lost       *prometheus.CounterVec
	kaFailures prometheus.Counter
	nodes      prometheus.Gauge
	shards     prometheus.Gauge
	shardsLed  prometheus.Gauge
	shardTerms prometheus.Counter
	shardLost  *prometheus.CounterVec
	set        *promreg.Set // nil without a Registerer
}

func newMetrics(reg prometheus.Registerer, shards int) (*metrics, error) {
	m := &metrics{}
	if reg == nil {
		return m, nil
	}
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tenure_leader",
		Help: "1 while this node holds a leadership term that has not ended, else 0.",
	})
	m.terms = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tenure_leader_terms_total",
		Help: "Leadership terms this node won.",
	})
	m.lost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tenure_leader_lost_total",
		Help: "Leadership terms of this node that ended, by reason: in_doubt (lease renewals failed until the deadline), lease_lost (etcd dropped the lease), deposed (the leader key was deleted), resigned, closed.",
	}, []string{"reason"})
	for _, r := range allReasons {
		m.lost.WithLabelValues(string(r))
	}
	m.kaFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tenure_ha_keepalive_failures_total",
		Help: "Lease renewals of this node that failed or timed out.",
	})
	m.nodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tenure_ha_nodes",
		Help: "Live nodes of the HA set, as this node's watch sees them.",
	})
	m.shards = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tenure_shards",
		Help: "The set's shard count (--shards): 1 when one leader coordinates every group.",
	})
	m.shards.Set(float64(shards))
	m.shardsLed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tenure_shards_led",
		Help: "Coordinator shards this node holds a term of now (--shards above 1; else 0).",
	})
	m.shardTerms = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tenure_shard_terms_total",
		Help: "Shard terms this node started.",
	})
	m.shardLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tenure_shard_lost_total",
		Help: "Shard terms of this node that ended, by reason: moved (placement gave the shard to another node), in_doubt, lease_lost, deposed (the owner key was deleted), closed.",
	}, []string{"reason"})
	for _, r := range shardReasons {
		m.shardLost.WithLabelValues(string(r))
	}
	set, err := promreg.Register(reg, m.leader, m.terms, m.lost, m.kaFailures, m.nodes, m.shards, m.shardsLed, m.shardTerms, m.shardLost)
	if err != nil {
		return nil, err
	}
	m.set = set
	return m, nil
}

func (m *metrics) unregister() { m.set.Unregister() }

func (m *metrics) termStarted() {
	if m.leader == nil {
		return
	}
	m.leader.Set(1)
	m.terms.Inc()
}

func (m *metrics) termEnded(r endReason) {
	if m.leader == nil {
		return
	}
	m.leader.Set(0)
	m.lost.WithLabelValues(string(r)).Inc()
}

func (m *metrics) shardStarted() {
	if m.shardsLed == nil {
		return
	}
	m.shardsLed.Inc()
	m.shardTerms.Inc()
}

func (m *metrics) shardEnded(r endReason) {
	if m.shardsLed == nil {
		return
	}
	m.shardsLed.Dec()
	m.shardLost.WithLabelValues(string(r)).Inc()
}

func (m *metrics) keepaliveFailed() {
	if m.kaFailures != nil {
		m.kaFailures.Inc()
	}
}

func (m *metrics) liveNodes(n int) {
	if m.nodes != nil {
		m.nodes.Set(float64(n))
	}
}
