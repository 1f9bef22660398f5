package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// openShard opens shard index of count under prefix, closed when t ends.
func openShard(t *testing.T, cli *clientv3.Client, prefix string, index, count int, opts ...etcdstore.Opt) *etcdstore.Store {
	t.Helper()
	return openOn(t, cli, append([]etcdstore.Opt{etcdstore.Prefix(prefix), etcdstore.Shard(index, count)}, opts...)...)
}

func getValue(t *testing.T, cli *clientv3.Client, key string) (string, bool) {
	t.Helper()
	resp, err := cli.Get(testenv.Context(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

// shardGroup is a small group with a member, an assignment and offsets.
func shardGroup(g string, epoch int32, member string) []coordinator.Record {
	return []coordinator.Record{
		&coordinator.GroupRecord{Group: g, Type: coordinator.Consumer, Epoch: epoch},
		&coordinator.MemberRecord{Group: g, MemberID: member, Topics: []string{"t"}},
		&coordinator.AssignmentRecord{Group: g, MemberID: member, MemberEpoch: epoch},
		&coordinator.OffsetRecord{Group: g, Topic: "t", Partition: 0, Offset: int64(epoch)},
		&coordinator.OffsetRecord{Group: g, Topic: "u", Partition: 1, Offset: int64(epoch)},
	}
}

// TestShardsApart: two shards' stores of one prefix keep their groups
// apart, a group of one name in both included, and share the topics and
// the generation logs; a load reads no other shard's key.
func TestShardsApart(t *testing.T) {
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	ctx := testenv.Context(t)
	a := openShard(t, cli, prefix, 3, 8)
	b := openShard(t, cli, prefix, 5, 8)

	topic := &coordinator.TopicRecord{Name: "t", ID: coordinator.TopicID{1}, Partitions: 4}
	aRecs := append(shardGroup("g", 4, "ma"), shardGroup("only-a", 1, "m")...)
	bRecs := append(shardGroup("g", 9, "mb"), shardGroup("a/b", 2, "m")...)
	persist(t, a, append([]coordinator.Record{topic}, aRecs...)...)
	persist(t, b, bRecs...)
	persist(t, a, &coordinator.GenerationRecord{Group: "g", Epoch: 4, Reason: "member-joined"})

	want := func(recs ...coordinator.Record) string {
		set := coordinator.NewRecordSet()
		for _, r := range recs {
			set.Apply(r)
		}
		return render(set.Records(), true)
	}
	if got, w := render(load(t, a), true), want(append([]coordinator.Record{topic}, aRecs...)...); got != w {
		t.Fatalf("Load of shard 3:\n%swant:\n%s", got, w)
	}
	if got, w := render(load(t, b), true), want(append([]coordinator.Record{topic}, bRecs...)...); got != w {
		t.Fatalf("Load of shard 5:\n%swant:\n%s", got, w)
	}
	if got, w := render(loadGroup(t, b, "g"), true), render(bRecs[:5], true); got != w {
		t.Fatalf("LoadGroup(g) of shard 5:\n%swant:\n%s", got, w)
	}
	if got := loadGroup(t, a, "a/b"); got != nil {
		t.Fatalf("shard 3 loads shard 5's group: %v", got)
	}
	if n := countKeys(t, cli, prefix+"groups/"); n != 0 {
		t.Fatalf("%d keys in the unsharded groups directory", n)
	}
	// Its group, member and assignment keys, and one batch of its two
	// offsets.
	if n := countKeys(t, cli, prefix+"shards/3/groups/g/"); n != 4 {
		t.Fatalf("%d keys of g in shard 3, want 4", n)
	}
	// The log is every shard's: any store, and a node without one, reads it.
	for _, ls := range []interface {
		LoadLog(context.Context, string, int32, int) ([]*coordinator.GenerationRecord, error)
	}{a, b, etcdstore.NewLogs(cli, etcdstore.Prefix(prefix))} {
		if log, err := ls.LoadLog(ctx, "g", 0, 0); err != nil || len(log) != 1 || log[0].Epoch != 4 {
			t.Fatalf("LoadLog(g): %v, %v", log, err)
		}
	}

	// Deleting g in shard 3, and the offsets of topic u in shard 5's
	// other group, leaves shard 5's g as it was.
	persist(t, a, &coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 4, Deleted: true})
	persist(t, b, &coordinator.OffsetRecord{Group: "a/b", Topic: "u", Partition: 1, Deleted: true})
	if got, w := render(loadGroup(t, a, "g"), true), want(&coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 4, Deleted: true}); got != w {
		t.Fatalf("shard 3's g after its deletion:\n%swant:\n%s", got, w)
	}
	if got, w := render(loadGroup(t, b, "g"), true), render(bRecs[:5], true); got != w {
		t.Fatalf("shard 5's g after shard 3's deletion:\n%swant:\n%s", got, w)
	}
	if got, w := render(loadGroup(t, b, "a/b"), true), render(bRecs[5:9], true); got != w {
		t.Fatalf("shard 5's a/b after the offset deletion:\n%swant:\n%s", got, w)
	}

	// A load reads its shard only: a key no layout has, in shard 5's
	// directory, fails shard 5's loads and not shard 3's.
	bad := prefix + "shards/5/groups/g/what"
	if _, err := cli.Put(ctx, bad, "{}"); err != nil {
		t.Fatal(err)
	}
	load(t, a)
	if _, err := b.Load(ctx); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Load of shard 5 with a bad key: %v, want an error naming it", err)
	}
	if _, err := b.LoadGroup(ctx, "g"); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("LoadGroup of shard 5 with a bad key: %v, want an error naming it", err)
	}
	if _, err := cli.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}

	// Every key decodes, whatever its shard (the chaos checker reads the
	// history so).
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	decoded := 0
	for _, kv := range resp.Kvs {
		if _, ok, err := etcdstore.Decode(prefix, kv.Key, kv.Value); err != nil {
			t.Fatalf("Decode: %v", err)
		} else if ok {
			decoded++
		}
		// An offset batch holds several records.
		if writes, _, err := etcdstore.OffsetWrites(prefix, kv.Key, kv.Value, kv.ModRevision); err != nil {
			t.Fatalf("OffsetWrites: %v", err)
		} else if _, batch, _ := etcdstore.Decode(prefix, kv.Key, kv.Value); !batch {
			decoded += len(writes)
		}
	}
	// a/b: its group, member and assignment keys, its two commits and
	// the later deletion of one (two batches).
	if want := 1 + 1 + 5 + 6 + 5 + 1; decoded != want {
		t.Fatalf("%d records decoded, want %d (topic, tombstone, shard 3's only-a, shard 5's a/b and g, log)", decoded, want)
	}
	r, ok, err := etcdstore.DeletedRecord(prefix, []byte(prefix+"shards/5/groups/g/members/mb"))
	if err != nil || !ok || r.(*coordinator.MemberRecord).Group != "g" {
		t.Fatalf("DeletedRecord of a shard key: %+v %v %v", r, ok, err)
	}
}

// TestShardFence: each shard has its own fence. Opening shard 3 does not
// fence shard 5's store; opening shard 5 again does.
func TestShardFence(t *testing.T) {
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	s5 := openShard(t, cli, prefix, 5, 8)
	persist(t, s5, &coordinator.GroupRecord{Group: "g", Epoch: 1})
	s3 := openShard(t, cli, prefix, 3, 8)
	persist(t, s5, &coordinator.GroupRecord{Group: "g", Epoch: 2})
	persist(t, s3, &coordinator.GroupRecord{Group: "h", Epoch: 1})

	again := openShard(t, cli, prefix, 5, 8)
	err := s5.Persist(testenv.Context(t), []coordinator.Record{&coordinator.GroupRecord{Group: "g", Epoch: 3}})
	if !errors.Is(err, etcdstore.ErrFenced) {
		t.Fatalf("Persist of shard 5's first store after a second opened: %v, want ErrFenced", err)
	}
	persist(t, again, &coordinator.GroupRecord{Group: "g", Epoch: 4})
	persist(t, s3, &coordinator.GroupRecord{Group: "h", Epoch: 2})
	if got := load(t, s5)[0].(*coordinator.GroupRecord).Epoch; got != 4 {
		t.Fatalf("shard 5's g at epoch %d, want 4", got)
	}

	for _, key := range []string{"meta/shards/3/fence", "meta/shards/5/fence"} {
		if _, ok := getValue(t, cli, prefix+key); !ok {
			t.Errorf("no %s", key)
		}
	}
	if _, ok := getValue(t, cli, prefix+"meta/fence"); ok {
		t.Error("a sharded prefix has the unsharded fence")
	}
}

// TestShardCount: the count is fixed by the first store on a prefix; a
// prefix without the key (written before there were shards) is unsharded.
func TestShardCount(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	newStore := func(prefix string, index, count int) error {
		s, err := etcdstore.New(ctx, cli, etcdstore.Prefix(prefix), etcdstore.Shard(index, count), etcdstore.Logger(testLogger(t)))
		if err == nil {
			s.Close()
		}
		return err
	}
	mismatch := func(prefix string, index, count int, recorded string) {
		t.Helper()
		before := countKeys(t, cli, prefix)
		err := newStore(prefix, index, count)
		if !errors.Is(err, etcdstore.ErrShardCount) {
			t.Fatalf("New of shard %d of %d on a prefix of %s: %v, want ErrShardCount", index, count, recorded, err)
		}
		for _, want := range []string{recorded, fmt.Sprintf("opened for %d shard", count), "fixed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q: %v", want, err)
			}
		}
		if after := countKeys(t, cli, prefix); after != before {
			t.Errorf("a refused New wrote: %d keys, was %d", after, before)
		}
		t.Log(err)
	}
	layout := func(prefix, format, shards string) {
		t.Helper()
		f, _ := getValue(t, cli, prefix+"meta/format")
		c, _ := getValue(t, cli, prefix+"meta/shards")
		if f != format || c != shards {
			t.Fatalf("format %q and shard count %q, want %q and %q", f, c, format, shards)
		}
	}

	t.Run("unsharded then sharded", func(t *testing.T) {
		s, _, prefix := open(t)
		persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})
		layout(prefix, "5", "1")
		mismatch(prefix, 0, 4, "1 shard (unsharded)")
		// Shard(0, 1) is the unsharded layout.
		if err := newStore(prefix, 0, 1); err != nil {
			t.Fatalf("Shard(0, 1) on an unsharded prefix: %v", err)
		}
	})
	t.Run("unsharded before the count was recorded", func(t *testing.T) {
		prefix := uniquePrefix(t)
		if _, err := cli.Put(ctx, prefix+"meta/format", "3"); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, prefix+"groups/g/group", `{"t":2,"e":7}`); err != nil {
			t.Fatal(err)
		}
		mismatch(prefix, 1, 2, "1 shard (unsharded)")
		s := openOn(t, cli, etcdstore.Prefix(prefix))
		layout(prefix, "5", "1")
		if got := load(t, s); len(got) != 1 {
			t.Fatalf("loaded %d records, want the group", len(got))
		}
	})
	t.Run("sharded then another count", func(t *testing.T) {
		prefix := uniquePrefix(t)
		if err := newStore(prefix, 1, 4); err != nil {
			t.Fatal(err)
		}
		layout(prefix, "5", "4")
		mismatch(prefix, 1, 8, "4 shards")
		mismatch(prefix, 0, 1, "4 shards")
		mismatch(prefix, 0, 2, "4 shards")
		if err := newStore(prefix, 3, 4); err != nil {
			t.Fatalf("another shard of the count: %v", err)
		}
	})
	t.Run("a count without a format", func(t *testing.T) {
		// The HA set records the count when its first node joins,
		// before any store opens the prefix.
		prefix := uniquePrefix(t)
		if _, err := cli.Put(ctx, prefix+"meta/shards", "4"); err != nil {
			t.Fatal(err)
		}
		mismatch(prefix, 0, 2, "4 shards")
		if err := newStore(prefix, 0, 4); err != nil {
			t.Fatalf("New on a prefix whose count the HA set recorded: %v", err)
		}
		resp, err := cli.Get(ctx, prefix+"meta/format")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "5" {
			t.Fatalf("format after New: %v %v, want 5", resp, err)
		}
	})
	t.Run("bad counts", func(t *testing.T) {
		for _, v := range []string{"0", "x", "04", "-1", ""} {
			prefix := uniquePrefix(t)
			if _, err := cli.Put(ctx, prefix+"meta/format", "4"); err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(ctx, prefix+"meta/shards", v); err != nil {
				t.Fatal(err)
			}
			if err := newStore(prefix, 0, 4); err == nil || !strings.Contains(err.Error(), "not a shard count") {
				t.Errorf("meta/shards %q: New returned %v, want an error", v, err)
			}
		}
	})
	t.Run("a sharded prefix of format 3 is raised", func(t *testing.T) {
		prefix := uniquePrefix(t)
		if _, err := cli.Put(ctx, prefix+"meta/format", "3"); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, prefix+"meta/shards", "2"); err != nil {
			t.Fatal(err)
		}
		openShard(t, cli, prefix, 1, 2)
		layout(prefix, "5", "2")
		// An unsharded store refuses it by its count, an older tenure
		// by its format.
		mismatch(prefix, 0, 1, "2 shards")
	})
}

// TestShardCountRace: first stores of different counts opening one new
// prefix at once: exactly one count wins, recorded with its format, and
// every other store fails with ErrShardCount.
func TestShardCountRace(t *testing.T) {
	cli := etcd.Client(t)
	counts := []int{1, 2, 3, 7}
	for round := range 8 {
		prefix := uniquePrefix(t)
		errs := make([]error, len(counts))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, n := range counts {
			wg.Go(func() {
				<-start
				s, err := etcdstore.New(testenv.Context(t), cli, etcdstore.Prefix(prefix), etcdstore.Shard(n-1, n))
				if err == nil {
					s.Close()
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: counts %d and %d both opened", round, counts[winner], counts[i])
			case err == nil:
				winner = i
			case !errors.Is(err, etcdstore.ErrShardCount):
				t.Fatalf("round %d: count %d: %v, want ErrShardCount", round, counts[i], err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no count opened: %v", round, errs)
		}
		format := "5"
		f, _ := getValue(t, cli, prefix+"meta/format")
		c, _ := getValue(t, cli, prefix+"meta/shards")
		if f != format || c != fmt.Sprint(counts[winner]) {
			t.Fatalf("round %d: count %d won, the prefix records format %q and count %q", round, counts[winner], f, c)
		}
	}
}

// TestShardGuard: each shard's store has its own guard (its shard owner
// key's); one that fails stops that store only.
func TestShardGuard(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	prefix := uniquePrefix(t)
	owner := func(s int) string { return fmt.Sprintf("%sowners/%d", prefix, s) }
	guard := func(s int, node string) etcdstore.Opt {
		return etcdstore.Guard(clientv3.Compare(clientv3.Value(owner(s)), "=", node))
	}
	for _, s := range []int{0, 1} {
		if _, err := cli.Put(ctx, owner(s), "n1"); err != nil {
			t.Fatal(err)
		}
	}
	// A guard that fails on a new prefix: New writes nothing, not even the
	// layout.
	if _, err := etcdstore.New(ctx, cli, etcdstore.Prefix(prefix+"store/"), etcdstore.Shard(0, 2), guard(0, "n2")); !errors.Is(err, etcdstore.ErrGuardFailed) {
		t.Fatalf("New with a failed guard: %v, want ErrGuardFailed", err)
	}
	if n := countKeys(t, cli, prefix+"store/"); n != 0 {
		t.Fatalf("New with a failed guard wrote %d keys", n)
	}

	s0 := openShard(t, cli, prefix+"store/", 0, 2, guard(0, "n1"), etcdstore.MaxTxnOps(3))
	s1 := openShard(t, cli, prefix+"store/", 1, 2, guard(1, "n1"))
	persist(t, s0, &coordinator.GroupRecord{Group: "g", Epoch: 1})

	// Shard 0 moves to n2.
	if _, err := cli.Put(ctx, owner(0), "n2"); err != nil {
		t.Fatal(err)
	}
	before := countKeys(t, cli, prefix)
	if err := s0.Persist(ctx, offsets("g", 10)); !errors.Is(err, etcdstore.ErrGuardFailed) {
		t.Fatalf("Persist of shard 0 with a failed guard: %v, want ErrGuardFailed", err)
	}
	if after := countKeys(t, cli, prefix); after != before {
		t.Fatalf("a failed guard wrote: %d keys before, %d after", before, after)
	}
	persist(t, s1, &coordinator.GroupRecord{Group: "h", Epoch: 1})
	if _, err := etcdstore.New(ctx, cli, etcdstore.Prefix(prefix+"store/"), etcdstore.Shard(0, 2), guard(0, "n1")); !errors.Is(err, etcdstore.ErrGuardFailed) {
		t.Fatalf("New of shard 0 with a failed guard: %v, want ErrGuardFailed", err)
	}
	// n2 opens shard 0 with its own guard; n1's shard 1 goes on.
	n2 := openShard(t, cli, prefix+"store/", 0, 2, guard(0, "n2"))
	persist(t, n2, &coordinator.GroupRecord{Group: "g", Epoch: 2})
	persist(t, s1, &coordinator.GroupRecord{Group: "h", Epoch: 2})
}

// TestSharedMetrics: stores open at once on one Registerer (a node's
// shards) share the metrics, which stay registered until the last one
// closes, and register again for a store opened afterwards.
func TestSharedMetrics(t *testing.T) {
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	reg := prometheus.NewRegistry()
	names := func() []string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mf := range mfs {
			out = append(out, mf.GetName())
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() != "op" {
						t.Errorf("%s has a label %q", mf.GetName(), l.GetName())
					}
				}
			}
		}
		return out
	}
	all := []string{"tenure_store_busy_retries_total", "tenure_store_errors_total", "tenure_store_txn_bytes", "tenure_store_txn_records", "tenure_store_write_seconds"}

	a := openShard(t, cli, prefix, 0, 2, etcdstore.Registerer(reg))
	b := openShard(t, cli, prefix, 1, 2, etcdstore.Registerer(reg))
	// An unsharded store of another prefix, as a new term's store that
	// opens before the old one closed.
	c := openOn(t, cli, etcdstore.Prefix(uniquePrefix(t)), etcdstore.Registerer(reg))
	persist(t, a, &coordinator.GroupRecord{Group: "g", Epoch: 1})
	persist(t, b, &coordinator.GroupRecord{Group: "h", Epoch: 1})
	persist(t, c, &coordinator.GroupRecord{Group: "i", Epoch: 1})
	if n := txnCount(t, reg); n != 3 {
		t.Fatalf("%d transactions counted, want the three stores' 3", n)
	}
	a.Close()
	c.Close()
	persist(t, b, &coordinator.GroupRecord{Group: "h", Epoch: 2})
	if got := names(); !slices.Equal(got, all) {
		t.Fatalf("metrics with one store left open: %v, want %v", got, all)
	}
	if n := txnCount(t, reg); n != 4 {
		t.Fatalf("%d transactions counted after two stores closed, want 4", n)
	}
	b.Close()
	if got := names(); len(got) != 0 {
		t.Fatalf("metrics after every store closed: %v", got)
	}
	again := openShard(t, cli, prefix, 1, 2, etcdstore.Registerer(reg))
	persist(t, again, &coordinator.GroupRecord{Group: "h", Epoch: 3})
	if n := txnCount(t, reg); n != 1 {
		t.Fatalf("%d transactions counted by a store opened after all closed, want 1", n)
	}

	// Opened and closed at once, from many goroutines: the set is
	// registered as long as one is open, and nothing fails.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			s, err := etcdstore.New(testenv.Context(t), cli, etcdstore.Prefix(prefix), etcdstore.Shard(i%2, 2), etcdstore.Registerer(reg))
			if err != nil {
				t.Errorf("New: %v", err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	if got := names(); !slices.Equal(got, all) {
		t.Fatalf("metrics with one store open after the others came and went: %v", got)
	}
	again.Close()
	if got := names(); len(got) != 0 {
		t.Fatalf("metrics after every store closed: %v", got)
	}
}
