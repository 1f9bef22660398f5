package etcdstore

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-dev/tenure/coordinator"
)

// BenchmarkMirrorApply measures what a warm standby spends on one offset
// commit its watch delivers (every node of a set follows every commit of
// the set): taking the key's new value into the mirror's state, 64
// partitions of one group of a sharded layout over and over.
func BenchmarkMirrorApply(b *testing.B) {
	sk, pk := newKeys(DefaultPrefix, 5, 48), prefixKeys(DefaultPrefix)
	md := ""
	kvs := make([]*mvccpb.KeyValue, 64)
	for i := range kvs {
		r := &coordinator.OffsetRecord{Group: "cap-0017", Topic: "bench", Partition: int32(i), Offset: 123456,
			LeaderEpoch: -1, Metadata: &md, Token: 1 << 20, MemberID: "hq0F3Jh_gGIwoTygd5badg"}
		kvs[i] = &mvccpb.KeyValue{Key: []byte(sk.offset(r.Group, r.Topic, r.Partition)), Value: encodeValue(r)}
	}
	st := newState()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		st.applyKV(pk, kvs[i%len(kvs)], uint64(i))
		i++
	}
}

// BenchmarkMirrorGroupRecords measures what a takeover spends reading one
// committing group's records from the mirror: 64 partitions folded into
// their keys and 32 batches not yet folded of 4 partitions each, as a
// group of 16 consumers that each commit their 4 partitions leaves
// between two folds (a fold comes every 64 batches).
func BenchmarkMirrorGroupRecords(b *testing.B) {
	k := newKeys(DefaultPrefix, 5, 48)
	g := mirrorGroup{offsets: map[string]rawKV{}, batches: map[string]rawKV{}}
	md := ""
	rec := func(p int32, off int64) *coordinator.OffsetRecord {
		return &coordinator.OffsetRecord{Group: "cap-0017", Topic: "bench", Partition: p, Offset: off,
			LeaderEpoch: -1, Metadata: &md, Token: 1 << 20, MemberID: "hq0F3Jh_gGIwoTygd5badg"}
	}
	rev := int64(1000)
	for p := range int32(64) {
		g.offsets[k.offset("cap-0017", "bench", p)] = rawKV{rev, []byte(foldedValue(rec(p, 100), rev-1))}
	}
	for i := range 32 {
		rev++
		var val []byte
		for j := range int32(4) {
			p := int32(i%16)*4 + j
			val = appendBatchLine(val, "bench", p, string(encodeValue(rec(p, 200+int64(i)))))
		}
		g.batches[k.offsetBatch("cap-0017", fmt.Sprintf("s1-%d", i))] = rawKV{rev, val}
	}
	b.ReportAllocs()
	for b.Loop() {
		recs, err := g.records(k, "cap-0017", nil)
		if err != nil || len(recs) != 64 {
			b.Fatal(len(recs), err)
		}
	}
}
