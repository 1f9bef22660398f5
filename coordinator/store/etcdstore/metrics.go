package etcdstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-dev/tenure/internal/promreg"
)

// metrics are the store's Prometheus metrics; nil fields when no
// Registerer was given.
type metrics struct {
	writeSeconds prometheus.Histogram
	txnRecords   prometheus.Histogram
	txnBytes     prometheus.Histogram
	errs         *prometheus.CounterVec
	set          *promreg.Set // nil without a Registerer
}

// The op label of tenure_store_errors_total.
const (
	opPersist   = "persist"
	opLoad      = "load"
	opLoadGroup = "load_group"
	opFence     = "fence"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
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
	set, err := promreg.Register(reg, m.writeSeconds, m.txnRecords, m.txnBytes, m.errs)
	if err != nil {
		return nil, err
	}
	m.set = set
	return m, nil
}

func (m *metrics) unregister() { m.set.Unregister() }

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
