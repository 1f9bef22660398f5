package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// LoadLog implements store.LogStore: one range read of the group's log
// directory, newest first. It does not settle writes of unknown outcome
// (the log is for people, and an entry of such a write may show or not),
// so it works on any node of an HA set, whatever the fence.
func (s *Store) LoadLog(ctx context.Context, group string, before int32, limit int) ([]*coordinator.GenerationRecord, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return loadLog(ctx, s.cli, s.keys, group, before, limit)
}

func loadLog(ctx context.Context, cli *clientv3.Client, k keys, group string, before int32, limit int) ([]*coordinator.GenerationRecord, error) {
	dir := k.logDir(group)
	rangeEnd := prefixEnd(dir)
	if before > 0 {
		rangeEnd = k.logEntry(group, before)
	}
	opts := []clientv3.OpOption{
		clientv3.WithRange(rangeEnd),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
	}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	resp, err := cli.Get(ctx, dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: reading the log of %q: %w", group, err)
	}
	out := make([]*coordinator.GenerationRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		pk, err := k.parse(string(kv.Key))
		if err != nil || pk.kind != kindLog || pk.group != group {
			return nil, fmt.Errorf("etcdstore: key %q is not an entry of %q's log", kv.Key, group)
		}
		r, err := decodeGeneration(pk, kv.Value)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: key %q: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Logs reads the generation logs under a prefix with a plain client: what
// an HA node that does not lead (and so has no Store) answers with.
type Logs struct {
	cli  *clientv3.Client
	keys keys
}

var _ store.LogStore = (*Logs)(nil)

// NewLogs returns the log reader of the prefix of opts (Prefix; the others
// are ignored). cli stays the caller's.
func NewLogs(cli *clientv3.Client, opts ...Opt) *Logs {
	c := newCfg(opts)
	return &Logs{cli: cli, keys: prefixKeys(c.prefix)}
}

// LoadLog implements store.LogStore.
func (l *Logs) LoadLog(ctx context.Context, group string, before int32, limit int) ([]*coordinator.GenerationRecord, error) {
	return loadLog(ctx, l.cli, l.keys, group, before, limit)
}
