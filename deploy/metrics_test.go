package deploy

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// family is a metric family tenure registers.
type family struct {
	labels []string
	// typ is known for families with series when gathered; a vector
	// without children yet has none.
	typ   dto.MetricType
	typed bool
}

// describing is a registry that also keeps the description of every
// collector registered with it: a vector without children yet is
// described but not gathered, and tenure_rebalances_total is one until
// the first rebalance.
type describing struct {
	*prometheus.Registry
	t     *testing.T
	descs map[string]*family
}

func newDescribing(t *testing.T) *describing {
	return &describing{Registry: prometheus.NewRegistry(), t: t, descs: map[string]*family{}}
}

// descRe reads prometheus.Desc.String, the only way a Desc tells its name
// and labels.
var descRe = regexp.MustCompile(`^Desc\{fqName: "([a-zA-Z_:][a-zA-Z0-9_:]*)", .*variableLabels: \{([^{}]*)\}\}$`)

func (d *describing) Register(c prometheus.Collector) error {
	if err := d.Registry.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		m := descRe.FindStringSubmatch(desc.String())
		if m == nil {
			d.t.Errorf("cannot read the name and labels of %s", desc)
			continue
		}
		f := &family{}
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				f.labels = append(f.labels, l)
			}
		}
		d.descs[m[1]] = f
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// registered returns every metric family a `tenure serve` node of an HA
// set on embedded etcd serves: the server's, the HA node's (its format
// gate's too) and the etcd store's, registered by the real constructors in one registry as serve
// does, and the embedded etcd's own.
func registered(t *testing.T) map[string]*family {
	ctx := testenv.Context(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	e, err := embedetcd.Start(ctx, t.TempDir()+"/data", log) // created 0700 by etcd
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(func() { e.Close() })

	reg := newDescribing(t)
	st, err := etcdstore.New(ctx, e.Client(), append(e.StoreOpts(), etcdstore.Registerer(reg), etcdstore.Logger(log))...)
	if err != nil {
		t.Fatalf("etcdstore.New: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	node, err := ha.Join(ctx, e.Client(), "127.0.0.1:9092", ha.Registerer(reg), ha.Logger(log))
	if err != nil {
		t.Fatalf("ha.Join: %v", err)
	}
	t.Cleanup(func() { node.Close() })
	if _, err := ha.NewFormatMetrics(reg); err != nil {
		t.Fatalf("ha.NewFormatMetrics: %v", err)
	}
	mem := store.NewMemory()
	t.Cleanup(func() { mem.Close() })
	cfg := server.DefaultConfig()
	cfg.Store, cfg.Registerer, cfg.Logger = mem, reg, log
	if _, err := server.New(cfg); err != nil {
		t.Fatalf("server.New: %v", err)
	}

	fams := reg.descs
	mfs, err := prometheus.Gatherers{reg, e.Metrics()}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		f, ok := fams[mf.GetName()]
		if !ok {
			f = &family{}
			for _, lp := range mf.GetMetric()[0].GetLabel() {
				f.labels = append(f.labels, lp.GetName())
			}
			fams[mf.GetName()] = f
		}
		f.typ, f.typed = mf.GetType(), true
	}
	return fams
}

// targetLabels are added by Prometheus to every series it scrapes.
var targetLabels = []string{"job", "instance"}

// TestMetricNames checks every series name and label that the rules and
// the dashboard use against what tenure registers: a name must be a
// family (or a histogram's _bucket, _sum or _count) or a series the rules
// record; a matcher's label must be the family's, a target label, or le
// on a bucket; a grouping label (by, on, ...) must be one of those of a
// series of its expression. A metric renamed in the code, or a label
// dropped, fails here rather than leaving an alert that never fires.
func TestMetricNames(t *testing.T) {
	fams := registered(t)

	// recorded holds the labels a recorded series may carry: at most those of
	// the series its expression reads.
	recorded := map[string][]string{}
	type checked struct {
		where string
		u     uses
		label string // a label_values variable's label
	}
	var all []checked
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			u, err := parseUses(r.Expr)
			if err != nil {
				t.Fatalf("rule %s%s: %v", r.Alert, r.Record, err)
			}
			if r.Record != "" {
				var labels []string
				for _, s := range u.selectors {
					labels = append(labels, labelsOf(fams, recorded, s.name)...)
				}
				recorded[r.Record] = labels
				all = append(all, checked{where: "record " + r.Record, u: u})
			} else {
				all = append(all, checked{where: "alert " + r.Alert, u: u})
			}
		}
	}
	for _, q := range dashboardQueries(t, readDashboard(t)) {
		u, err := parseUses(q.expr)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		all = append(all, checked{where: q.where, u: u, label: q.label})
	}

	var problems []string
	seen := map[string]bool{}
	for _, c := range all {
		var exprLabels []string
		for _, s := range c.u.selectors {
			if s.name == "" {
				problems = append(problems, fmt.Sprintf("%s: a selector without a metric name", c.where))
				continue
			}
			seen[s.name] = true
			labels, err := seriesLabels(fams, recorded, s.name)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", c.where, err))
				continue
			}
			exprLabels = append(exprLabels, labels...)
			for _, l := range s.labels {
				if !slices.Contains(labels, l) {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %s (it has %s)", c.where, s.name, l, strings.Join(labels, ", ")))
				}
			}
		}
		for _, l := range append(c.u.grouping, c.label) {
			if l != "" && len(exprLabels) > 0 && !slices.Contains(exprLabels, l) {
				problems = append(problems, fmt.Sprintf("%s: groups by %s, which none of its series has (they have %s)", c.where, l, strings.Join(exprLabels, ", ")))
			}
		}
	}
	sort.Strings(problems)
	for _, p := range slices.Compact(problems) {
		t.Error(p)
	}
	if !seen["tenure_coordinating"] || !seen["etcd_server_has_leader"] {
		t.Errorf("the checks missed tenure_coordinating or etcd_server_has_leader, which the rules use: is parseUses reading the expressions?")
	}
	t.Logf("%d series names checked against %d registered families", len(seen), len(fams))
}

// seriesLabels returns the labels a series of this name may carry, or why the
// name is not one tenure serves.
func seriesLabels(fams map[string]*family, recorded map[string][]string, name string) ([]string, error) {
	if labels, ok := recorded[name]; ok {
		return labels, nil
	}
	if strings.Contains(name, ":") {
		return nil, fmt.Errorf("%s is not recorded by a rule before it is used", name)
	}
	if f, ok := fams[name]; ok {
		return append(slices.Clone(f.labels), targetLabels...), nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		f := fams[base]
		if !ok || f == nil {
			continue
		}
		if !f.typed {
			return nil, fmt.Errorf("%s: %s is registered but has no series yet to tell whether it is a histogram", name, base)
		}
		if f.typ != dto.MetricType_HISTOGRAM {
			return nil, fmt.Errorf("%s: %s is a %s, not a histogram", name, base, f.typ)
		}
		labels := append(slices.Clone(f.labels), targetLabels...)
		if suffix == "_bucket" {
			labels = append(labels, "le")
		}
		return labels, nil
	}
	return nil, fmt.Errorf("%s is not a metric tenure registers", name)
}

// labelsOf is seriesLabels' labels, or none for a name it refuses (the
// refusal is reported where the name is used).
func labelsOf(fams map[string]*family, recorded map[string][]string, name string) []string {
	labels, _ := seriesLabels(fams, recorded, name)
	return labels
}
