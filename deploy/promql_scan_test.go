package deploy

import (
	"reflect"
	"testing"
)

// TestParseUses shows what the scanner the metric checks rest on finds,
// on the shapes of expression the rules and the dashboard use.
func TestParseUses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		expr     string
		want     []selector
		grouping []string
	}{
		{"bare", "tenure_leader", []selector{{name: "tenure_leader"}}, nil},
		{"matchers", `tenure_leader_lost_total{reason=~"in_doubt|lease_lost", job!="x,y}"}`,
			[]selector{{name: "tenure_leader_lost_total", labels: []string{"reason", "job"}}}, nil},
		{"aggregation and range",
			"sum by (job, reason) (rate(tenure_rebalances_total[15m])) * 3600 > 60",
			[]selector{{name: "tenure_rebalances_total"}}, []string{"job", "reason"}},
		{"trailing by, offset and a number",
			"sum(rate(a_total[5m] offset 1h)) without (instance) > 1e3",
			[]selector{{name: "a_total"}}, []string{"instance"}},
		{"histogram_quantile with a grafana variable",
			`histogram_quantile(0.99, sum by (instance, le) (rate(tenure_store_persist_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
			[]selector{{name: "tenure_store_persist_seconds_bucket", labels: []string{"job"}}}, []string{"instance", "le"}},
		{"set operators and vector matching",
			"(etcd_server_has_leader == 0) and on (job, instance) tenure_coordinating unless ignoring(x) group_left b",
			[]selector{{name: "etcd_server_has_leader"}, {name: "tenure_coordinating"}, {name: "b"}}, []string{"job", "instance", "x"}},
		{"group_left with labels", "a * on (job) group_left (reason) b",
			[]selector{{name: "a"}, {name: "b"}}, []string{"job", "reason"}},
		{"recorded name", "job_instance:tenure_store_persist_seconds:p99_5m > 0.25",
			[]selector{{name: "job_instance:tenure_store_persist_seconds:p99_5m"}}, nil},
		{"absent and a function of a name", `absent(tenure_coordinating) or vector(0)`,
			[]selector{{name: "tenure_coordinating"}}, nil},
		{"matchers without a name", `{__name__="tenure_leader"}`,
			[]selector{{labels: []string{"__name__"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseUses(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.selectors, tc.want) {
				t.Errorf("selectors %+v, want %+v", got.selectors, tc.want)
			}
			if !reflect.DeepEqual(got.grouping, tc.grouping) {
				t.Errorf("grouping %q, want %q", got.grouping, tc.grouping)
			}
		})
	}
	for _, bad := range []string{`a{b="c}`, "a[5m", `a{b="c"`, "sum by (a"} {
		if _, err := parseUses(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
