package ha_test

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// ttl is the election TTL of every test: etcd's smallest.
const ttl = time.Second

// etcd is the server most tests share, each under its own prefix.
var etcd *testenv.Etcd

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(pausedChild())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return testenv.RunWithEtcd(m, "ha", func(e *testenv.Etcd) { etcd = e })
}

// uniquePrefix returns a key prefix no other test in this run uses.
func uniquePrefix(t testing.TB) string { return testenv.UniquePrefix(t) }

// join joins a node with the test TTL, closed when t ends.
func join(t *testing.T, cli *clientv3.Client, prefix, addr string, opts ...ha.Opt) *ha.Node {
	t.Helper()
	all := append([]ha.Opt{ha.Prefix(prefix), ha.ElectionTTL(ttl),
		ha.Logger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named(addr))}, opts...)
	n, err := ha.Join(testenv.Context(t), cli, addr, all...)
	if err != nil {
		t.Fatalf("Join(%s): %v", addr, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// termRec is one term of one node, as a poller saw it.
type termRec struct {
	node int // index of the node in the test
	term *ha.Term
	// first and last are the first and last instants at which Valid
	// returned true (zero if never); ended is the first at which it
	// returned false.
	first, last, ended time.Time
}

// recorder collects the terms of every node of a test and polls each
// term's Valid every half millisecond until it turns false, so that the
// valid intervals of all terms can be compared on one clock.
type recorder struct {
	t     *testing.T
	mu    sync.Mutex
	terms []*termRec
	fresh chan *termRec
	wg    sync.WaitGroup
}

// newRecorder must be called before the nodes join: it waits for its
// goroutines when t ends, after the nodes closed.
func newRecorder(t *testing.T) *recorder {
	r := &recorder{t: t, fresh: make(chan *termRec, 100)}
	t.Cleanup(r.wg.Wait)
	return r
}

// follow records the terms of node i until it closes.
func (r *recorder) follow(i int, n *ha.Node) {
	r.wg.Go(func() {
		for term := range n.Terms() {
			rec := &termRec{node: i, term: term}
			r.mu.Lock()
			r.terms = append(r.terms, rec)
			r.mu.Unlock()
			r.wg.Go(func() { r.poll(rec) })
		}
	})
}

// poll polls rec's Valid until it is false, announcing rec on fresh after
// the first poll, so that a test sees the term's interval begun.
func (r *recorder) poll(rec *termRec) {
	for i := 0; ; i++ {
		if i == 1 {
			r.fresh <- rec
		}
		now := time.Now()
		valid := rec.term.Valid(now)
		r.mu.Lock()
		if valid {
			if rec.first.IsZero() {
				rec.first = now
			}
			rec.last = now
		} else {
			rec.ended = now
		}
		r.mu.Unlock()
		if !valid {
			if i == 0 {
				r.fresh <- rec
			}
			return
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// next returns the next term any node won, failing the test if none
// comes within timeout.
func (r *recorder) next(timeout time.Duration) *termRec {
	r.t.Helper()
	select {
	case rec := <-r.fresh:
		return rec
	case <-time.After(timeout):
		r.t.Fatalf("no term won within %v", timeout)
		return nil
	}
}

// none fails the test if a term is won within d.
func (r *recorder) none(d time.Duration, why string) {
	r.t.Helper()
	select {
	case rec := <-r.fresh:
		r.t.Fatalf("%s, node %d won term %d", why, rec.node, rec.term.Revision())
	case <-time.After(d):
	}
}

// snapshot returns a copy of rec under the lock.
func (r *recorder) snapshot(rec *termRec) termRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *rec
}

// checkSafety fails the test if the valid intervals of two terms overlap
// in time, or if revisions do not grow with the terms.
func (r *recorder) checkSafety() {
	r.t.Helper()
	r.mu.Lock()
	var recs []termRec
	for _, rec := range r.terms {
		if !rec.first.IsZero() {
			recs = append(recs, *rec)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(recs, func(a, b termRec) int { return a.first.Compare(b.first) })
	for i := 1; i < len(recs); i++ {
		prev, cur := recs[i-1], recs[i]
		if !prev.last.Before(cur.first) {
			r.t.Errorf("terms overlap: node %d's term %d was valid until %v after node %d's term %d became valid",
				prev.node, prev.term.Revision(), prev.last.Sub(cur.first), cur.node, cur.term.Revision())
		}
		if cur.term.Revision() <= prev.term.Revision() {
			r.t.Errorf("term revisions do not grow: %d then %d", prev.term.Revision(), cur.term.Revision())
		}
	}
	r.t.Logf("%d terms, no two valid at once", len(recs))
	for i := 1; i < len(recs); i++ {
		r.t.Logf("  node %d's term %d: valid until %v before node %d's term %d",
			recs[i-1].node, recs[i-1].term.Revision(), recs[i].first.Sub(recs[i-1].last).Round(time.Millisecond),
			recs[i].node, recs[i].term.Revision())
	}
}

// guardWrites reports whether a write guarded by term's Guard succeeds.
func guardWrites(t *testing.T, cli *clientv3.Client, prefix string, term *ha.Term) bool {
	t.Helper()
	resp, err := cli.Txn(testenv.Context(t)).If(term.Guard()).
		Then(clientv3.OpPut(prefix+"probe", strconv.FormatInt(term.Revision(), 10))).Commit()
	if err != nil {
		t.Fatalf("guarded write: %v", err)
	}
	return resp.Succeeded
}

// waitDone fails the test if term's Done does not close within d.
func waitDone(t *testing.T, term *ha.Term, d time.Duration, what string) {
	t.Helper()
	select {
	case <-term.Done():
		return
	default:
	}
	select {
	case <-term.Done():
	case <-time.After(d):
		t.Fatalf("%s: term %d not done after %v", what, term.Revision(), d)
	}
}

// metric returns the value of the metric name (with the label value, if
// given) in reg.
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && !hasLabel(m, label) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}

func hasLabel(m *dto.Metric, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetValue() == value {
			return true
		}
	}
	return false
}
