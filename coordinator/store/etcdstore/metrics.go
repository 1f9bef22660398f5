package etcdstore

import "github.com/prometheus/client_golang/prometheus"

// metrics are the store's Prometheus metrics; nil fields when no
// Registerer was given.
type metrics struct {
	reg          prometheus.Registerer
	writeSeconds prometheus.Histogram
	txnRecords   prometheus.Histogram
	txnBytes     prometheus.Histogram
	errs         *prometheus.CounterVec
	collectors   []prometheus.Collector
}

// The op label of tenure_store_errors_total.
const (
	opPersist   = "persist"
	opLoad      = "load"
	opLoadGroup = "load_group"
	opFence     = "fence"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{reg: reg}
	if reg == nil {
		return m, nil
	}
	m.writeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tenure_store_write_seconds",
		Help:    "Time of one etcd write transaction of the store, from send to response (errors included).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	m.txnRecords = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tenure_store_txn_records",
		Help:    "Records written by one etcd write transaction of the store.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 8),
	})
	m.txnBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tenure_store_txn_bytes",
		Help:    "Estimated request bytes (keys, values, framing) of one etcd write transaction of the store.",
		Buckets: prometheus.ExponentialBuckets(256, 4, 8),
	})
	m.errs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tenure_store_errors_total",
		Help: "Failed store operations, by op: persist, load, load_group, and fence (one failed attempt to move the fence key after a write of unknown outcome).",
	}, []string{"op"})
	for _, op := range []string{opPersist, opLoad, opLoadGroup, opFence} {
		m.errs.WithLabelValues(op)
	}
	for _, c := range []prometheus.Collector{m.writeSeconds, m.txnRecords, m.txnBytes, m.errs} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, err
		}
		m.collectors = append(m.collectors, c)
	}
	return m, nil
}

func (m *metrics) unregister() {
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
	m.collectors = nil
}

func (m *metrics) txn(seconds float64, records, bytes int) {
	if m.writeSeconds == nil {
		return
	}
	m.writeSeconds.Observe(seconds)
	m.txnRecords.Observe(float64(records))
	m.txnBytes.Observe(float64(bytes))
}

func (m *metrics) failed(op string, err error) {
	if m.errs == nil || err == nil {
		return
	}
	m.errs.WithLabelValues(op).Inc()
}
