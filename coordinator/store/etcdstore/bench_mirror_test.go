package etcdstore

import (
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
