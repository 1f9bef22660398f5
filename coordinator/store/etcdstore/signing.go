package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/epoch"
)

// Keys is the coordinator's grant-signing key ring in etcd
// (store.KeyStore): one key, <p>meta/keys, whose value is the whole ring,
// so that a rotation is one compare-and-swap on its revision. Every node
// of an HA set shares it; like the topics it takes no fence and no guard:
// a rotation does not depend on who leads. Being under meta/, it is
// skipped by Load and LoadGroup, as every tenure version skips meta keys.
type Keys struct {
	cli  *clientv3.Client
	keys keys
}

var (
	_ store.KeyStore   = (*Keys)(nil)
	_ store.KeyWatcher = (*Keys)(nil)
)

// NewKeys returns the key ring under the prefix of opts (Prefix; the
// others are ignored). cli stays the caller's.
func NewKeys(cli *clientv3.Client, opts ...Opt) *Keys {
	c := newCfg(opts)
	return &Keys{cli: cli, keys: prefixKeys(c.prefix)}
}

// ringValue is the ring's value. A retired or revoked key has no seed.
type ringValue struct {
	V    int        `json:"v,omitzero"`
	Keys []keyValue `json:"keys"`
}

type keyValue struct {
	Public  []byte    `json:"public"`
	Seed    []byte    `json:"seed,omitempty"`
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	Retired time.Time `json:"retired,omitzero"`
	Revoked time.Time `json:"revoked,omitzero"`
}

// ringVersion is the version of ringValue.
const ringVersion = 1

func encodeRing(ks []store.SigningKey) []byte {
	v := ringValue{Keys: make([]keyValue, len(ks))}
	for i, k := range ks {
		v.Keys[i] = keyValue{Public: k.Public, Seed: k.Seed, State: k.State.String(),
			Created: k.Created.UTC(), Retired: k.Retired.UTC(), Revoked: k.Revoked.UTC()}
		if k.Retired.IsZero() {
			v.Keys[i].Retired = time.Time{}
		}
		if k.Revoked.IsZero() {
			v.Keys[i].Revoked = time.Time{}
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("etcdstore: encoding the key ring: %v", err)) // bytes, strings and times only
	}
	return b
}

func decodeRing(key string, value []byte) ([]store.SigningKey, error) {
	var v ringValue
	if err := decodeStrict(key, value, &v, &v.V, ringVersion); err != nil {
		return nil, err
	}
	out := make([]store.SigningKey, len(v.Keys))
	for i, k := range v.Keys {
		st, err := epoch.ParseKeyState(k.State)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: key %q: %w", key, err)
		}
		out[i] = store.SigningKey{Public: k.Public, Seed: k.Seed, State: st, Created: k.Created, Retired: k.Retired, Revoked: k.Revoked}
	}
	if err := store.CheckKeys(out); err != nil {
		return nil, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	return out, nil
}

// LoadKeys implements store.KeyStore; the version is the key's
// ModRevision.
func (k *Keys) LoadKeys(ctx context.Context) (store.KeyRing, error) {
	key := k.keys.signing()
	resp, err := k.cli.Get(ctx, key)
	if err != nil {
		return store.KeyRing{}, fmt.Errorf("etcdstore: loading the signing keys: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return store.KeyRing{}, nil
	}
	ring, err := decodeRing(key, resp.Kvs[0].Value)
	if err != nil {
		return store.KeyRing{}, err
	}
	return store.KeyRing{Keys: ring, Version: resp.Kvs[0].ModRevision}, nil
}

// StoreKeys implements store.KeyStore: a put if the key's ModRevision is
// still version (0: absent).
func (k *Keys) StoreKeys(ctx context.Context, ring []store.SigningKey, version int64) error {
	key := k.keys.signing()
	resp, err := k.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", version)).
		Then(clientv3.OpPut(key, string(encodeRing(ring)))).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdstore: storing the signing keys: %w", err)
	}
	if !resp.Succeeded {
		return store.ErrKeysChanged
	}
	return nil
}

// WatchKeys implements store.KeyWatcher with an etcd watch of the ring's
// key (watchSignals).
func (k *Keys) WatchKeys(ctx context.Context) <-chan struct{} {
	return watchSignals(ctx, k.cli, k.keys.signing())
}

// LoadKeys implements store.KeyStore, as Keys does, on the store's
// prefix; like the topics, the key ring bypasses the fence and the guard.
func (s *Store) LoadKeys(ctx context.Context) (store.KeyRing, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return store.KeyRing{}, err
	}
	defer end()
	return (&Keys{cli: s.cli, keys: s.keys}).LoadKeys(ctx)
}

// StoreKeys implements store.KeyStore, as Keys does.
func (s *Store) StoreKeys(ctx context.Context, ring []store.SigningKey, version int64) error {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	return (&Keys{cli: s.cli, keys: s.keys}).StoreKeys(ctx, ring, version)
}

// WatchKeys implements store.KeyWatcher, as Keys does.
func (s *Store) WatchKeys(ctx context.Context) <-chan struct{} {
	return (&Keys{cli: s.cli, keys: s.keys}).WatchKeys(ctx)
}
