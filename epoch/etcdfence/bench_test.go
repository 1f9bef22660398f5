package etcdfence_test

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/epoch/etcdfence"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// BenchmarkPut measures an admitted guarded write with a one-key effect
// against the embedded server (no fsync): the round trip plus etcd's apply.
func BenchmarkPut(b *testing.B) {
	cli := etcd.Client(b)
	ctx := testenv.Context(b)
	prefix := uniquePrefix("bench")
	f := etcdfence.New(cli, prefix)
	op := clientv3.OpPut(prefix+"/data/0", "effect")
	for b.Loop() {
		if _, err := f.Put(ctx, 0, 1, op); err != nil {
			b.Fatal(err)
		}
	}
}
