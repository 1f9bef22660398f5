package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// is acknowledged once, after its batch is durable. What a group queued
// while its writes were in flight goes out in one batch once they land.
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
	// Nothing of a flies now: what a queued meanwhile shares one batch,
	// in the order a made it.
	b4 := next()
	if got := b4.names(); !slices.Equal(got, []string{"o:a/0", "g:a", "o:a/2"}) {
		t.Fatalf("fourth batch %v, want a's three queued writes in order", got)
	}
	submit("a3", ga, offset("a", 3))
	idle("while a's group write is in flight")
	b4.open <- nil
	b5 := next()
	if got := b5.names(); !slices.Equal(got, []string{"o:a/3"}) {
		t.Fatalf("fifth batch %v", got)
	}
	b5.open <- nil
	b3.open <- nil
	waitAcked(7)
	got := ackedNames()
	// a's writes are acknowledged in the order they were made, except
	// a1, which flew beside a0.
	var ofA []string
	for _, n := range got {
		if n != "b-meta" {
			ofA = append(ofA, n)
		}
	}
	if want := []string{"a1", "a0", "a0-again", "a-meta", "a2", "a3"}; !slices.Equal(ofA, want) {
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

// switchGate is a batchGate that holds batches only while on.
type switchGate struct {
	batchGate
	on atomic.Bool
}

func (s *switchGate) Persist(ctx context.Context, recs []coordinator.Record) error {
	if !s.on.Load() {
		return s.Store.Persist(ctx, recs)
	}
	return s.batchGate.Persist(ctx, recs)
}

// TestWriterFailureFailsLaterWrites: two offset commits of one group fly
// in two batches at once; the later batch lands first and the earlier one
// fails. Nothing is acknowledged out of order: the later commit, durable
// already, waits for the earlier one, and when that fails both are
// answered COORDINATOR_NOT_AVAILABLE, as is everything of the group that
// followed the failed write. The group then comes back from the store,
// which holds the later commit (landed, never acknowledged) and not the
// earlier one.
func TestWriterFailureFailsLaterWrites(t *testing.T) {
	gate := &switchGate{batchGate: batchGate{Store: store.NewMemory(), entered: make(chan *gatedBatch, 16)}}
	ts := startServer(t, func(c *Config) { c.Store, c.TopicStore = gate, gate.Store.(store.TopicStore) })
	first, second := dial(t, ts.addr), dial(t, ts.addr)
	first.roundTrip(metadataRequest(12, "jobs"))
	const id = "member-a-000000000000000"
	r := first.roundTrip(cgHeartbeat("g", id, 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("join: error %d", r.ErrorCode)
	}
	wr := ts.term(t).writer
	wr.mu.Lock()
	wr.minPipelined = 1
	wr.mu.Unlock()
	commit := func(p int32, offset int64) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "g", id, r.MemberEpoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "jobs"
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: p, Offset: offset, LeaderEpoch: -1}}
		req.Topics = append(req.Topics, rt)
		return req
	}
	next := func(want string) *gatedBatch {
		t.Helper()
		select {
		case b := <-gate.entered:
			if got := b.names(); !slices.Equal(got, []string{want}) {
				t.Fatalf("batch %v, want [%s]", got, want)
			}
			return b
		case <-time.After(10 * time.Second):
			t.Fatalf("no batch of %s was written", want)
			return nil
		}
	}

	gate.on.Store(true)
	first.send(commit(0, 10))
	b1 := next("o:g/0")
	second.send(commit(1, 11))
	b2 := next("o:g/1")
	// A heartbeat after both is held behind them too.
	hbCorr := second.send(cgHeartbeat("g", id, r.MemberEpoch))

	b2.open <- nil
	e := ts.term(t).groups.lookup("g")
	eventually(t, 10*time.Second, "the second batch acknowledged", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return slices.Equal(e.landed, []uint64{e.durable + 2})
	})
	if _, resp, err := second.tryRecv(200 * time.Millisecond); err == nil {
		t.Fatalf("the later commit was answered (%v) before the earlier one was durable", resp)
	}
	b1.open <- errors.New("injected store failure")
	for _, c := range []*rawClient{first, second, second} {
		corr, resp := c.recv()
		if code := responseCode(resp); code != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("response %d: error %d, want COORDINATOR_NOT_AVAILABLE", corr, code)
		}
	}
	if len(second.sent) != 0 || len(first.sent) != 0 {
		t.Fatalf("unanswered: %v %v (the heartbeat was %d)", first.sent, second.sent, hbCorr)
	}
	gate.on.Store(false)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "g"
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{fg}
	got := map[int32]int64{}
	eventually(t, 10*time.Second, "the group reloaded", func() bool {
		fr := first.roundTrip(fetch).(*kmsg.OffsetFetchResponse)
		if len(fr.Groups) != 1 || fr.Groups[0].ErrorCode != 0 {
			return false
		}
		clear(got)
		for _, rt := range fr.Groups[0].Topics {
			for _, p := range rt.Partitions {
				got[p.Partition] = p.Offset
			}
		}
		return true
	})
	if got[1] != 11 || got[0] != -1 && got[0] != 0 {
		t.Fatalf("offsets after the reload %v: want partition 1 at 11 (landed) and 0 uncommitted", got)
	}
}

// TestWriterGroupBatchFails: the writes a group queued behind one in
// flight share the next batch; when that batch fails, each of them is
// told so, and none is acknowledged as durable, while the write before
// them, whose batch landed, is.
func TestWriterGroupBatchFails(t *testing.T) {
	ts := startServer(t, nil)
	gate := &batchGate{Store: store.NewMemory(), entered: make(chan *gatedBatch, 16)}
	wr := newWriter(ts.Server, gate)
	go wr.run()
	defer wr.close()
	g := &groupEntry{name: "a"}
	var mu sync.Mutex
	outcome := map[string]error{}
	submit := func(name string) {
		wr.submit(&write{recs: []coordinator.Record{&coordinator.GroupRecord{Group: "a", Type: coordinator.Consumer}},
			group: g, live: func() bool { return true }, done: func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if _, twice := outcome[name]; twice {
					t.Errorf("write %s acknowledged twice", name)
				}
				outcome[name] = err
			}})
	}
	submit("first")
	first := <-gate.entered
	submit("second")
	submit("third")
	submit("fourth")
	first.open <- nil
	var next *gatedBatch
	select {
	case next = <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no second batch")
	}
	if got := next.names(); len(got) != 3 {
		t.Fatalf("second batch %v, want the three queued writes of a", got)
	}
	boom := errors.New("store down")
	next.open <- boom
	if !wr.drain(context.Background()) {
		t.Fatal("the writer did not drain")
	}
	mu.Lock()
	defer mu.Unlock()
	if err := outcome["first"]; err != nil {
		t.Errorf("first: %v, want durable", err)
	}
	for _, name := range []string{"second", "third", "fourth"} {
		if err, ok := outcome[name]; !ok || !errors.Is(err, boom) {
			t.Errorf("%s: outcome %v (told: %v), want %v", name, err, ok, boom)
		}
	}
}
