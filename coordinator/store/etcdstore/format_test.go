package etcdstore_test

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestRaiseFormat: New leaves a prefix at format 5, the last it raises to
// by itself (a set of tenures that read only 5 must keep opening it);
// RaiseFormat raises it to the targets' format 6 when its condition holds
// and the key is as it read it, writes nothing when the prefix is there
// already or the condition fails, and New opens a prefix at 6.
func TestRaiseFormat(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	s, _, prefix := open(t)
	s.Close()
	p := etcdstore.Prefix(prefix)
	if v, err := etcdstore.ReadFormat(ctx, cli, p); err != nil || v != 5 {
		t.Fatalf("a new prefix's format: %d, %v; want 5", v, err)
	}
	// The condition fails: an absent key's value is never "x".
	never := []clientv3.Cmp{clientv3.Compare(clientv3.Value(prefix+"nothing"), "=", "x")}
	if v, err := etcdstore.RaiseFormat(ctx, cli, etcdstore.TargetsFormat, never, p); !errors.Is(err, etcdstore.ErrFormatChanged) || v != 5 {
		t.Fatalf("RaiseFormat under a failing condition: %d, %v", v, err)
	}
	if v, _ := etcdstore.ReadFormat(ctx, cli, p); v != 5 {
		t.Fatalf("format %d after a failed raise", v)
	}
	if _, err := etcdstore.RaiseFormat(ctx, cli, etcdstore.FormatVersion+1, nil, p); !errors.Is(err, etcdstore.ErrInvalidOption) {
		t.Fatalf("RaiseFormat beyond FormatVersion: %v", err)
	}
	if v, err := etcdstore.RaiseFormat(ctx, cli, etcdstore.TargetsFormat, nil, p); err != nil || v != etcdstore.TargetsFormat {
		t.Fatalf("RaiseFormat: %d, %v", v, err)
	}
	resp, err := cli.Get(ctx, prefix+"meta/format")
	if err != nil || string(resp.Kvs[0].Value) != "6" {
		t.Fatalf("format key after the raise: %v %v", resp, err)
	}
	rev := resp.Kvs[0].ModRevision
	if v, err := etcdstore.RaiseFormat(ctx, cli, etcdstore.TargetsFormat, nil, p); err != nil || v != etcdstore.TargetsFormat {
		t.Fatalf("RaiseFormat again: %d, %v", v, err)
	}
	if v, err := etcdstore.RaiseFormat(ctx, cli, 5, nil, p); err != nil || v != etcdstore.TargetsFormat {
		t.Fatalf("RaiseFormat to 5 of a prefix at 6: %d, %v (it never lowers)", v, err)
	}
	if resp, err := cli.Get(ctx, prefix+"meta/format"); err != nil || resp.Kvs[0].ModRevision != rev {
		t.Fatalf("RaiseFormat wrote the key of a prefix already there: %v %v", resp, err)
	}
	// New opens it and leaves it at 6.
	openOn(t, cli, p)
	if v, _ := etcdstore.ReadFormat(ctx, cli, p); v != etcdstore.TargetsFormat {
		t.Fatalf("format %d after New", v)
	}
	// A prefix no store opened yet gets the key.
	fresh := etcdstore.Prefix(uniquePrefix(t))
	if v, err := etcdstore.RaiseFormat(ctx, cli, etcdstore.TargetsFormat, nil, fresh); err != nil || v != etcdstore.TargetsFormat {
		t.Fatalf("RaiseFormat of a new prefix: %d, %v", v, err)
	}
	openOn(t, cli, fresh)
}
