package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// batchGate is a store whose every Persist call waits until the test opens
// it, so that the test sees which batches the writer has in flight at once.
type batchGate struct {
	store.Store
	entered chan *gatedBatch
}

type gatedBatch struct {
	recs []coordinator.Record
	open chan error
}

func (s *batchGate) Persist(ctx context.Context, recs []coordinator.Record) error {
	b := &gatedBatch{recs: recs, open: make(chan error)}
	s.entered <- b
	if err := <-b.open; err != nil {
		return err
	}
	return s.Store.Persist(ctx, recs)
}

// names lists what a batch holds: o:<group>/<partition> for an offset,
// g:<group> for a GroupRecord.
func (b *gatedBatch) names() []string {
	var out []string
	for _, r := range b.recs {
		switch r := r.(type) {
		case *coordinator.OffsetRecord:
			out = append(out, fmt.Sprintf("o:%s/%d", r.Group, r.Partition))
		case *coordinator.GroupRecord:
			out = append(out, "g:"+r.Group)
		}
	}
	return out
}

// TestWriterPipeline: the writer writes independent batches at once and
// keeps dependent writes apart and in order. Offset writes of one group on
// different partitions fly together; a second commit of a partition in
// flight waits for the first; a write of a group's state beyond its
// offsets waits for the group's writes in flight, and the group's later
// writes wait behind it while other groups' writes go on; and every write
// is acknowledged once, after its batch is durable.
func TestWriterPipeline(t *testing.T) {
	ts := startServer(t, nil)
	gate := &batchGate{Store: store.NewMemory(), entered: make(chan *gatedBatch, 16)}
	wr := newWriter(ts.Server, gate)
	wr.minPipelined = 1
	go wr.run()
	defer wr.close()

	ga, gb := &groupEntry{name: "a"}, &groupEntry{name: "b"}
	var mu sync.Mutex
	var acked []string
	submit := func(name string, e *groupEntry, recs ...coordinator.Record) {
		wr.submit(&write{recs: recs, group: e, live: func() bool { return true }, done: func(err error) {
			if err != nil {
				t.Errorf("write %s: %v", name, err)
			}
			mu.Lock()
			acked = append(acked, name)
			mu.Unlock()
		}})
	}
	offset := func(g string, p int32) coordinator.Record {
		return &coordinator.OffsetRecord{Group: g, Topic: "jobs", Partition: p, Offset: 1}
	}
	meta := func(g string) coordinator.Record {
		return &coordinator.GroupRecord{Group: g, Type: coordinator.Consumer}
	}
	next := func() *gatedBatch {
		t.Helper()
		select {
		case b := <-gate.entered:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("no batch was written")
			return nil
		}
	}
	idle := func(what string) {
		t.Helper()
		select {
		case b := <-gate.entered:
			t.Fatalf("%s: a batch of %v was written", what, b.names())
		case <-time.After(100 * time.Millisecond):
		}
	}
	ackedNames := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(acked)
	}
	waitAcked := func(n int) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%d acknowledgements", n), func() bool { return len(ackedNames()) >= n })
	}

	submit("a0", ga, offset("a", 0))
	b1 := next()
	if got := b1.names(); !slices.Equal(got, []string{"o:a/0"}) {
		t.Fatalf("first batch %v", got)
	}
	// Another partition of a flies beside it; partition 0 again, and
	// what follows of a, wait.
	submit("a1", ga, offset("a", 1))
	b2 := next()
	if got := b2.names(); !slices.Equal(got, []string{"o:a/1"}) {
		t.Fatalf("second batch %v", got)
	}
	submit("a0-again", ga, offset("a", 0))
	submit("a-meta", ga, meta("a"))
	submit("a2", ga, offset("a", 2))
	// b is independent of a.
	submit("b-meta", gb, meta("b"))
	b3 := next()
	if got := b3.names(); !slices.Equal(got, []string{"g:b"}) {
		t.Fatalf("third batch %v, want b's write alone", got)
	}
	idle("while a's partition 0 is in flight")

	// The second batch lands first: a1 is durable, but a0-again still
	// waits for the first.
	b2.open <- nil
	waitAcked(1)
	idle("after a's partition 1 landed")
	b1.open <- nil
	b4 := next()
	if got := b4.names(); !slices.Equal(got, []string{"o:a/0"}) {
		t.Fatalf("fourth batch %v, want a's partition 0 again", got)
	}
	idle("while a's commit is in flight, before its group write")
	b4.open <- nil
	b5 := next()
	if got := b5.names(); !slices.Equal(got, []string{"g:a"}) {
		t.Fatalf("fifth batch %v, want a's group write alone", got)
	}
	idle("while a's group write is in flight")
	b5.open <- nil
	b6 := next()
	if got := b6.names(); !slices.Equal(got, []string{"o:a/2"}) {
		t.Fatalf("sixth batch %v", got)
	}
	b6.open <- nil
	b3.open <- nil
	waitAcked(6)
	got := ackedNames()
	// a's writes are acknowledged in the order they were made, except
	// a1, which flew beside a0.
	var ofA []string
	for _, n := range got {
		if n != "b-meta" {
			ofA = append(ofA, n)
		}
	}
	if want := []string{"a1", "a0", "a0-again", "a-meta", "a2"}; !slices.Equal(ofA, want) {
		t.Fatalf("a's acknowledgements %v, want %v", ofA, want)
	}
	if !wr.drain(context.Background()) {
		t.Fatal("the writer did not drain")
	}
}

// TestLandedOutOfOrder: a group's durable watermark moves past a write
// only once every earlier write is durable, whatever order the writes land
// in, so no reply goes out before the writes its Ready followed.
func TestLandedOutOfOrder(t *testing.T) {
	s := &Server{}
	for _, order := range [][]uint64{{1, 2, 3, 4}, {2, 1, 4, 3}, {4, 3, 2, 1}, {3, 1, 4, 2}} {
		e := &groupEntry{issued: 4}
		var seen []uint64
		for _, seq := range order {
			s.landed(e, seq)
			seen = append(seen, e.durable)
		}
		// After each landing, durable is the longest prefix of 1..4
		// landed so far.
		var want []uint64
		done := map[uint64]bool{}
		for _, seq := range order {
			done[seq] = true
			d := uint64(0)
			for done[d+1] {
				d++
			}
			want = append(want, d)
		}
		if !slices.Equal(seen, want) || len(e.landed) != 0 {
			t.Errorf("landing %v: durable %v, want %v; left %v", order, seen, want, e.landed)
		}
	}
}

// TestWriterTrickle: while a batch is in flight, another starts only once
// enough records wait to be worth a transaction; until then they gather
// into the next batch.
func TestWriterTrickle(t *testing.T) {
	ts := startServer(t, nil)
	gate := &batchGate{Store: store.NewMemory(), entered: make(chan *gatedBatch, 16)}
	wr := newWriter(ts.Server, gate)
	wr.minPipelined = 3
	go wr.run()
	defer wr.close()
	submit := func(g string, p int32) {
		wr.submit(&write{recs: []coordinator.Record{&coordinator.OffsetRecord{Group: g, Topic: "jobs", Partition: p}},
			group: &groupEntry{name: g}, live: func() bool { return true }, done: func(error) {}})
	}
	submit("a", 0)
	first := <-gate.entered
	submit("b", 0)
	submit("c", 0)
	select {
	case b := <-gate.entered:
		t.Fatalf("a batch of %v started with two records waiting", b.names())
	case <-time.After(100 * time.Millisecond):
	}
	submit("d", 0)
	select {
	case b := <-gate.entered:
		if got := b.names(); !slices.Equal(got, []string{"o:b/0", "o:c/0", "o:d/0"}) {
			t.Fatalf("second batch %v", got)
		}
		b.open <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("no second batch with three records waiting")
	}
	first.open <- nil
	if !wr.drain(context.Background()) {
		t.Fatal("the writer did not drain")
	}
}
