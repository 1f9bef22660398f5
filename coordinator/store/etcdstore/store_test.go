package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// fullRecords has every field of every record type set, and the same
// types with every field empty: zero, nil, or empty but not nil.
func fullRecords() []coordinator.Record {
	md, empty := "checkpoint <a&b>", ""
	return []coordinator.Record{
		&coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partitions: 64},
		&coordinator.TopicRecord{Name: "z"},
		&coordinator.GroupRecord{Group: "classic", Type: coordinator.Classic, Epoch: 7, ProtocolType: "consumer",
			Protocol: "cooperative-sticky", Leader: "m1", State: "Stable"},
		&coordinator.MemberRecord{Group: "classic", MemberID: "m1", InstanceID: "i1", ClientID: "client-1",
			ClientHost: "/10.0.0.1", RackID: "rack-a", SessionTimeout: 45 * time.Second, RebalanceTimeout: time.Minute + time.Nanosecond,
			Topics: []string{"jobs", "z"}, TopicRegex: "^j.*", ServerAssignor: "uniform",
			Protocols: []coordinator.Protocol{{Name: "range", Metadata: []byte{0, 1, 0xff}}, {Name: "sticky", Metadata: []byte{}}, {Name: "nil"}}},
		&coordinator.MemberRecord{Group: "classic", MemberID: "m2", Topics: []string{}, Protocols: []coordinator.Protocol{}},
		&coordinator.MemberRecord{Group: "classic", MemberID: "m3"},
		&coordinator.AssignmentRecord{Group: "classic", MemberID: "m1", MemberEpoch: 7, PrevEpoch: 6,
			Owned:       []coordinator.OwnedPartition{{Topic: "jobs", Partition: 0, Token: 3}, {Topic: "jobs", Partition: 1, Token: 7}, {Topic: "z", Partition: 5, Token: 1 << 40}},
			Provisional: []coordinator.ProvisionalPartition{{Topic: "jobs", Partition: 1, Floor: 7}},
			Pending:     []coordinator.TopicPartition{{Topic: "jobs", Partition: 2}},
			Revoking:    []coordinator.TopicPartition{{Topic: "jobs", Partition: 0}},
			Target:      []coordinator.TopicPartition{{Topic: "jobs", Partition: 1}, {Topic: "jobs", Partition: 2}, {Topic: "z", Partition: 5}},
			Raw:         []byte("raw\x00assignment")},
		&coordinator.AssignmentRecord{Group: "classic", MemberID: "m2", Owned: []coordinator.OwnedPartition{},
			Provisional: []coordinator.ProvisionalPartition{}, Pending: []coordinator.TopicPartition{},
			Revoking: []coordinator.TopicPartition{}, Target: []coordinator.TopicPartition{}, Raw: []byte{}},
		&coordinator.AssignmentRecord{Group: "classic", MemberID: "m3"},
		&coordinator.OffsetRecord{Group: "classic", Topic: "jobs", Partition: 3, Offset: 1 << 50, LeaderEpoch: -1,
			Metadata: &md, Token: 7, MemberID: "m1"},
		&coordinator.OffsetRecord{Group: "classic", Topic: "jobs", Partition: 10, Metadata: &empty},
		&coordinator.OffsetRecord{Group: "classic", Topic: "z", Partition: 0},
		&coordinator.GroupRecord{Group: "deleted", Type: coordinator.Consumer, Epoch: 12, Deleted: true},
		&coordinator.GroupRecord{Group: "empty"},
	}
}

func TestRoundTripEveryField(t *testing.T) {
	s, _, _ := open(t)
	recs := fullRecords()
	persist(t, s, recs...)
	if got, want := render(load(t, s), true), render(recs, true); got != want {
		t.Fatalf("Load:\n%swant:\n%s", got, want)
	}
	if got, want := render(loadGroup(t, s, "classic"), true), render(recs[2:12], true); got != want {
		t.Fatalf("LoadGroup:\n%swant:\n%s", got, want)
	}
	if got := loadGroup(t, s, "none"); got != nil {
		t.Fatalf("LoadGroup of a group with no records: %v", got)
	}
}

// TestNamesAndOrder: names with any bytes keep their own keys, and Load
// returns RecordSet's order whatever the escaping does to etcd's.
func TestNamesAndOrder(t *testing.T) {
	s, _, _ := open(t)
	set := coordinator.NewRecordSet()
	var recs []coordinator.Record
	for _, g := range append([]string{"g", "\xff", "a/b", "a", "a%2Fb", "z", "Z", "-"}, awkward...) {
		recs = append(recs, &coordinator.GroupRecord{Group: g, Epoch: 1})
		for _, m := range []string{"m", "/", "%41", "\x00", "A"} {
			recs = append(recs, &coordinator.MemberRecord{Group: g, MemberID: m})
		}
		for _, p := range []int32{10, 9, 100, 0, -1} {
			for _, topic := range []string{"t", "t/1", "\xff"} {
				recs = append(recs, &coordinator.OffsetRecord{Group: g, Topic: topic, Partition: p, Offset: int64(p)})
			}
		}
	}
	persist(t, s, recs...)
	for _, r := range recs {
		set.Apply(r)
	}
	if got, want := render(load(t, s), true), render(set.Records(), true); got != want {
		t.Fatalf("Load:\n%swant:\n%s", got, want)
	}
	if got, want := render(loadGroup(t, s, "a"), true), render(set.Group("a"), true); got != want {
		t.Fatalf("LoadGroup(a) must not see a/b or a%%2Fb:\n%swant:\n%s", got, want)
	}
}

// TestMatchesRecordSet is the store's property: random batches of random
// records (several groups, members, deletions, tombstones, re-creations,
// topics), persisted with a small MaxTxnOps so that batches split, leave
// the store holding exactly what a RecordSet fed the same records holds.
// Sharded, two shards' stores share the prefix and each batch goes to one
// of them: each holds its own groups (a name in both stays two groups),
// and both every topic.
func TestMatchesRecordSet(t *testing.T) {
	cli := etcd.Client(t)
	n := smallNames()
	rapid.Check(t, func(rt *rapid.T) {
		maxOps := rapid.IntRange(3, 8).Draw(rt, "max-txn-ops")
		prefix := uniquePrefix(t)
		shards, indexes := 1, []int{0}
		if rapid.Bool().Draw(rt, "sharded") {
			shards, indexes = 3, []int{2, 0}
		}
		var stores []*etcdstore.Store
		var sets []*coordinator.RecordSet
		for _, i := range indexes {
			s, err := etcdstore.New(testenv.Context(t), cli, etcdstore.Prefix(prefix), etcdstore.MaxTxnOps(maxOps), etcdstore.Shard(i, shards))
			if err != nil {
				rt.Fatalf("New: %v", err)
			}
			defer s.Close()
			stores, sets = append(stores, s), append(sets, coordinator.NewRecordSet())
		}
		for b := range rapid.IntRange(1, 4).Draw(rt, "batches") {
			i := rapid.IntRange(0, len(stores)-1).Draw(rt, fmt.Sprintf("store-%d", b))
			recs := rapid.SliceOfN(n.record(), 0, 10).Draw(rt, fmt.Sprintf("batch-%d", b))
			if err := stores[i].Persist(testenv.Context(t), recs); err != nil {
				rt.Fatalf("Persist: %v", err)
			}
			for _, r := range recs {
				if _, ok := r.(*coordinator.TopicRecord); ok {
					for _, set := range sets {
						set.Apply(r)
					}
					continue
				}
				sets[i].Apply(r)
			}
		}
		for i, s := range stores {
			got, err := s.Load(testenv.Context(t))
			if err != nil {
				rt.Fatalf("Load: %v", err)
			}
			if g, w := render(got, true), render(sets[i].Records(), true); g != w {
				rt.Fatalf("Load of store %d:\n%swant:\n%s", i, g, w)
			}
			for _, g := range append([]string{"g", "h"}, awkward...) {
				got, err := s.LoadGroup(testenv.Context(t), g)
				if err != nil {
					rt.Fatalf("LoadGroup(%q): %v", g, err)
				}
				if gr, w := render(got, true), render(sets[i].Group(g), true); gr != w {
					rt.Fatalf("LoadGroup(%q) of store %d:\n%swant:\n%s", g, i, gr, w)
				}
			}
		}
	})
}

// txnCount returns how many write transactions the store's metrics saw.
func txnCount(t testing.TB, reg *prometheus.Registry) uint64 {
	t.Helper()
	return histogramCount(t, reg, "tenure_store_txn_records")
}

func histogramCount(t testing.TB, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func counterValue(t testing.TB, reg *prometheus.Registry, name, label string) float64 {
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
			if hasLabel(m, label) {
				return m.GetCounter().GetValue()
			}
		}
	}
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

func offsets(group string, n int) []coordinator.Record {
	recs := make([]coordinator.Record, n)
	for i := range recs {
		recs[i] = &coordinator.OffsetRecord{Group: group, Topic: "t", Partition: int32(i), Offset: int64(i), Token: 1, MemberID: "m"}
	}
	return recs
}

func TestTxnSplit(t *testing.T) {
	t.Run("ops", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		s, _, _ := open(t, etcdstore.MaxTxnOps(3), etcdstore.Registerer(reg))
		recs := make([]coordinator.Record, 10)
		for i := range recs {
			recs[i] = &coordinator.MemberRecord{Group: "g", MemberID: fmt.Sprintf("m%02d", i)}
		}
		persist(t, s, recs...)
		if n := txnCount(t, reg); n != 4 {
			t.Errorf("10 puts with MaxTxnOps 3 took %d transactions, want 4", n)
		}
		if got := len(load(t, s)); got != 10 {
			t.Errorf("loaded %d records, want 10", got)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		s, _, _ := open(t, etcdstore.MaxTxnBytes(4096), etcdstore.Registerer(reg))
		big := strings.Repeat("x", 1500)
		var recs []coordinator.Record
		for i := range 6 {
			recs = append(recs, &coordinator.OffsetRecord{Group: "g", Topic: "t", Partition: int32(i), Metadata: &big})
		}
		persist(t, s, recs...)
		// Two values of 1.5 KB and their keys fit in 4 KiB, three do not.
		if n := txnCount(t, reg); n != 3 {
			t.Errorf("6 records of 1.5 KB with MaxTxnBytes 4096 took %d transactions, want 3", n)
		}
		if got := len(load(t, s)); got != 6 {
			t.Errorf("loaded %d records, want 6", got)
		}
	})
	t.Run("huge batch", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		s, cli, prefix := open(t, etcdstore.Registerer(reg))
		var recs []coordinator.Record
		for g := range 20 {
			recs = append(recs, offsets(fmt.Sprintf("g%02d", g), 1000)...)
		}
		// 157 transactions: slow under the race detector on a busy machine.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		if err := s.Persist(ctx, recs); err != nil {
			t.Fatal(err)
		}
		t.Logf("20,000 records in %d transactions, %v", txnCount(t, reg), time.Since(start))
		// A batch holds MaxTxnOps-1 (127) entries: 8 batches a group.
		if got := countKeys(t, cli, prefix+"groups/"); got != 20*8 {
			t.Errorf("%d keys, want 160 batches", got)
		}
		if got := len(load(t, s)); got != 20000 {
			t.Errorf("loaded %d records, want 20000", got)
		}
	})
}

// TestDedupe: commits of one partition in one batch are one write of the
// last (etcd refuses a transaction that writes a key twice).
func TestDedupe(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _, _ := open(t, etcdstore.MaxTxnOps(3), etcdstore.Registerer(reg))
	var recs []coordinator.Record
	for i := range 1000 {
		recs = append(recs, &coordinator.OffsetRecord{Group: "g", Topic: "t", Partition: 0, Offset: int64(i)})
	}
	recs = append(recs,
		&coordinator.MemberRecord{Group: "g", MemberID: "m"},
		&coordinator.AssignmentRecord{Group: "g", MemberID: "m"},
		&coordinator.MemberRecord{Group: "g", MemberID: "m", Deleted: true}, // a delete replaces the put
	)
	persist(t, s, recs...)
	if n := txnCount(t, reg); n != 1 {
		t.Errorf("%d transactions, want 1", n)
	}
	got := load(t, s)
	if len(got) != 1 || got[0].(*coordinator.OffsetRecord).Offset != 999 {
		t.Fatalf("loaded:\n%s", render(got, false))
	}
}

// TestPutAfterDeleteRange: a group deleted and re-created in one batch
// needs two transactions (etcd refuses a put into a range the same
// transaction deletes), and ends as RecordSet says.
func TestPutAfterDeleteRange(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _, _ := open(t, etcdstore.Registerer(reg))
	recs := []coordinator.Record{
		&coordinator.GroupRecord{Group: "g", Epoch: 3},
		&coordinator.MemberRecord{Group: "g", MemberID: "m1"},
		&coordinator.AssignmentRecord{Group: "g", MemberID: "m1", MemberEpoch: 3},
		&coordinator.OffsetRecord{Group: "g", Topic: "t", Partition: 1, Offset: 5},
		&coordinator.OffsetRecord{Group: "h", Topic: "t", Partition: 1, Offset: 5},
		&coordinator.GroupRecord{Group: "g", Epoch: 3, Deleted: true},
		&coordinator.MemberRecord{Group: "g", MemberID: "m1", Deleted: true}, // inside the deleted range: dropped
		&coordinator.GroupRecord{Group: "g", Epoch: 4},
		&coordinator.MemberRecord{Group: "g", MemberID: "m2"},
		&coordinator.OffsetRecord{Group: "g", Topic: "t", Partition: 1, Offset: 6},
	}
	persist(t, s, recs...)
	if n := txnCount(t, reg); n != 2 {
		t.Errorf("%d transactions, want 2", n)
	}
	set := coordinator.NewRecordSet()
	for _, r := range recs {
		set.Apply(r)
	}
	if got, want := render(load(t, s), true), render(set.Records(), true); got != want {
		t.Fatalf("Load:\n%swant:\n%s", got, want)
	}
	// The tombstone on its own, then the group's old keys are gone.
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 9, Deleted: true})
	if got := render(loadGroup(t, s, "g"), true); got != render([]coordinator.Record{&coordinator.GroupRecord{Group: "g", Epoch: 9, Deleted: true}}, true) {
		t.Fatalf("after deletion:\n%s", got)
	}
}

func TestGuard(t *testing.T) {
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	leaderKey := prefix + "leader"
	if _, err := cli.Put(testenv.Context(t), leaderKey, "a"); err != nil {
		t.Fatal(err)
	}
	guard := clientv3.Compare(clientv3.Value(leaderKey), "=", "a")
	s := openOn(t, cli, etcdstore.Prefix(prefix+"store/"), etcdstore.Guard(guard), etcdstore.MaxTxnOps(3))
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})

	if _, err := cli.Put(testenv.Context(t), leaderKey, "b"); err != nil {
		t.Fatal(err)
	}
	before := countKeys(t, cli, prefix)
	err := s.Persist(testenv.Context(t), offsets("g", 10))
	if !errors.Is(err, etcdstore.ErrGuardFailed) {
		t.Fatalf("Persist with a failed guard: %v, want ErrGuardFailed", err)
	}
	if after := countKeys(t, cli, prefix); after != before {
		t.Fatalf("a failed guard wrote: %d keys before, %d after", before, after)
	}
	if got := render(load(t, s), true); got != render([]coordinator.Record{&coordinator.GroupRecord{Group: "g", Epoch: 1}}, true) {
		t.Fatalf("Load after a failed guard:\n%s", got)
	}

	_, err = etcdstore.New(testenv.Context(t), cli, etcdstore.Prefix(prefix+"other/"), etcdstore.Guard(guard))
	if !errors.Is(err, etcdstore.ErrGuardFailed) {
		t.Fatalf("New with a failed guard: %v, want ErrGuardFailed", err)
	}
	if n := countKeys(t, cli, prefix+"other/"); n != 0 {
		t.Fatalf("New with a failed guard wrote %d keys", n)
	}
}

func TestClose(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, cli, prefix := open(t, etcdstore.Registerer(reg))
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := testenv.Context(t)
	if err := s.Persist(ctx, offsets("g", 1)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Persist after Close: %v", err)
	}
	if _, err := s.Load(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	if _, err := s.LoadGroup(ctx, "g"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("LoadGroup after Close: %v", err)
	}
	// The client is the caller's, and the metrics are free for a new store.
	s2 := openOn(t, cli, etcdstore.Prefix(prefix), etcdstore.Registerer(reg))
	if got := len(load(t, s2)); got != 1 {
		t.Fatalf("reopened store loads %d records, want 1", got)
	}
}

// TestCloseEndsCallsInFlight: Close does not wait for a write that cannot
// finish; the write fails.
func TestCloseEndsCallsInFlight(t *testing.T) {
	f := &faults{}
	cli := f.client(t)
	s := openOn(t, cli, etcdstore.Prefix(uniquePrefix(t)), etcdstore.FenceTimeout(time.Minute))
	f.set(modeDown)
	done := make(chan error, 1)
	go func() { done <- s.Persist(context.Background(), offsets("g", 1)) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-done; err == nil {
		t.Fatal("Persist cut short by Close returned nil")
	}
}

func TestFormat(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	for _, tc := range []struct {
		value string
		want  error
	}{
		{"7", etcdstore.ErrNewerFormat},
		{"x", nil},
		{"0", nil},
	} {
		prefix := uniquePrefix(t)
		if _, err := cli.Put(ctx, prefix+"meta/format", tc.value); err != nil {
			t.Fatal(err)
		}
		_, err := etcdstore.New(ctx, cli, etcdstore.Prefix(prefix))
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("format %q: New returned %v, want %v", tc.value, err, tc.want)
		}
		t.Logf("format %q: %v", tc.value, err)
		if n := countKeys(t, cli, prefix); n != 1 {
			t.Errorf("format %q: New wrote to the prefix: %d keys", tc.value, n)
		}
	}
	s, _, prefix := open(t)
	// Format 5 (offset batches), which tenures before it refuse.
	resp, err := cli.Get(ctx, prefix+"meta/format")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "5" {
		t.Fatalf("a new prefix's format key: %v %v", resp, err)
	}
	s.Close()
	openOn(t, cli, etcdstore.Prefix(prefix)) // the same format opens

	// A format 1 prefix (before the generation log and the shard count) is
	// raised to 5, gets its count of 1 recorded, and its state loads as it
	// was.
	old := uniquePrefix(t)
	if _, err := cli.Put(ctx, old+"meta/format", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, old+"groups/g/group", `{"t":2,"e":7}`); err != nil {
		t.Fatal(err)
	}
	up := openOn(t, cli, etcdstore.Prefix(old))
	recs, err := up.Load(ctx)
	if err != nil || len(recs) != 1 || recs[0].(*coordinator.GroupRecord).Epoch != 7 {
		t.Fatalf("format 1 state after the upgrade: %v %v", recs, err)
	}
	if resp, err := cli.Get(ctx, old+"meta/format"); err != nil || string(resp.Kvs[0].Value) != "5" {
		t.Fatalf("format key after the upgrade: %v %v", resp, err)
	}
	if resp, err := cli.Get(ctx, old+"meta/shards"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
		t.Fatalf("shard count after the upgrade: %v %v", resp, err)
	}
}

func TestDecodeErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ key, value string }{
		{"groups/g/group", `{"e":"one"}`},
		{"groups/g/members/m", `{"zz":1}`},
		{"groups/g/offsets/t/01", `{}`},
		{"groups/g%2/group", `{}`},
		{"groups/g/other", `{}`},
		{"topics/t", `{"v":2,"new":1}`},
		{"groups/g/assignments/m", `{"o":[{"t":"t","p":[1,2],"k":[1]}]}`},
	} {
		s, cli, prefix := open(t)
		if _, err := cli.Put(testenv.Context(t), prefix+tc.key, tc.value); err != nil {
			t.Fatal(err)
		}
		_, err := s.Load(testenv.Context(t))
		if err == nil || !strings.Contains(err.Error(), prefix+tc.key) {
			t.Errorf("%s = %s: Load returned %v, want an error naming the key", tc.key, tc.value, err)
		}
		t.Logf("%v", err)
	}
}

// TestFencedByANewerStore: opening a store takes the prefix over; the
// older store writes nothing more, and says why.
func TestFencedByANewerStore(t *testing.T) {
	a, cli, prefix := open(t)
	persist(t, a, &coordinator.GroupRecord{Group: "g", Epoch: 1})
	b := openOn(t, cli, etcdstore.Prefix(prefix))
	err := a.Persist(testenv.Context(t), []coordinator.Record{&coordinator.GroupRecord{Group: "g", Epoch: 2}})
	if !errors.Is(err, etcdstore.ErrFenced) {
		t.Fatalf("Persist of the older store: %v, want ErrFenced", err)
	}
	t.Log(err)
	persist(t, b, &coordinator.GroupRecord{Group: "g", Epoch: 3})
	if got := load(t, a)[0].(*coordinator.GroupRecord).Epoch; got != 3 {
		t.Fatalf("epoch %d, want 3", got)
	}
}

// TestTopicsCreateIfAbsent: the first creator of a topic name decides its
// ID; a second creator (another node of an HA set) gets the first's topic
// back, through the store or through a Topics of its own.
func TestTopicsCreateIfAbsent(t *testing.T) {
	s, cli := openWithPrefix(t, "/tenure/")
	ctx := testenv.Context(t)
	first := &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{1}, Partitions: 64}
	got, err := s.CreateTopic(ctx, first)
	if err != nil || *got != *first {
		t.Fatalf("first creation: %+v, %v", got, err)
	}
	other := etcdstore.NewTopics(cli, etcdstore.Prefix("/tenure/"))
	second := &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{2}, Partitions: 8}
	got, err = other.CreateTopic(ctx, second)
	if err != nil || *got != *first {
		t.Fatalf("second creation: %+v, %v; want the first's topic", got, err)
	}
	if _, err := other.CreateTopic(ctx, &coordinator.TopicRecord{Name: "audit", ID: coordinator.TopicID{3}, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	all, err := s.LoadTopics(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "audit" || *all[1] != *first {
		t.Fatalf("LoadTopics: %v %v", all, err)
	}
	// The store's Load returns them too, as records.
	recs, err := s.Load(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("Load: %d records, %v", len(recs), err)
	}
}

// TestTopicsDeleteIfSame: a deletion names the topic by name and ID; it
// deletes it through the store or through another node's Topics, the
// deletion holds for a store opened afterwards (a restart), and a
// deletion naming an ID the name no longer has (the topic was deleted and
// created again) deletes nothing.
func TestTopicsDeleteIfSame(t *testing.T) {
	s, cli, prefix := open(t)
	ctx := testenv.Context(t)
	jobs := &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{1}, Partitions: 8}
	audit := &coordinator.TopicRecord{Name: "audit", ID: coordinator.TopicID{2}, Partitions: 1}
	again := &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{3}, Partitions: 4}
	for _, r := range []*coordinator.TopicRecord{jobs, audit} {
		if _, err := s.CreateTopic(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	other := etcdstore.NewTopics(cli, etcdstore.Prefix(prefix))
	deleteTopic := func(ts store.TopicStore, r *coordinator.TopicRecord, want bool) {
		t.Helper()
		if deleted, err := ts.DeleteTopic(ctx, r); err != nil || deleted != want {
			t.Fatalf("DeleteTopic(%s %x): %v, %v; want %v", r.Name, r.ID, deleted, err, want)
		}
	}
	topics := func(ts store.TopicStore, want ...*coordinator.TopicRecord) {
		t.Helper()
		got, err := ts.LoadTopics(ctx)
		if err != nil || len(got) != len(want) {
			t.Fatalf("LoadTopics: %v, %v; want %v", got, err, want)
		}
		for i := range got {
			if *got[i] != *want[i] {
				t.Fatalf("LoadTopics: %v; want %v", got, want)
			}
		}
	}
	deleteTopic(other, &coordinator.TopicRecord{Name: "jobs", ID: again.ID}, false)
	deleteTopic(other, jobs, true)
	deleteTopic(s, jobs, false)
	deleteTopic(s, &coordinator.TopicRecord{Name: "nowhere", ID: jobs.ID}, false)
	topics(s, audit)
	if _, err := other.CreateTopic(ctx, again); err != nil {
		t.Fatal(err)
	}
	deleteTopic(s, jobs, false)
	s.Close()
	if _, err := s.DeleteTopic(ctx, again); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("DeleteTopic after Close: %v", err)
	}

	// A restart: a store opened afterwards on the prefix.
	s = openOn(t, cli, etcdstore.Prefix(prefix))
	topics(s, audit, again)
	deleteTopic(s, again, true)
	s.Close()
	s = openOn(t, cli, etcdstore.Prefix(prefix))
	topics(s, audit)
	if recs := load(t, s); len(recs) != 1 || *recs[0].(*coordinator.TopicRecord) != *audit {
		t.Fatalf("Load after the deletions: %v", recs)
	}
}

// TestDecode: what Persist wrote decodes back, key by key (an offset
// batch with OffsetWrites), as Load reads it; meta keys hold no record.
func TestDecode(t *testing.T) {
	s, cli := openWithPrefix(t, "/tenure/")
	recs := stableGroup(t, "decoded")
	persist(t, s, recs...)
	resp, err := cli.Get(testenv.Context(t), "/tenure/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	set := coordinator.NewRecordSet()
	meta := 0
	for _, kv := range resp.Kvs {
		r, ok, err := etcdstore.Decode("/tenure/", kv.Key, kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		writes, isOffsets, err := etcdstore.OffsetWrites("/tenure/", kv.Key, kv.Value, kv.ModRevision)
		if err != nil {
			t.Fatal(err)
		}
		if isOffsets {
			for _, w := range writes {
				set.Apply(w.Rec)
			}
			continue
		}
		if !ok {
			meta++
			continue
		}
		if err := set.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	if meta != 3 || len(set.Group("decoded")) != len(recs) {
		t.Fatalf("%d meta keys (format, shards, fence), %d records decoded, want 3 and %d", meta, len(set.Group("decoded")), len(recs))
	}
	r, ok, err := etcdstore.DeletedRecord("/tenure/", []byte("/tenure/groups/decoded/members/m1"))
	if err != nil || !ok || r.(*coordinator.MemberRecord).MemberID != "m1" {
		t.Fatalf("DeletedRecord: %+v %v %v", r, ok, err)
	}
}
