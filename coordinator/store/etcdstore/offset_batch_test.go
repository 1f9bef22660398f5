package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// offsetKey is what makes two offset records write the same partition.
type offsetKey struct {
	group, topic string
	partition    int32
}

// TestBatchesMatchRecordSet is the offset batches' property: commits,
// offset deletions, group deletions and other records, folds, and
// concurrent Persists of distinct partitions with folds beside them, in
// any interleaving, leave Load, LoadGroup and a Mirror following the
// prefix all holding what a RecordSet fed the same records holds. A small
// MaxTxnOps splits batches and folds into several transactions; a fold
// racing a group's other writes may stop half-way. Some runs start from a
// prefix of the layout before batches (format 3, a key per partition,
// written as that layout wrote it), which the store raises to format 5
// and then writes batches on.
func TestBatchesMatchRecordSet(t *testing.T) {
	cli := etcd.Client(t)
	n := smallNames()
	// Few groups, so that a group folded has several batches.
	groups := []string{"g", "h", "a/b", "\xff"}
	n.groups = rapid.SampledFrom(groups)
	offset := rapid.Map(n.offsetRecord(), func(r *coordinator.OffsetRecord) coordinator.Record { return r })
	anyRecord := rapid.OneOf(offset, offset, offset, n.record())
	rapid.Check(t, func(rt *rapid.T) {
		ctx := testenv.Context(t)
		prefix := uniquePrefix(t)
		maxOps := rapid.IntRange(3, 8).Draw(rt, "max-txn-ops")
		set := coordinator.NewRecordSet()
		if rapid.Bool().Draw(rt, "old-layout") {
			old := rapid.SliceOfN(n.offsetRecord(), 1, 12).Draw(rt, "old-offsets")
			var ops []clientv3.Op
			seen := map[offsetKey]bool{}
			for _, o := range old {
				o.Deleted = false
				if k := (offsetKey{o.Group, o.Topic, o.Partition}); !seen[k] {
					seen[k] = true
					set.Apply(o)
					keys, vals := etcdstore.OffsetKeyValues(prefix, []coordinator.Record{o})
					ops = append(ops, clientv3.OpPut(keys[0], vals[0]))
				}
			}
			ops = append(ops, clientv3.OpPut(prefix+"meta/format", "3"), clientv3.OpPut(prefix+"meta/shards", "1"))
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				rt.Fatal(err)
			}
		}
		m, err := etcdstore.NewMirror(ctx, cli, etcdstore.Prefix(prefix))
		if err != nil {
			rt.Fatalf("NewMirror: %v", err)
		}
		defer m.Close()
		s, err := etcdstore.New(ctx, cli, etcdstore.Prefix(prefix), etcdstore.MaxTxnOps(maxOps), etcdstore.FoldEvery(0))
		if err != nil {
			rt.Fatalf("New: %v", err)
		}
		defer s.Close()
		fold := func(g string) {
			if _, err := s.Fold(ctx, g); err != nil && !errors.Is(err, etcdstore.ErrFoldRaced) {
				rt.Fatalf("Fold(%q): %v", g, err)
			}
		}
		for step := range rapid.IntRange(1, 10).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("step-%d", step)) {
			case 0:
				recs := rapid.SliceOfN(anyRecord, 0, 12).Draw(rt, fmt.Sprintf("persist-%d", step))
				if err := s.Persist(ctx, recs); err != nil {
					rt.Fatalf("Persist: %v", err)
				}
				for _, r := range recs {
					set.Apply(r)
				}
			case 1:
				fold(rapid.SampledFrom(groups).Draw(rt, fmt.Sprintf("fold-%d", step)))
			case 3:
				// A fold with writes of any kind (commits, deletions of
				// offsets or of the group, its group record) between its
				// read and its transactions: it must neither undo a
				// newer commit nor bring back what a deletion deleted.
				g := rapid.SampledFrom(groups).Draw(rt, fmt.Sprintf("fold-%d", step))
				etcdstore.SetFoldHook(s, func(txn int) {
					var recs []coordinator.Record
					switch rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("during-fold-%d-%d", step, txn)) {
					case 1:
						recs = rapid.SliceOfN(anyRecord, 1, 4).Draw(rt, fmt.Sprintf("records-%d-%d", step, txn))
					case 2:
						gr := n.groupRecord().Draw(rt, fmt.Sprintf("deletion-%d-%d", step, txn))
						gr.Group, gr.Deleted = g, true
						recs = []coordinator.Record{gr}
					case 4:
						gr := n.groupRecord().Draw(rt, fmt.Sprintf("group-%d-%d", step, txn))
						gr.Group, gr.Deleted = g, false
						recs = []coordinator.Record{gr}
					case 3:
						for _, o := range rapid.SliceOfN(n.offsetRecord(), 1, 4).Draw(rt, fmt.Sprintf("commits-%d-%d", step, txn)) {
							o.Group = g
							recs = append(recs, o)
						}
					}
					if err := s.Persist(ctx, recs); err != nil {
						rt.Fatalf("Persist during a fold: %v", err)
					}
					for _, r := range recs {
						set.Apply(r)
					}
				})
				fold(g)
				etcdstore.SetFoldHook(s, nil)
			case 2:
				// Concurrent Persists of distinct keys (the Store's
				// contract), a fold, and a group record written meanwhile,
				// which makes the fold give way where it races it.
				g := rapid.SampledFrom(groups).Draw(rt, fmt.Sprintf("fold-%d", step))
				var batches [][]coordinator.Record
				seen := map[offsetKey]bool{}
				for i := range rapid.IntRange(2, 3).Draw(rt, fmt.Sprintf("writers-%d", step)) {
					var recs []coordinator.Record
					for _, o := range rapid.SliceOfN(n.offsetRecord(), 1, 8).Draw(rt, fmt.Sprintf("concurrent-%d-%d", step, i)) {
						if k := (offsetKey{o.Group, o.Topic, o.Partition}); !seen[k] {
							seen[k] = true
							recs = append(recs, o)
						}
					}
					batches = append(batches, recs)
				}
				gr := n.groupRecord().Draw(rt, fmt.Sprintf("group-%d", step))
				gr.Group, gr.Deleted = g, false
				batches = append(batches, []coordinator.Record{gr})
				var wg sync.WaitGroup
				errs := make([]error, len(batches))
				for i, recs := range batches {
					wg.Go(func() { errs[i] = s.Persist(ctx, recs) })
				}
				wg.Go(func() { fold(g) })
				wg.Wait()
				for i, recs := range batches {
					if errs[i] != nil {
						rt.Fatalf("concurrent Persist: %v", errs[i])
					}
					for _, r := range recs {
						set.Apply(r)
					}
				}
			}
		}
		want := render(set.Records(), true)
		if got := render(mustLoad(rt, ctx, s), true); got != want {
			rt.Fatalf("Load:\n%swant:\n%s", got, want)
		}
		for _, g := range groups {
			got, err := s.LoadGroup(ctx, g)
			if err != nil {
				rt.Fatalf("LoadGroup(%q): %v", g, err)
			}
			if gr, w := render(got, true), render(set.Group(g), true); gr != w {
				rt.Fatalf("LoadGroup(%q):\n%swant:\n%s", g, gr, w)
			}
		}
		if _, err := m.Sync(ctx, -1); err != nil {
			rt.Fatalf("Sync: %v", err)
		}
		got, err := m.Records(-1)
		if err != nil {
			rt.Fatalf("mirror Records: %v", err)
		}
		if got := render(got, true); got != want {
			rt.Fatalf("mirror:\n%swant:\n%s", got, want)
		}
		for _, g := range groups {
			got, _, err := m.Group(g)
			if err != nil {
				rt.Fatalf("mirror Group(%q): %v", g, err)
			}
			if gr, w := render(got, true), render(set.Group(g), true); gr != w {
				rt.Fatalf("mirror Group(%q):\n%swant:\n%s", g, gr, w)
			}
		}
		// A last fold of every group changes none of it.
		for _, g := range groups {
			fold(g)
		}
		if got := render(mustLoad(rt, ctx, s), true); got != want {
			rt.Fatalf("Load after folding every group:\n%swant:\n%s", got, want)
		}
	})
}

func mustLoad(rt *rapid.T, ctx context.Context, s *etcdstore.Store) []coordinator.Record {
	recs, err := s.Load(ctx)
	if err != nil {
		rt.Fatalf("Load: %v", err)
	}
	return recs
}

// TestFoldErrorsCounted: tenure_store_errors_total{op="fold"} counts a
// fold that failed (here a batch that does not decode), not one that gave
// way to a change of its group, which the next fold retries.
func TestFoldErrorsCounted(t *testing.T) {
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	reg := prometheus.NewRegistry()
	s := openOn(t, cli, etcdstore.Prefix(prefix), etcdstore.Registerer(reg), etcdstore.FoldEvery(0))
	ctx := testenv.Context(t)
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})
	persist(t, s, offsets("g", 2)...)

	etcdstore.SetFoldHook(s, func(txn int) {
		if txn == 0 {
			persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 2})
		}
	})
	if _, err := s.Fold(ctx, "g"); !errors.Is(err, etcdstore.ErrFoldRaced) {
		t.Fatalf("Fold with the group changed meanwhile: %v, want ErrFoldRaced", err)
	}
	etcdstore.SetFoldHook(s, nil)
	if got := counterValue(t, reg, "tenure_store_errors_total", "fold"); got != 0 {
		t.Fatalf("a fold that gave way counted %v errors, want 0", got)
	}

	if _, err := cli.Put(ctx, prefix+"groups/g/obatch/bad", "not a batch"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fold(ctx, "g"); err == nil || errors.Is(err, etcdstore.ErrFoldRaced) {
		t.Fatalf("Fold over a batch that does not decode: %v, want an error", err)
	}
	if got := counterValue(t, reg, "tenure_store_errors_total", "fold"); got != 1 {
		t.Fatalf("a failed fold counted %v errors, want 1", got)
	}
}

// TestFoldDecodesWinnersOnly: a fold reads every line of its batches but
// decodes only the values it writes back. A value no load could decode
// (a batch a load refuses) is dropped by the fold when a later write of
// its partition wins, and then loads read the winner; a winner that does
// not decode, or a batch naming a partition twice, fails the fold, which
// writes nothing.
func TestFoldDecodesWinnersOnly(t *testing.T) {
	ctx := testenv.Context(t)
	t.Run("loser", func(t *testing.T) {
		s, cli, prefix := open(t, etcdstore.FoldEvery(0))
		persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})
		if _, err := cli.Put(ctx, prefix+"groups/g/obatch/x-1", "t/0 {\"o\":\"not a number\"}\nt/1 -\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx); err == nil {
			t.Fatal("Load of a batch whose value does not decode: no error")
		}
		persist(t, s, offsets("g", 2)...)
		if _, err := s.Fold(ctx, "g"); err != nil {
			t.Fatalf("Fold: %v", err)
		}
		want := render(append([]coordinator.Record{&coordinator.GroupRecord{Group: "g", Epoch: 1}}, offsets("g", 2)...), true)
		if got := render(load(t, s), true); got != want {
			t.Fatalf("Load after the fold:\n%swant:\n%s", got, want)
		}
		if n := countKeys(t, cli, prefix+"groups/g/obatch/"); n != 0 {
			t.Fatalf("%d batches left after the fold, want 0", n)
		}
	})
	for name, bad := range map[string]string{
		"winner":    "t/0 {\"o\":\"not a number\"}\n",
		"fr":        "t/0 {\"o\":1,\"fr\":3}\n",
		"twice":     "t/1 -\nt/1 -\n",
		"partition": "t/01 -\n",
		"topic":     "a%/0 -\n",
	} {
		t.Run(name, func(t *testing.T) {
			s, cli, prefix := open(t, etcdstore.FoldEvery(0))
			persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 1})
			persist(t, s, offsets("g", 2)...)
			if _, err := s.Fold(ctx, "g"); err != nil {
				t.Fatalf("Fold: %v", err)
			}
			before, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(ctx, prefix+"groups/g/obatch/x-1", bad); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Fold(ctx, "g"); err == nil || errors.Is(err, etcdstore.ErrFoldRaced) {
				t.Fatalf("Fold over %q: %v, want an error", bad, err)
			}
			after, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Kvs) != len(before.Kvs)+1 || after.Header.Revision != before.Header.Revision+1 {
				t.Fatalf("the failed fold wrote: %d keys at revision %d, then %d at %d (the batch's put only)",
					len(before.Kvs), before.Header.Revision, len(after.Kvs), after.Header.Revision)
			}
		})
	}
}

// TestFoldWaitsLonger: a group whose fold wrote many partition keys a
// batch waits for more batches before the next (up to four times
// FoldEvery); one whose fold wrote few, and one deleted, go back to
// FoldEvery. Loads read the same throughout.
func TestFoldWaitsLonger(t *testing.T) {
	s, cli, prefix := open(t, etcdstore.FoldEvery(2))
	batches := func() int64 { return countKeys(t, cli, prefix+"groups/g/obatch/") }
	settle := func(wantEvery int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			every, running := etcdstore.FoldWait(s, "g")
			if !running && every == wantEvery {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the next fold waits for %d batches (running %v), want %d", every, running, wantEvery)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	group := &coordinator.GroupRecord{Group: "g", Epoch: 1}
	persist(t, s, group)
	wide := offsets("g", 40) // 40 partitions a batch: a fold writes 20 a batch
	commit := func(recs []coordinator.Record, offset int64) {
		t.Helper()
		for _, r := range recs {
			r.(*coordinator.OffsetRecord).Offset = offset
		}
		persist(t, s, recs...)
	}
	commit(wide, 1)
	settle(2)
	commit(wide, 2) // the second batch: a fold of 40 partition keys
	settle(8)
	if n := batches(); n != 0 {
		t.Fatalf("%d batches after the first fold, want 0", n)
	}
	for i := range 7 {
		commit(wide, int64(3+i))
	}
	settle(8)
	if n := batches(); n != 7 {
		t.Fatalf("%d batches after 7 more, want 7 (no fold yet)", n)
	}
	narrow := wide[:1]
	commit(narrow, 10) // the eighth: a fold of 40 keys again
	settle(8)
	if n := batches(); n != 0 {
		t.Fatalf("%d batches after the eighth, want 0", n)
	}
	for i := range 8 {
		commit(narrow, int64(11+i)) // a fold of one key
	}
	settle(2)
	if n := batches(); n != 0 {
		t.Fatalf("%d batches after 8 of one partition, want 0", n)
	}
	want := []coordinator.Record{group}
	for i, r := range wide {
		o := *r.(*coordinator.OffsetRecord)
		o.Offset = 9
		if i == 0 {
			o.Offset = 18
		}
		want = append(want, &o)
	}
	if got, w := render(load(t, s), true), render(want, true); got != w {
		t.Fatalf("Load:\n%swant:\n%s", got, w)
	}

	for i := range 2 {
		commit(wide, int64(20+i))
	}
	settle(8)
	persist(t, s, &coordinator.GroupRecord{Group: "g", Epoch: 2, Deleted: true})
	if every, _ := etcdstore.FoldWait(s, "g"); every != 2 {
		t.Fatalf("after the group's deletion its next fold waits for %d batches, want 2", every)
	}
}
