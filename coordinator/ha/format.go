package ha

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// FormatReaders reads the registrations of the set from etcd (not the
// view, which may lag) and returns the nodes that do not read the store's
// format v (NodeInfo.Format below v, a tenure from before the field
// included), sorted by ID, and a comparison that holds in a transaction
// for as long as no node has registered or registered again since the
// read. A store format raised under that comparison, when no node was
// behind, is one every registered node reads: a node that registers
// later, a restarted one included, makes the transaction fail and the
// caller looks again. A node that registers after the raise is the
// caller's to report: it may refuse the store.
func (n *Node) FormatReaders(ctx context.Context, v int) (behind []NodeInfo, unchanged clientv3.Cmp, err error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ttl)
	defer cancel()
	dir := n.keys.nodesDir()
	resp, err := n.cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return nil, clientv3.Cmp{}, err
	}
	for _, kv := range resp.Kvs {
		id, ok := n.keys.nodeID(string(kv.Key))
		if !ok {
			continue
		}
		info := NodeInfo{ID: id}
		// An unreadable registration reads as behind: nothing says what
		// the node reads.
		_ = json.Unmarshal(kv.Value, &info)
		info.ID = id
		if info.Format < v {
			behind = append(behind, info)
		}
	}
	slices.SortFunc(behind, func(a, b NodeInfo) int { return cmp.Compare(a.ID, b.ID) })
	unchanged = clientv3.Compare(clientv3.ModRevision(dir), "<", resp.Header.Revision+1).WithPrefix()
	return behind, unchanged, nil
}
