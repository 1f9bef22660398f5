package etcdstore

import (
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-dev/tenure/coordinator/internal/promreg"
)

// metrics are the store's Prometheus metrics; nil fields when no
// Registerer was given.
//
// The stores open at once on one Registerer share one set: a node has a
// store per shard it coordinates, and a new term's store may open before
// the old one closed. Registering a set per store would fail (the names
// are taken), and one store's Close would unregister the others'. So the
// first store to open registers the set and the last to close unregisters
// it (refs); the metrics sum over the stores, with no label per shard.
type metrics struct {
	writeSeconds prometheus.Histogram
	txnRecords   prometheus.Histogram
	txnBytes     prometheus.Histogram
	errs         *prometheus.CounterVec
	busyRetries  prometheus.Counter
	set          *promreg.Set // nil without a Registerer

	reg    prometheus.Registerer
	shared bool // in sharedMetrics
	refs   int  // stores using the set; guarded by sharedMetrics
}

// sharedMetrics holds the metrics of every Registerer some open store
// uses.
var sharedMetrics = struct {
	sync.Mutex
	byReg map[prometheus.Registerer]*metrics
}{byReg: make(map[prometheus.Registerer]*metrics)}

// acquireMetrics returns the metrics of reg, registering them if no open
// store has; release gives them back.
func acquireMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return &metrics{}, nil
	}
	sharedMetrics.Lock()
	defer sharedMetrics.Unlock()
	// A Registerer of a type that cannot be a map key (none of
	// client_golang's) gets a set of its own, as before sharing.
	shared := reflect.ValueOf(reg).Comparable()
	if shared {
		if m := sharedMetrics.byReg[reg]; m != nil {
			m.refs++
			return m, nil
		}
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.reg, m.shared, m.refs = reg, shared, 1
	if shared {
		sharedMetrics.byReg[reg] = m
	}
	return m, nil
}

// release gives back what acquireMetrics returned, unregistering the set
// when the last store using it closes. Called once per store.
func (m *metrics) release() {
	if m.set == nil {
		return
	}
	sharedMetrics.Lock()
	defer sharedMetrics.Unlock()
	if m.refs--; m.refs > 0 {
		return
	}
	m.set.Unregister()
	if m.shared {
		delete(sharedMetrics.byReg, m.reg)
	}
}

// The op label of tenure_store_errors_total.
const (
	opPersist   = "persist"
	opLoad      = "load"
	opLoadGroup = "load_group"
	opFence     = "fence"
	opFold      = "fold"
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
		Help: "Failed store operations, by op: persist, load, load_group, fence (one failed attempt to move the fence key after a write of unknown outcome), and fold (a fold of a group's offset batches into its partition keys that failed or gave way to a concurrent change of the group).",
	}, []string{"op"})
	for _, op := range []string{opPersist, opLoad, opLoadGroup, opFence, opFold} {
		m.errs.WithLabelValues(op)
	}
	m.busyRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tenure_store_busy_retries_total",
		Help: "Store write transactions sent again because etcd refused them as too many requests (its applied index trailing its committed one, as after a restart); nothing was written by the refused attempt.",
	})
	set, err := promreg.Register(reg, m.writeSeconds, m.txnRecords, m.txnBytes, m.errs, m.busyRetries)
	if err != nil {
		return nil, err
	}
	m.set = set
	return m, nil
}

func (m *metrics) txn(seconds float64, records, bytes int) {
	if m.writeSeconds == nil {
		return
	}
	m.writeSeconds.Observe(seconds)
	m.txnRecords.Observe(float64(records))
	m.txnBytes.Observe(float64(bytes))
}

func (m *metrics) busyRetry() {
	if m.busyRetries != nil {
		m.busyRetries.Inc()
	}
}

func (m *metrics) failed(op string, err error) {
	if m.errs == nil || err == nil {
		return
	}
	m.errs.WithLabelValues(op).Inc()
}
