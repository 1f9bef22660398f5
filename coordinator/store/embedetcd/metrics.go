package embedetcd

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics returns the embedded server's own metrics, etcd_server_has_leader
// and the rest of what etcd serves on its /metrics, for a process that
// serves them beside its own. etcd registers them in the process's
// default Prometheus registry when its packages load, not in a Registerer
// of ours; they are gathered from there, every family whose name starts
// with "etcd_". A process that starts no embedded server has them too,
// unset (etcd_server_has_leader 0), which is why only an Etcd hands
// them out. With two embedded servers in one process (tests) they are
// shared, so they describe neither.
func (m *Etcd) Metrics() prometheus.Gatherer { return prometheus.GathererFunc(gatherEtcd) }

func gatherEtcd() ([]*dto.MetricFamily, error) {
	mfs, err := prometheus.DefaultGatherer.Gather()
	kept := mfs[:0]
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "etcd_") {
			kept = append(kept, mf)
		}
	}
	return kept, err
}
