package etcdstore

import (
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/benchcpu"
)

// joinRecords are the records one member's join costs a KIP-848 group of
// 16 over 64 partitions that its members join one at a time, as
// BenchmarkJoin's fleet does: the group's epoch bump, the member, and 14
// assignments of the members (each bump moves the members already in the
// group once or twice more: revoking, then pending, then owned with
// provisional tokens, then fixed; a group of 16 joining so wrote 217
// assignments in the coordinator's tests, before a bump's targets went out
// in its group value: the shape BenchmarkJoinRecords was first measured on).
func joinRecords(member int) []coordinator.Record {
	const topic = "bench"
	id := func(i int) string { return fmt.Sprintf("hq0F3Jh_gGIwoT%06d%02d", member, i) }
	tps := func(ps ...int32) []coordinator.TopicPartition {
		out := make([]coordinator.TopicPartition, len(ps))
		for i, p := range ps {
			out[i] = coordinator.TopicPartition{Topic: topic, Partition: p}
		}
		return out
	}
	owned := func(tok epoch.Token, ps ...int32) []coordinator.OwnedPartition {
		out := make([]coordinator.OwnedPartition, len(ps))
		for i, p := range ps {
			out[i] = coordinator.OwnedPartition{Topic: topic, Partition: p, Token: tok}
		}
		return out
	}
	recs := []coordinator.Record{
		&coordinator.GroupRecord{Group: "bench-0017", Type: coordinator.Consumer, Epoch: 16, Protocol: "uniform"},
		&coordinator.MemberRecord{Group: "bench-0017", MemberID: id(15), ClientID: "bench", ClientHost: "/127.0.0.1",
			RebalanceTimeout: 30 * time.Second, Topics: []string{topic}, ServerAssignor: "uniform"},
	}
	for i := range 14 {
		e := int32(2 + i)
		a := &coordinator.AssignmentRecord{Group: "bench-0017", MemberID: id(i), MemberEpoch: e, PrevEpoch: e - 1,
			Target: tps(4, 5, 6, 7)}
		switch i % 4 {
		case 0: // revoking what the newest member gets
			a.Owned = owned(epoch.Token(e-1), 4, 5, 6)
			a.Revoking = tps(8, 9)
		case 1: // waiting for a partition its previous owner still holds
			a.Owned = owned(epoch.Token(e-1), 4, 5, 6)
			a.Pending = tps(7)
		case 2: // given it, provisionally
			a.Owned = owned(epoch.Token(e), 4, 5, 6, 7)
			a.Provisional = []coordinator.ProvisionalPartition{{Topic: topic, Partition: 7, Floor: epoch.Token(e)}}
		case 3: // fixed
			a.Owned = owned(epoch.Token(e), 4, 5, 6, 7)
		}
		recs = append(recs, a)
	}
	return recs
}

// BenchmarkJoinRecords measures what a node spends on the records of one
// member's join (joinRecords) outside etcd: the writer planning them
// (keys, values, the client's operations), and each node's mirror taking
// them from its watch (every node of a set follows every write). An op is
// one member's records; cpu-ns/op is the process's CPU (the collector's
// included), which a loaded machine inflates less than ns/op.
func BenchmarkJoinRecords(b *testing.B) {
	sk, pk := newKeys(DefaultPrefix, 5, 48), prefixKeys(DefaultPrefix)
	members := make([][]coordinator.Record, 64)
	for i := range members {
		members[i] = joinRecords(i)
	}
	b.Run("plan", func(b *testing.B) {
		batch := func(g string) string { return sk.offsetBatch(g, "bench-1") }
		b.ReportAllocs()
		cpu0 := benchcpu.Process()
		i := 0
		for b.Loop() {
			for _, t := range sk.plan(members[i%len(members)], 1<<20, 1<<30, batch) {
				_ = t.clientOps()
			}
			i++
		}
		b.ReportMetric(float64(benchcpu.Process()-cpu0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("mirror", func(b *testing.B) {
		kvs := make([][]*mvccpb.KeyValue, len(members))
		for i, recs := range members {
			for _, t := range sk.plan(recs, 1<<20, 1<<30, nil) {
				for _, op := range t.ops {
					kvs[i] = append(kvs[i], &mvccpb.KeyValue{Key: []byte(op.key), Value: []byte(op.val)})
				}
			}
		}
		st := newState()
		b.ReportAllocs()
		cpu0 := benchcpu.Process()
		i := 0
		for b.Loop() {
			for _, kv := range kvs[i%len(kvs)] {
				st.applyKV(pk, kv, uint64(i))
			}
			i++
		}
		b.ReportMetric(float64(benchcpu.Process()-cpu0)/float64(b.N), "cpu-ns/op")
	})
}
