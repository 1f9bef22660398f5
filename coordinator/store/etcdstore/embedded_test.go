package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// childDirEnv makes the test binary an embedded etcd with a store in the
// directory it names (embeddedChild), for TestEmbeddedKill9.
const childDirEnv = "TENURE_ETCDSTORE_CHILD_DIR"

// childRecords is what the child persists before it says so.
func childRecords() []coordinator.Record {
	return append([]coordinator.Record{&coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 42}}, offsets("g", 64)...)
}

// embeddedChild starts an embedded etcd in dir, persists childRecords,
// prints "persisted" and waits to be killed.
func embeddedChild(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := embedetcd.Start(ctx, dir, zap.NewNop())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := etcdstore.New(ctx, e.Client(), e.StoreOpts()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.Persist(ctx, childRecords()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("persisted")
	<-ctx.Done()
	return 1
}

// startEmbedded starts an embedded etcd in dir, stopped when t ends.
func startEmbedded(t *testing.T, dir string, log *zap.Logger) *embedetcd.Etcd {
	t.Helper()
	e, err := embedetcd.Start(testenv.Context(t), dir, log)
	if err != nil {
		t.Fatalf("embedetcd.Start: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestEmbeddedRestart(t *testing.T) {
	dir := t.TempDir() + "/data" // created by StartEmbedded
	core, logs := observer.New(zapcore.InfoLevel)
	e := startEmbedded(t, dir, zap.New(core))
	if logs.FilterMessage("embedded etcd started").FilterField(zap.String("data_dir", dir)).Len() != 1 {
		t.Errorf("no start-up log naming the data dir; logs: %v", logs.All())
	}
	s := openOn(t, e.Client(), e.StoreOpts()...)
	recs := fullRecords()
	persist(t, s, recs...)
	s.Close()
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, l := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		t.Errorf("error logged by a normal start and stop: %s %v", l.Message, l.ContextMap())
	}

	e = startEmbedded(t, dir, testLogger(t))
	s = openOn(t, e.Client(), e.StoreOpts()...)
	if got, want := render(load(t, s), true), render(recs, true); got != want {
		t.Fatalf("after a restart:\n%swant:\n%s", got, want)
	}
}

// TestEmbeddedSideBySide runs two servers at once, and writes through one
// what only the raised limits allow: 8,000 records of 600 bytes, about 5
// MB, in one transaction.
func TestEmbeddedSideBySide(t *testing.T) {
	a := startEmbedded(t, t.TempDir(), testLogger(t))
	b := startEmbedded(t, t.TempDir(), testLogger(t))
	if a.Endpoint() == b.Endpoint() {
		t.Fatalf("both servers at %s", a.Endpoint())
	}
	sa := openOn(t, a.Client(), a.StoreOpts()...)
	sb := openOn(t, b.Client(), b.StoreOpts()...)
	md := strings.Repeat("m", 600)
	var big []coordinator.Record
	for i := range 8000 {
		big = append(big, &coordinator.OffsetRecord{Group: "a", Topic: fmt.Sprint("t", i/1000), Partition: int32(i % 1000), Metadata: &md})
	}
	persist(t, sa, big...)
	persist(t, sb, &coordinator.GroupRecord{Group: "b", Epoch: 1})
	if got := len(load(t, sa)); got != len(big) {
		t.Errorf("a holds %d records, want %d", got, len(big))
	}
	if got := render(load(t, sb), true); got != render([]coordinator.Record{&coordinator.GroupRecord{Group: "b", Epoch: 1}}, true) {
		t.Errorf("b holds:\n%s", got)
	}
}

// TestEmbeddedKill9 kills a process running an embedded etcd right after
// a Persist returned, and finds the records in its data directory: fsync
// is on, and the restart on the same directory (with other ports) works.
func TestEmbeddedKill9(t *testing.T) {
	dir := t.TempDir()
	cmd, lines := testenv.StartChild(t, childDirEnv, dir)
	persisted := false
	for !persisted && lines.Scan() {
		persisted = lines.Text() == "persisted"
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	if !persisted {
		t.Fatal("the child did not persist")
	}
	e := startEmbedded(t, dir, testLogger(t))
	s := openOn(t, e.Client(), e.StoreOpts()...)
	set := coordinator.NewRecordSet()
	for _, r := range childRecords() {
		set.Apply(r)
	}
	if got, want := render(load(t, s), true), render(set.Records(), true); got != want {
		t.Fatalf("after kill -9 and restart:\n%swant:\n%s", got, want)
	}
}

// commitsChildDirEnv makes the test binary an embedded etcd with a store
// in the directory it names that commits offsets until it is killed
// (committingChild), for TestEmbeddedKill9Commits.
const commitsChildDirEnv = "TENURE_ETCDSTORE_COMMITS_CHILD_DIR"

// killPartitions and killPerRound shape the committing child's rounds:
// round r commits offset r to killPerRound of killPartitions partitions,
// starting at partition r*5, so that each partition's last commit is of
// a different round.
const killPartitions, killPerRound = 64, 16

func killRound(r int) []coordinator.Record {
	recs := make([]coordinator.Record, killPerRound)
	for i := range recs {
		recs[i] = &coordinator.OffsetRecord{Group: "g", Topic: "t", Partition: int32((r*5 + i) % killPartitions),
			Offset: int64(r), LeaderEpoch: -1, Token: 1, MemberID: "m"}
	}
	return recs
}

// committingChild starts an embedded etcd in dir and, with a store that
// folds every 4 batches, persists killRound(1), killRound(2), ...,
// printing "acked r" once round r's Persist returned.
func committingChild(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := embedetcd.Start(ctx, dir, zap.NewNop())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := etcdstore.New(ctx, e.Client(), append(e.StoreOpts(), etcdstore.FoldEvery(4))...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for r := 1; ctx.Err() == nil; r++ {
		if err := s.Persist(ctx, killRound(r)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("acked", r)
	}
	return 1
}

// TestEmbeddedKill9Commits kills a process committing offsets (offset
// batches, folded every 4 in the background, so the kill may fall in a
// fold) with SIGKILL, and finds every acknowledged commit in its data
// directory: each partition holds the offset of its last acknowledged
// round, or of a later round that wrote it (the one in flight, which may
// have landed).
func TestEmbeddedKill9Commits(t *testing.T) {
	dir := t.TempDir()
	cmd, lines := testenv.StartChild(t, commitsChildDirEnv, dir)
	acked := 0
	for acked < 60 && lines.Scan() {
		fmt.Sscanf(lines.Text(), "acked %d", &acked)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	for lines.Scan() { // printed before the kill
		fmt.Sscanf(lines.Text(), "acked %d", &acked)
	}
	cmd.Wait()
	if acked < 60 {
		t.Fatalf("the child acknowledged %d rounds", acked)
	}
	e := startEmbedded(t, dir, testLogger(t))
	s := openOn(t, e.Client(), e.StoreOpts()...)
	// The rounds that wrote each partition, and the last acknowledged.
	wrote := map[int32][]int64{}
	for r := 1; r <= acked+1; r++ {
		for _, rec := range killRound(r) {
			o := rec.(*coordinator.OffsetRecord)
			wrote[o.Partition] = append(wrote[o.Partition], o.Offset)
		}
	}
	got := map[int32]int64{}
	for _, rec := range load(t, s) {
		o := rec.(*coordinator.OffsetRecord)
		got[o.Partition] = o.Offset
	}
	for p := range int32(killPartitions) {
		var last int64
		for _, r := range wrote[p] {
			if r <= int64(acked) {
				last = r
			}
		}
		o, ok := got[p]
		switch {
		case !ok:
			t.Errorf("partition %d: no offset, want round %d's", p, last)
		case o < last:
			t.Errorf("partition %d: offset %d, but round %d, acknowledged, committed %d", p, o, last, last)
		case o > last && !slices.Contains(wrote[p], o):
			t.Errorf("partition %d: offset %d, which no round wrote", p, o)
		case o > int64(acked)+1:
			t.Errorf("partition %d: offset %d, past the round in flight (%d acknowledged)", p, o, acked)
		}
	}
	t.Logf("%d rounds acknowledged; partitions read back: %d", acked, len(got))
}
