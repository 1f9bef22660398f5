package ha_test

import (
	"encoding/json"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestFormatReaders: a node registers the format it reads; a registration
// without the field (a tenure from before it) and one below the format
// asked about count as behind; the comparison FormatReaders returns
// holds until a node registers, and fails after.
func TestFormatReaders(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	prefix := uniquePrefix(t)
	a := join(t, cli, prefix, "127.0.0.1:9001", ha.ReadsFormat(6))
	if f := a.Self().Format; f != 6 {
		t.Fatalf("Self().Format = %d", f)
	}
	// A node of the build before: its registration has no "format".
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]any{"id": 7, "addr": "127.0.0.1:9007"})
	if _, err := cli.Put(ctx, prefix+"meta/ha/nodes/7", string(old), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	behind, unchanged, err := a.FormatReaders(ctx, 6)
	if err != nil || len(behind) != 1 || behind[0].ID != 7 || behind[0].Format != 0 || behind[0].Addr != "127.0.0.1:9007" {
		t.Fatalf("FormatReaders(6) with an old node: %+v, %v", behind, err)
	}
	if behind, _, err := a.FormatReaders(ctx, 5); err != nil || len(behind) != 1 {
		t.Fatalf("FormatReaders(5): %+v, %v; an old registration reads as 0", behind, err)
	}
	if behind, _, err := a.FormatReaders(ctx, 0); err != nil || len(behind) != 0 {
		t.Fatalf("FormatReaders(0): %+v, %v", behind, err)
	}
	holds := func(c clientv3.Cmp) bool {
		t.Helper()
		resp, err := cli.Txn(ctx).If(c).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !holds(unchanged) {
		t.Fatal("the comparison fails with no registration since")
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	behind, unchanged, err = a.FormatReaders(ctx, 6)
	if err != nil || len(behind) != 0 {
		t.Fatalf("FormatReaders(6) once the old node left: %+v, %v", behind, err)
	}
	if !holds(unchanged) {
		t.Fatal("a node leaving broke the comparison")
	}
	// A node that reads 6 joins: the comparison taken before fails.
	b := join(t, cli, prefix, "127.0.0.1:9002", ha.ReadsFormat(6))
	if holds(unchanged) {
		t.Fatalf("the comparison holds after node %d registered", b.Self().ID)
	}
	if behind, _, err := a.FormatReaders(ctx, 6); err != nil || len(behind) != 0 {
		t.Fatalf("FormatReaders(6) with two new nodes: %+v, %v", behind, err)
	}
	// A node that advertises 5 is behind 6.
	join(t, cli, prefix, "127.0.0.1:9003", ha.ReadsFormat(5))
	if behind, _, err := a.FormatReaders(ctx, 6); err != nil || len(behind) != 1 || behind[0].Format != 5 {
		t.Fatalf("FormatReaders(6) with a node at 5: %+v, %v", behind, err)
	}
	for _, n := range a.Nodes() {
		if n.ID == b.Self().ID && n.Format != 6 {
			t.Errorf("the view has node %d at format %d", n.ID, n.Format)
		}
	}
}
