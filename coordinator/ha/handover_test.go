package ha_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestHandoverRevision: the term a follower wins after its leader was
// killed (its lease left to expire) reports a handover revision above the
// dead leader's last guarded write, though the follower's own candidate
// key is older than that write; so a standby that waits for the handover
// revision holds the old leader's every write. (A shard term's is the
// create revision of its owner key, put only once the last owner's was
// gone.)
func TestHandoverRevision(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	dead := etcd.Client(t)
	n0 := join(t, dead, prefix, addr(0))
	next := func(n *ha.Node, what string) *ha.Term {
		t.Helper()
		select {
		case tm := <-n.Terms():
			return tm
		case <-time.After(10 * time.Second):
			t.Fatalf("%s won no term", what)
			return nil
		}
	}
	first := next(n0, "node 0")
	n1 := join(t, etcd.Client(t), prefix, addr(1))
	testenv.Eventually(t, 10*time.Second, "node 1's candidate key", func() bool {
		resp, err := cli.Get(ctx, prefix+"meta/ha/leader/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})
	// The leader's last write, after the follower's key was put.
	resp, err := cli.Txn(ctx).If(first.Guard()).Then(clientv3.OpPut(prefix+"data", "last")).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("the leader's guarded write: %v (succeeded: %v)", err, err == nil && resp.Succeeded)
	}
	last := resp.Header.Revision
	// A kill -9: the client goes first, so the lease is left to expire.
	dead.Close()
	n0.Close()
	second := next(n1, "node 1 after node 0's lease expired")
	if second.Revision() >= last {
		t.Fatalf("node 1's key was created at %d, after the leader's last write at %d: the test shows nothing", second.Revision(), last)
	}
	if h := second.HandoverRevision(); h <= last {
		t.Fatalf("handover revision %d, want above the dead leader's last write at %d", h, last)
	}
}
