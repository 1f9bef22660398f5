package embedetcd_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestEmbeddedMetrics gathers the embedded server's own metrics: etcd's
// families from the default registry, with a leader, and none of what
// else is registered there (the Go collector's go_goroutines). The
// gauges are process-wide, so this checks the selection, not which
// server set the values.
func TestEmbeddedMetrics(t *testing.T) {
	e := startEmbedded(t, t.TempDir(), testLogger(t))
	mfs, err := e.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	hasLeader := -1.0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "etcd_") {
			t.Errorf("gathered %s, which is not etcd's", mf.GetName())
		}
		if mf.GetName() == "etcd_server_has_leader" {
			hasLeader = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if hasLeader != 1 {
		t.Errorf("etcd_server_has_leader = %v, want 1 (-1: not gathered)", hasLeader)
	}

	all, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var goroutines bool
	for _, mf := range all {
		goroutines = goroutines || mf.GetName() == "go_goroutines"
	}
	if !goroutines {
		t.Fatal("the default registry has no go_goroutines: this test no longer shows that Metrics selects")
	}
	t.Logf("%d of the default registry's %d families are etcd's", len(mfs), len(all))
}
