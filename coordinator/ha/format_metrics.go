package ha

import "github.com/prometheus/client_golang/prometheus"

// FormatMetrics are the gauges of a set's store-format gate, which raises
// the etcd store's format once every registered node reads it (tenure
// serve runs it, FormatReaders gives it the nodes behind). They are
// defined here, beside the registrations they count, so that whatever
// builds a node's registry (tenure serve, the deploy tests that check the
// alerts' series) registers the same families.
type FormatMetrics struct {
	// Format is the store's format as the node last read it.
	Format prometheus.Gauge
	// Behind counts the registered nodes that do not read the newest
	// format this node reads: while one is registered the store stays
	// at its format.
	Behind prometheus.Gauge
	// Older counts those of Behind that do not read the store's format
	// as it is now (it was raised before they registered): their store
	// refuses to open, and a group or shard such a node takes over stays
	// offline.
	Older prometheus.Gauge
}

// NewFormatMetrics makes the gate's gauges and registers them with reg
// (nil: none).
func NewFormatMetrics(reg prometheus.Registerer) (*FormatMetrics, error) {
	m := &FormatMetrics{
		Format: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_store_format",
			Help: "The store's format as this node last read it (0: not yet): at 6 the groups' values carry the targets of their epoch bumps, which tenures before it cannot read; an HA set is raised to it once every registered node reads it.",
		}),
		Behind: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_ha_nodes_behind_format",
			Help: "Registered nodes of the HA set that do not read the newest store format this node reads (older tenures): while one is registered the store stays at its format; one that registers after the store was raised cannot open it and takes over no group (tenure_ha_nodes_older_than_store).",
		}),
		Older: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_ha_nodes_older_than_store",
			Help: "Registered nodes of the HA set that do not read the store's format as it is now (they registered after it was raised): their store refuses to open, and a group or shard such a node takes over stays offline until it stops or is upgraded.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Format, m.Behind, m.Older} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
