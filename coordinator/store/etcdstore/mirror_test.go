package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

func openMirror(t *testing.T, cli *clientv3.Client, prefix string) *etcdstore.Mirror {
	t.Helper()
	m, err := etcdstore.NewMirror(testenv.Context(t), cli, etcdstore.Prefix(prefix), etcdstore.Logger(testLogger(t)))
	if err != nil {
		t.Fatalf("NewMirror: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// mirrorWrites are writes of every kind a store makes: new groups, a
// member's changes and removal, offsets committed and deleted, a group
// deleted (its tombstone and the range deletions of its keys), a topic.
func mirrorWrites(t *testing.T, s *etcdstore.Store, round int) {
	t.Helper()
	recs := stableGroup(t, "template")
	for i := range 3 {
		persist(t, s, testgroups.Renamed(recs, fmt.Sprintf("r%d-g%d", round, i))...)
	}
	g := fmt.Sprintf("r%d-g0", round)
	m := testgroups.Renamed(recs, g)[1].(*coordinator.MemberRecord)
	gone := *m
	gone.Deleted = true
	changed := *m
	changed.MemberID = "a-new-member-0000000000"
	persist(t, s,
		&coordinator.OffsetRecord{Group: g, Topic: testgroups.Topic.Name, Partition: 1, Offset: int64(100 + round)},
		&coordinator.OffsetRecord{Group: g, Topic: testgroups.Topic.Name, Partition: 2, Deleted: true},
		&gone, &changed)
	persist(t, s, &coordinator.GroupRecord{Group: fmt.Sprintf("r%d-g1", round), Type: coordinator.Consumer, Epoch: 99, Deleted: true})
	persist(t, s, &coordinator.TopicRecord{Name: fmt.Sprintf("topic-%d", round), ID: coordinator.TopicID{1, byte(round)}, Partitions: 4})
}

// sameAsStore checks that the mirror, synced, holds what the store
// loads: every record, and each group's as LoadGroup reads it.
func sameAsStore(t *testing.T, m *etcdstore.Mirror, s *etcdstore.Store, shard int) {
	t.Helper()
	if _, err := m.Sync(testenv.Context(t), shard); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := load(t, s)
	got, err := m.Records(shard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the mirror holds %d records, the store %d:\nmirror %v\nstore  %v", len(got), len(want), got, want)
	}
	for name := range m.Versions(shard) {
		recs, _, err := m.Group(name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.LoadGroup(testenv.Context(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(recs, want) {
			t.Fatalf("group %s: the mirror holds %v, the store %v", name, recs, want)
		}
	}
}

// TestMirrorFollows: a mirror opened on a store's prefix holds what the
// store loads, after writes of every kind, without reading everything
// again; the versions of the groups written change, the others' do not.
func TestMirrorFollows(t *testing.T) {
	s, cli, prefix := open(t)
	mirrorWrites(t, s, 0)
	m := openMirror(t, cli, prefix)
	sameAsStore(t, m, s, -1)
	before := m.Versions(-1)
	mirrorWrites(t, s, 1)
	sameAsStore(t, m, s, -1)
	after := m.Versions(-1)
	for name, v := range before {
		if after[name] != v {
			t.Errorf("group %s untouched by round 1, its version went from %d to %d", name, v, after[name])
		}
	}
	for _, name := range []string{"r1-g0", "r1-g1", "r1-g2"} {
		if _, ok := before[name]; ok || after[name] == 0 {
			t.Errorf("group %s: version %d before round 1 (present %t), %d after", name, before[name], ok, after[name])
		}
	}
	if st := m.Stats(); st.Loads != 1 || st.Resumes != 0 {
		t.Errorf("stats %+v, want one load and no resume", st)
	}
	// Sync with nothing written: etcd's progress notification says the
	// watch has sent everything.
	if _, err := m.Sync(testenv.Context(t), -1); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorCatchesUp: a mirror whose watch broke while the store was
// written catches up from the revision it had applied, not by reading
// everything again.
func TestMirrorCatchesUp(t *testing.T) {
	s, cli, prefix := open(t)
	mirrorWrites(t, s, 0)
	m := openMirror(t, cli, prefix)
	sameAsStore(t, m, s, -1)
	resume := etcdstore.PauseMirror(m)
	at := m.Revision(-1)
	mirrorWrites(t, s, 1)
	time.Sleep(100 * time.Millisecond)
	if m.Revision(-1) != at {
		t.Fatalf("a paused mirror went from revision %d to %d", at, m.Revision(-1))
	}
	resume()
	sameAsStore(t, m, s, -1)
	// One resume for each range followed: the topics and the groups.
	if st := m.Stats(); st.Loads != 1 || st.Resumes != 2 {
		t.Errorf("stats %+v, want one load and two resumes", st)
	}
}

// TestMirrorCompacted: a mirror that fell behind a compaction reads
// everything again, once, and is then current.
func TestMirrorCompacted(t *testing.T) {
	s, cli, prefix := open(t)
	mirrorWrites(t, s, 0)
	m := openMirror(t, cli, prefix)
	resume := etcdstore.PauseMirror(m)
	mirrorWrites(t, s, 1)
	resp, err := cli.Get(testenv.Context(t), prefix, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(testenv.Context(t), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	resume()
	sameAsStore(t, m, s, -1)
	// The first read, and one for each range followed: the topics and
	// the groups.
	if st := m.Stats(); st.Loads != 3 {
		t.Errorf("stats %+v, want three loads", st)
	}
}

// TestMirrorShards: a mirror follows the shards given to Follow, each
// holding what that shard's store loads, and nothing of the others: a
// shard it does not follow fails Sync with ErrNotFollowed. A shard
// followed later is read with the writes made before, and a shard no
// longer followed is dropped with its groups.
func TestMirrorShards(t *testing.T) {
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	const shards = 3
	var stores []*etcdstore.Store
	for i := range shards {
		stores = append(stores, openShard(t, cli, prefix, i, shards))
	}
	m := openMirror(t, cli, prefix)
	m.Follow([]int{0, 2})
	recs := stableGroup(t, "template")
	write := func(round int) {
		for i := range 12 {
			persist(t, stores[i%shards], testgroups.Renamed(recs, fmt.Sprintf("r%d-g%02d", round, i))...)
		}
	}
	write(0)
	for _, i := range []int{0, 2} {
		sameAsStore(t, m, stores[i], i)
	}
	notFollowed := func(shard int) {
		t.Helper()
		if _, err := m.Sync(testenv.Context(t), shard); !errors.Is(err, etcdstore.ErrNotFollowed) {
			t.Errorf("Sync of shard %d, not followed: %v, want ErrNotFollowed", shard, err)
		}
		if v := m.Versions(shard); len(v) != 0 {
			t.Errorf("groups of shard %d, not followed: %v", shard, v)
		}
	}
	notFollowed(1)
	if v := m.Versions(-1); len(v) != 0 {
		t.Errorf("groups of the unsharded layout in a sharded prefix: %v", v)
	}

	m.Follow([]int{1, 2})
	write(1)
	sameAsStore(t, m, stores[1], 1)
	sameAsStore(t, m, stores[2], 2)
	notFollowed(0)
	if got, want := m.Followed(), []int{1, 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("Followed() = %v, want %v", got, want)
	}
	if n := m.Stats().Groups; n != 16 {
		t.Errorf("the mirror holds %d groups, want the 16 of shards 1 and 2", n)
	}
}

// BenchmarkMirrorMemory measures what a warm standby's mirror holds per
// group: the heap retained by a mirror of 1,000 real groups (16 members,
// 64 offsets each), per group and per member, and how long reading them
// takes.
func BenchmarkMirrorMemory(b *testing.B) {
	s, cli, prefix := open(b)
	recs := stableGroup(b, "template")
	var batch []coordinator.Record
	for i := range 1000 {
		batch = append(batch, testgroups.Renamed(recs, fmt.Sprintf("group-%04d", i))...)
		if len(batch) > 20000 || i == 999 {
			persist(b, s, batch...)
			batch = batch[:0]
		}
	}
	var perGroup float64
	for b.Loop() {
		before := heapInUse()
		m, err := etcdstore.NewMirror(testenv.Context(b), cli, etcdstore.Prefix(prefix), etcdstore.Logger(testLogger(b)))
		if err != nil {
			b.Fatal(err)
		}
		perGroup = float64(heapInUse()-before) / 1000
		m.Close()
	}
	b.ReportMetric(perGroup, "bytes/group")
	b.ReportMetric(perGroup/16, "bytes/member")
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestMirrorBadValue: the mirror decodes a group when it is read, so a
// value that does not decode fails that group's read (naming its key),
// and only while etcd holds it; the other groups read as before.
func TestMirrorBadValue(t *testing.T) {
	s, cli, prefix := open(t)
	mirrorWrites(t, s, 0)
	m := openMirror(t, cli, prefix)
	key := prefix + "groups/r0-g0/offsets/" + testgroups.Topic.Name + "/1"
	if _, err := cli.Put(testenv.Context(t), key, `{"o":"not a number"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sync(testenv.Context(t), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Group("r0-g0"); err == nil || !strings.Contains(err.Error(), key) {
		t.Errorf("Group of the group with a bad value: %v, want an error naming %q", err, key)
	}
	if _, err := m.Records(-1); err == nil {
		t.Error("Records with a bad value: no error")
	}
	if _, _, err := m.Group("r0-g2"); err != nil {
		t.Errorf("Group of another group: %v", err)
	}
	// Commits go to batches, which do not replace the key: only its
	// deletion (or a fold) does.
	persist(t, s, &coordinator.OffsetRecord{Group: "r0-g0", Topic: testgroups.Topic.Name, Partition: 1, Offset: 7})
	if _, err := cli.Delete(testenv.Context(t), key); err != nil {
		t.Fatal(err)
	}
	sameAsStore(t, m, s, -1)

	// An offset batch's value, decoded when the group is read too.
	batch := prefix + "groups/r0-g0/obatch/bad-1"
	if _, err := cli.Put(testenv.Context(t), batch, testgroups.Topic.Name+"/1 {\"o\":\"x\"}\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sync(testenv.Context(t), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Group("r0-g0"); err == nil || !strings.Contains(err.Error(), batch) {
		t.Errorf("Group of the group with a bad batch: %v, want an error naming %q", err, batch)
	}
	if _, err := cli.Delete(testenv.Context(t), batch); err != nil {
		t.Fatal(err)
	}
	sameAsStore(t, m, s, -1)

	// A member's value, which the mirror decodes as it comes.
	resp, err := cli.Get(testenv.Context(t), prefix+"groups/r0-g2/members/", clientv3.WithPrefix(), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading a member key: %v", err)
	}
	member := resp.Kvs[0]
	if _, err := cli.Put(testenv.Context(t), string(member.Key), `{"st":"long"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sync(testenv.Context(t), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Group("r0-g2"); err == nil || !strings.Contains(err.Error(), string(member.Key)) {
		t.Errorf("Group of the group with a bad member value: %v, want an error naming %q", err, member.Key)
	}
	if _, err := cli.Put(testenv.Context(t), string(member.Key), string(member.Value)); err != nil {
		t.Fatal(err)
	}
	sameAsStore(t, m, s, -1)
}

// TestMirrorStateVersions: an offset commit changes its group's version
// but not its state version; a write of anything else changes both.
func TestMirrorStateVersions(t *testing.T) {
	s, cli, prefix := open(t)
	mirrorWrites(t, s, 0)
	m := openMirror(t, cli, prefix)
	sync := func() (uint64, uint64) {
		t.Helper()
		if _, err := m.Sync(testenv.Context(t), -1); err != nil {
			t.Fatal(err)
		}
		return m.Versions(-1)["r0-g2"], m.StateVersions(-1)["r0-g2"]
	}
	v0, s0 := sync()
	if v0 == 0 || s0 != v0 {
		t.Fatalf("after the first read: version %d, state version %d; want them equal and set", v0, s0)
	}
	persist(t, s, &coordinator.OffsetRecord{Group: "r0-g2", Topic: testgroups.Topic.Name, Partition: 3, Offset: 99})
	v1, s1 := sync()
	if v1 == v0 || s1 != s0 {
		t.Fatalf("after an offset commit: version %d to %d, state version %d to %d; want the version alone changed", v0, v1, s0, s1)
	}
	persist(t, s, &coordinator.GroupRecord{Group: "r0-g2", Type: coordinator.Consumer, Epoch: 1234})
	v2, s2 := sync()
	if v2 == v1 || s2 != v2 {
		t.Fatalf("after a group write: version %d to %d, state version %d to %d; want both changed", v1, v2, s1, s2)
	}
}

// TestMirrorSyncTo: SyncTo a revision the caller read after some writes
// (a term's handover revision) returns once the mirror holds them, at that
// revision or later, without reading etcd's; and it does not return for a
// revision etcd has not reached, whatever the mirror holds.
func TestMirrorSyncTo(t *testing.T) {
	s, cli, prefix := open(t)
	m := openMirror(t, cli, prefix)
	mirrorWrites(t, s, 0)
	// A write outside the mirror's ranges, as the election's keys are:
	// its revision is above every write of the store.
	resp, err := cli.Put(testenv.Context(t), strings.TrimSuffix(prefix, "/")+"-elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	want := resp.Header.Revision
	rev, err := m.SyncTo(testenv.Context(t), -1, want)
	if err != nil || rev < want {
		t.Fatalf("SyncTo(%d) = %d, %v; want %d or more", want, rev, err, want)
	}
	got, err := m.Records(-1)
	if err != nil {
		t.Fatal(err)
	}
	if stored := load(t, s); !reflect.DeepEqual(got, stored) {
		t.Fatalf("after SyncTo the mirror holds %d records, the store %d", len(got), len(stored))
	}
	ctx, cancel := context.WithTimeout(testenv.Context(t), 300*time.Millisecond)
	defer cancel()
	if rev, err := m.SyncTo(ctx, -1, want+1000); err == nil {
		t.Fatalf("SyncTo(%d), a revision etcd has not reached, returned %d", want+1000, rev)
	}
}

// TestMirrorFollowDuringClose: once Close has begun stopping the
// followers, a Follow (the standby's pass, still running on a node that
// shuts down) starts none: a follower started then is one Close's wait
// may miss (an Add racing the Wait, which sync may panic on, and a watch
// outliving Close on a client its owner closes next).
func TestMirrorFollowDuringClose(t *testing.T) {
	cli := etcd.Client(t)
	prefix := uniquePrefix(t)
	openShard(t, cli, prefix, 0, 4)
	m := openMirror(t, cli, prefix)
	m.Follow([]int{0, 1})
	stoppingOpen, unlock := etcdstore.LockMirror(m)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.Close()
	}()
	// Close cannot finish while the lock is held (its followers need it
	// to end): give it time to get as far as it can.
	for range 60 {
		if stoppingOpen() {
			unlock()
			<-closed
			t.Fatal("Close stopped the followers while Follow could still start one")
		}
		time.Sleep(5 * time.Millisecond)
	}
	unlock()
	<-closed
	m.Follow([]int{2, 3})
	if got := m.Followed(); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("after Close the mirror follows %v, want [0 1] as before it", got)
	}
}
