package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrFormatChanged is RaiseFormat's error when the format key changed
// between its read and its write, or its condition failed: the caller
// looks again.
var ErrFormatChanged = errors.New("etcdstore: the format or the condition changed while raising the format")

// ReadFormat returns the format of the prefix (Prefix) of cli's cluster:
// its <prefix>meta/format, 0 if no store has opened it yet.
func ReadFormat(ctx context.Context, cli *clientv3.Client, opts ...Opt) (int, error) {
	c := newCfg(opts)
	v, _, err := readFormat(ctx, cli, prefixKeys(c.prefix))
	return v, err
}

func readFormat(ctx context.Context, cli *clientv3.Client, k keys) (int, int64, error) {
	resp, err := cli.Get(ctx, k.format())
	if err != nil {
		return 0, 0, fmt.Errorf("etcdstore: reading %q: %w", k.format(), err)
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, nil
	}
	kv := resp.Kvs[0]
	v, err := strconv.Atoi(string(kv.Value))
	if err != nil || v < 1 {
		return 0, 0, fmt.Errorf("etcdstore: key %q holds %q, not a format version", k.format(), kv.Value)
	}
	return v, kv.ModRevision, nil
}

// RaiseFormat raises the format of the prefix (Prefix) of cli's cluster
// to to, at most FormatVersion, in one transaction that requires the
// format key unchanged since it read it and cond (the caller's: an HA
// set's that no node which reads less has registered since it looked,
// ha.Node.FormatReaders). It returns the prefix's format after: to if it
// raised it, else the format it found (to or above: nothing to do), and
// ErrFormatChanged if the transaction failed. A prefix without a format
// key gets one. Only a tenure that reads to may open the prefix from
// then on (New refuses it with ErrNewerFormat), so raise it only once
// every node that may take a group over reads it; there is no way back.
func RaiseFormat(ctx context.Context, cli *clientv3.Client, to int, cond []clientv3.Cmp, opts ...Opt) (int, error) {
	c := newCfg(opts)
	if to < 1 || to > FormatVersion {
		return 0, fmt.Errorf("%w: format %d: this tenure knows 1 to %d", ErrInvalidOption, to, FormatVersion)
	}
	k := prefixKeys(c.prefix)
	from, rev, err := readFormat(ctx, cli, k)
	if err != nil || from >= to {
		return from, err
	}
	cmps := append(slices.Clip(cond), clientv3.Compare(clientv3.ModRevision(k.format()), "=", rev))
	resp, err := cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(k.format(), strconv.Itoa(to))).Commit()
	if err != nil {
		return from, fmt.Errorf("etcdstore: raising %q to %d: %w", k.format(), to, err)
	}
	if !resp.Succeeded {
		return from, ErrFormatChanged
	}
	c.log.Info("etcd store: format upgraded", zap.String("prefix", c.prefix), zap.Int("from", from), zap.Int("to", to))
	return to, nil
}
