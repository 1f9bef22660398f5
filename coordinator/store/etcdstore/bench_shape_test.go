package etcdstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/benchcpu"
)

// BenchmarkTxnShape measures what etcd spends on a batch of offset
// commits by the number of keys it is written as: the question a layout
// of fewer keys per commit would answer. Each transaction carries the
// commits of 137 partitions of one group (of 1,000; what the writer
// sends in BenchmarkCommits1000), against an embedded etcd with fsync on:
//
//   - keys: one key per partition, as the store writes them;
//   - batch-key: the same keys and values in one value under one new key
//     per transaction (the bytes of keys above), a lower bound for a log
//     of commit batches;
//   - batch-key+fold: the same, and every 64 transactions the batches'
//     newest value of every partition they hold put to its own key and
//     the 64 batch keys deleted, so that the log stays bounded: what
//     such a layout would cost in the steady state;
//   - store: the same records through a Store's Persist, which writes
//     them as one offset batch and folds every DefaultFoldEvery batches
//     (the layout built on this measurement: offset_batch.go, fold.go);
//   - store-fold64, store-fold256, store-nofold: the same folding every
//     64 or 256 batches, or never (what the folds cost);
//   - store-nofold-x4: never folding, 548 commits a transaction: with
//     store-nofold, what a transaction costs beyond its commits.
//
// Reported: the process's CPU per commit (client and server alike, the
// embedded etcd being in the process) and the time of a transaction.
//
//	go test -run '^$' -bench BenchmarkTxnShape -benchtime 2000x ./coordinator/store/etcdstore/
func BenchmarkTxnShape(b *testing.B) {
	emb, err := embedetcd.Start(context.Background(), b.TempDir(), zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	defer emb.Close()
	cli := emb.Client()
	const partitions, foldEvery = 1000, 64
	for _, shape := range []string{"keys", "batch-key", "batch-key+fold", "store", "store-fold64", "store-fold256", "store-nofold", "store-nofold-x4"} {
		perTxn := 137
		if strings.HasSuffix(shape, "-x4") {
			perTxn *= 4
		}
		b.Run(shape, func(b *testing.B) {
			prefix := fmt.Sprintf("/shape/%s/", shape)
			md := ""
			recs := make([]coordinator.Record, perTxn)
			for i := range recs {
				recs[i] = &coordinator.OffsetRecord{Group: "committers", Topic: "work1000", LeaderEpoch: -1, Metadata: &md,
					Token: epoch.Token(1<<20 + i), MemberID: "hq0F3Jh_gGIwoTygd5badg"}
			}
			latest := make(map[string]string, partitions) // the batches' newest values, by key
			var batchKeys []string
			next := 0
			ctx := context.Background()
			var st *etcdstore.Store
			if strings.HasPrefix(shape, "store") {
				opts := []etcdstore.Opt{etcdstore.Prefix(prefix), etcdstore.MaxTxnOps(10000)}
				switch shape {
				case "store-fold64":
					opts = append(opts, etcdstore.FoldEvery(64))
				case "store-fold256":
					opts = append(opts, etcdstore.FoldEvery(256))
				case "store-nofold", "store-nofold-x4":
					opts = append(opts, etcdstore.FoldEvery(0))
				}
				if st, err = etcdstore.New(ctx, cli, opts...); err != nil {
					b.Fatal(err)
				}
				defer st.Close()
			}
			b.ResetTimer()
			start, cpu0 := time.Now(), benchcpu.Process()
			for n := range b.N {
				for _, r := range recs {
					o := r.(*coordinator.OffsetRecord)
					o.Partition = int32(next % partitions)
					o.Offset = int64(n)
					next++
				}
				if st != nil {
					if err := st.Persist(ctx, recs); err != nil {
						b.Fatal(err)
					}
					continue
				}
				keys, vals := etcdstore.OffsetKeyValues(prefix, recs)
				var ops []clientv3.Op
				switch shape {
				case "keys":
					for i, key := range keys {
						ops = append(ops, clientv3.OpPut(key, vals[i]))
					}
				default:
					var val strings.Builder
					for i, key := range keys {
						val.WriteString(key)
						val.WriteString(vals[i])
						latest[key] = vals[i]
					}
					key := fmt.Sprintf("%sgroups/committers/batches/%010d", prefix, n)
					ops = []clientv3.Op{clientv3.OpPut(key, val.String())}
					batchKeys = append(batchKeys, key)
				}
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					b.Fatal(err)
				}
				if shape != "batch-key+fold" || len(batchKeys) < foldEvery {
					continue
				}
				fold := make([]clientv3.Op, 0, len(latest)+len(batchKeys))
				for key, val := range latest {
					fold = append(fold, clientv3.OpPut(key, val))
				}
				for _, key := range batchKeys {
					fold = append(fold, clientv3.OpDelete(key))
				}
				if _, err := cli.Txn(ctx).Then(fold...).Commit(); err != nil {
					b.Fatal(err)
				}
				clear(latest)
				batchKeys = batchKeys[:0]
			}
			elapsed, cpu := time.Since(start), benchcpu.Process()-cpu0
			b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(b.N*perTxn), "cpu-us/commit")
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "us/txn")
		})
	}
}
