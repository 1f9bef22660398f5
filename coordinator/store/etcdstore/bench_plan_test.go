package etcdstore

import (
	"testing"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
)

// BenchmarkPlanOffsets measures what Persist spends before etcd on a
// batch of offset commits, as BenchmarkCommits1000's writer sends them
// (137 records of one group, a partition each): planning the transaction
// (keys and values) and turning it into the client's operations.
func BenchmarkPlanOffsets(b *testing.B) {
	k := newKeys(DefaultPrefix, 0, 1)
	md := ""
	recs := make([]coordinator.Record, 137)
	for i := range recs {
		recs[i] = &coordinator.OffsetRecord{Group: "committers", Topic: "work1000", Partition: int32(i * 7),
			Offset: 123456 + int64(i), LeaderEpoch: -1, Metadata: &md, Token: epoch.Token(1<<20 + i), MemberID: "hq0F3Jh_gGIwoTygd5badg"}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range k.plan(recs, 1<<20, 1<<30, func(g string) string { return k.offsetBatch(g, "bench-1") }) {
			_ = t.clientOps()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
