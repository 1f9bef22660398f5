package etcdfence_test

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/epoch/etcdfence"
	"github.com/tenure-dev/tenure/epoch/internal/fencetest"
)

// BenchmarkPut measures an admitted guarded write with a one-key effect
// against the embedded server (no fsync): the round trip plus etcd's apply.
func BenchmarkPut(b *testing.B) {
	cli := etcd.Client(b)
	// No fixed deadline (testenv's 20 s): a benchmark's run of -benchtime 100x
	// can outlast any fixed deadline on a loaded machine.
	ctx := b.Context()
	prefix := uniquePrefix("bench")
	f := etcdfence.New(cli, prefix)
	op := clientv3.OpPut(prefix+"/data/0", "effect")
	for b.Loop() {
		if _, err := f.Put(ctx, 0, 1, op); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutVerified compares guarded writes (one-key effect) without a
// verifier and with one, in alternating batches of one run (see
// fencetest.CompareVerified): the cost of verification, cached per token.
//
//	go test -run '^$' -bench BenchmarkPutVerified -benchtime 20x ./epoch/etcdfence/
func BenchmarkPutVerified(b *testing.B) {
	cli := etcd.Client(b)
	ctx := b.Context()
	k := fencetest.NewKeys(b)
	prefix := uniquePrefix("benchverify")
	off := etcdfence.New(cli, prefix+"/off")
	on := etcdfence.New(cli, prefix+"/on", etcdfence.WithVerifier(k.Verifier()))
	st := fencetest.Grant(k.Active, 0, 1, "bob")
	opOff := clientv3.OpPut(prefix+"/data/off", "effect")
	opOn := clientv3.OpPut(prefix+"/data/on", "effect")
	fencetest.CompareVerified(b, 50,
		func() error { _, err := off.Put(ctx, 0, 1, opOff); return err },
		func() error { _, err := on.PutSigned(ctx, 0, st, opOn); return err })
}
