package ha

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// leaveLeader is Leave without shards: a leader stopped on purpose hands
// the set to the next candidate at once, instead of leaving its clients
// a closed port and the others an election TTL to wait.
func (n *Node) leaveLeader(ctx context.Context) (int, error) {
	self := n.Self().ID
	if !slices.ContainsFunc(n.Nodes(), func(o NodeInfo) bool { return o.ID != self }) {
		return 0, nil // nobody to hand the groups to
	}
	n.leaving.Store(true)
	l := n.cur.Load()
	t := l.current()
	if t == nil || t.ended.Load() {
		return 0, nil // a follower: its candidacy goes with Close
	}
	key := n.keys.node(self)
	if _, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", l.id)).
		Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return 1, fmt.Errorf("ha: leaving: %w", err)
	}
	if err := t.Resign(ctx); err != nil {
		return 1, fmt.Errorf("ha: leaving: resign: %w", err)
	}
	for {
		changed := n.Changed()
		if ld, ok := n.Leader(); ok && ld.ID != self {
			n.logger().Info("handed the leadership to another node", zap.Int32("leader", ld.ID))
			return 1, nil
		}
		select {
		case <-ctx.Done():
			return 1, fmt.Errorf("ha: leaving: no other node leads yet: %w", ctx.Err())
		case <-changed:
		}
	}
}
