package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// etcd is the server most tests share, each under its own prefix.
var etcd *testenv.Etcd

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(embeddedChild(dir))
	}
	if dir := os.Getenv(commitsChildDirEnv); dir != "" {
		os.Exit(committingChild(dir))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return testenv.RunWithEtcd(m, "etcdstore", func(e *testenv.Etcd) { etcd = e })
}

// uniquePrefix returns a key prefix no other test in this run uses.
func uniquePrefix(t testing.TB) string { return testenv.UniquePrefix(t) }

// open opens a store on the shared server under a new prefix, closed when
// t ends.
func open(t testing.TB, opts ...etcdstore.Opt) (*etcdstore.Store, *clientv3.Client, string) {
	t.Helper()
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	s := openOn(t, cli, append([]etcdstore.Opt{etcdstore.Prefix(prefix)}, opts...)...)
	return s, cli, prefix
}

// openOn opens a store with cli, closed when t ends.
func openOn(t testing.TB, cli *clientv3.Client, opts ...etcdstore.Opt) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.New(testenv.Context(t), cli, append([]etcdstore.Opt{etcdstore.Logger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testLogger(t testing.TB) *zap.Logger {
	if tt, ok := t.(*testing.T); ok {
		return zaptest.NewLogger(tt, zaptest.Level(zap.WarnLevel))
	}
	return zap.NewNop()
}

func persist(t testing.TB, s *etcdstore.Store, recs ...coordinator.Record) {
	t.Helper()
	if err := s.Persist(testenv.Context(t), recs); err != nil {
		t.Fatalf("Persist: %v", err)
	}
}

func load(t testing.TB, s *etcdstore.Store) []coordinator.Record {
	t.Helper()
	recs, err := s.Load(testenv.Context(t))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return recs
}

func loadGroup(t testing.TB, s *etcdstore.Store, g string) []coordinator.Record {
	t.Helper()
	recs, err := s.LoadGroup(testenv.Context(t), g)
	if err != nil {
		t.Fatalf("LoadGroup(%q): %v", g, err)
	}
	return recs
}

// countKeys returns how many keys are under prefix.
func countKeys(t testing.TB, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// render renders records with every field, one per line. With strict,
// nil and empty slices differ; without, they render alike (Snapshots may
// differ there and mean the same).
func render(recs []coordinator.Record, strict bool) string {
	var b strings.Builder
	list := func(n int, isNil bool) string {
		switch {
		case strict && isNil:
			return "nil"
		case n == 0:
			return "[]"
		}
		return ""
	}
	for _, r := range recs {
		switch r := r.(type) {
		case *coordinator.GroupRecord:
			fmt.Fprintf(&b, "group %q type=%d epoch=%d ptype=%q protocol=%q leader=%q state=%q deleted=%v\n",
				r.Group, r.Type, r.Epoch, r.ProtocolType, r.Protocol, r.Leader, r.State, r.Deleted)
		case *coordinator.MemberRecord:
			fmt.Fprintf(&b, "member %q/%q instance=%q client=%q host=%q rack=%q session=%d rebalance=%d topics=%s%q regex=%q assignor=%q deleted=%v protocols=%s",
				r.Group, r.MemberID, r.InstanceID, r.ClientID, r.ClientHost, r.RackID, r.SessionTimeout, r.RebalanceTimeout,
				list(len(r.Topics), r.Topics == nil), r.Topics, r.TopicRegex, r.ServerAssignor, r.Deleted, list(len(r.Protocols), r.Protocols == nil))
			for _, p := range r.Protocols {
				fmt.Fprintf(&b, " %q=%s%x", p.Name, list(len(p.Metadata), p.Metadata == nil), p.Metadata)
			}
			b.WriteByte('\n')
		case *coordinator.AssignmentRecord:
			owned := func(p coordinator.OwnedPartition) string {
				return fmt.Sprintf("%q[%d]@%d", p.Topic, p.Partition, p.Token)
			}
			prov := func(p coordinator.ProvisionalPartition) string {
				return fmt.Sprintf("%q[%d]>=%d", p.Topic, p.Partition, p.Floor)
			}
			tp := func(p coordinator.TopicPartition) string { return fmt.Sprintf("%q[%d]", p.Topic, p.Partition) }
			fmt.Fprintf(&b, "assignment %q/%q epoch=%d prev=%d owned=%s%s provisional=%s%s pending=%s%s revoking=%s%s target=%s%s raw=%s%x\n",
				r.Group, r.MemberID, r.MemberEpoch, r.PrevEpoch,
				list(len(r.Owned), r.Owned == nil), each(r.Owned, owned),
				list(len(r.Provisional), r.Provisional == nil), each(r.Provisional, prov),
				list(len(r.Pending), r.Pending == nil), each(r.Pending, tp),
				list(len(r.Revoking), r.Revoking == nil), each(r.Revoking, tp),
				list(len(r.Target), r.Target == nil), each(r.Target, tp),
				list(len(r.Raw), r.Raw == nil), r.Raw)
		case *coordinator.OffsetRecord:
			md := "nil"
			if r.Metadata != nil {
				md = strconv.Quote(*r.Metadata)
			}
			fmt.Fprintf(&b, "offset %q/%q[%d]=%d leader-epoch=%d metadata=%s token=%d by=%q deleted=%v\n",
				r.Group, r.Topic, r.Partition, r.Offset, r.LeaderEpoch, md, r.Token, r.MemberID, r.Deleted)
		case *coordinator.TopicRecord:
			fmt.Fprintf(&b, "topic %q id=%x partitions=%d deleted=%v\n", r.Name, r.ID, r.Partitions, r.Deleted)
		default:
			fmt.Fprintf(&b, "%T %+v\n", r, r)
		}
	}
	return b.String()
}

// each renders a list element by element.
func each[P any](ps []P, f func(P) string) string {
	if len(ps) == 0 {
		return ""
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = f(p)
	}
	return "[" + strings.Join(out, " ") + "]"
}
