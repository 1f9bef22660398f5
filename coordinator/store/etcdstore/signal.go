package etcdstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchRetry spaces the restarts of a failed watch.
const watchRetry = time.Second

// watchSignals signals on the returned channel after every change under
// key (opts: clientv3.WithPrefix for a directory) that an etcd watch
// delivers: as soon as etcd does (milliseconds on a healthy cluster). It
// also signals once etcd has created the watch, and again each time a
// watch that failed (etcd unreachable, a leader election) has been created
// again, after watchRetry: a change made before the watch existed, after
// the caller's own load (a node's start) or while it was down, reaches no
// watch, and the caller's reload on that signal reads it. Signals
// coalesce; the channel is closed once ctx ends. The ACL and signing-key
// watches are this.
func watchSignals(ctx context.Context, cli *clientv3.Client, key string, opts ...clientv3.OpOption) <-chan struct{} {
	out := make(chan struct{}, 1)
	signal := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	opts = append(opts, clientv3.WithKeysOnly(), clientv3.WithCreatedNotify())
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			for wr := range cli.Watch(wctx, key, opts...) {
				if wr.Err() != nil {
					break
				}
				if wr.Created || len(wr.Events) > 0 {
					signal()
				}
			}
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}()
	return out
}

// decodeStrict decodes the JSON value of key into dst, refusing unknown
// fields, where version points to dst's encoding version ("v", 0 for
// version 1): a value of a version above newest, even one with fields dst
// does not know, is an errNewerValue that says so. Every error names key.
func decodeStrict(key string, value []byte, dst any, version *int, newest int) error {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var hdr struct {
			V int `json:"v"`
		}
		if json.Unmarshal(value, &hdr) == nil && hdr.V > newest {
			err = fmt.Errorf("%w (version %d, this tenure reads up to %d)", errNewerValue, hdr.V, newest)
		}
		return fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	if *version > newest {
		return fmt.Errorf("etcdstore: key %q: %w (version %d, this tenure reads up to %d)", key, errNewerValue, *version, newest)
	}
	return nil
}
