package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// Topics is the topic registry in etcd that every node of an HA set shares
// (store.TopicStore): any node, leading or not, may create a topic, with
// one create-if-absent transaction, so two nodes creating one name agree
// on its ID; and any node reads them, to answer Metadata. A deletion is
// delete-if-same (the name's key still holds the topic's ID), so it never
// deletes a topic created again under the name. It takes no fence and no
// guard: a topic does not depend on who leads, and a topic once created
// never changes.
type Topics struct {
	cli  *clientv3.Client
	keys keys
}

var _ store.TopicStore = (*Topics)(nil)

// NewTopics returns the topic registry under the prefix of opts (Prefix;
// the others are ignored). cli stays the caller's.
func NewTopics(cli *clientv3.Client, opts ...Opt) *Topics {
	c := newCfg(opts)
	return &Topics{cli: cli, keys: prefixKeys(c.prefix)}
}

// CreateTopic implements store.TopicStore.
func (t *Topics) CreateTopic(ctx context.Context, rec *coordinator.TopicRecord) (*coordinator.TopicRecord, error) {
	key := t.keys.topic(rec.Name)
	resp, err := t.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(encodeValue(rec)))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdstore: creating topic %q: %w", rec.Name, err)
	}
	if resp.Succeeded {
		return rec, nil
	}
	rr := resp.Responses[0].GetResponseRange()
	if rr == nil || len(rr.Kvs) != 1 {
		return nil, fmt.Errorf("etcdstore: topic %q exists but cannot be read", rec.Name)
	}
	got, err := t.decode(rr.Kvs[0].Key, rr.Kvs[0].Value)
	if err != nil {
		return nil, err
	}
	return got, nil
}

// DeleteTopic implements store.TopicStore: it reads the topic and deletes
// it only if it has rec's ID and its key has not changed since the read
// (a topic deleted and created again in between is read anew).
func (t *Topics) DeleteTopic(ctx context.Context, rec *coordinator.TopicRecord) (bool, error) {
	key := t.keys.topic(rec.Name)
	for {
		resp, err := t.cli.Get(ctx, key)
		if err != nil {
			return false, fmt.Errorf("etcdstore: deleting topic %q: %w", rec.Name, err)
		}
		if len(resp.Kvs) == 0 {
			return false, nil
		}
		kv := resp.Kvs[0]
		got, err := t.decode(kv.Key, kv.Value)
		if err != nil {
			return false, err
		}
		if got.ID != rec.ID {
			return false, nil
		}
		tr, err := t.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return false, fmt.Errorf("etcdstore: deleting topic %q: %w", rec.Name, err)
		}
		if tr.Succeeded {
			return true, nil
		}
	}
}

// LoadTopics implements store.TopicStore.
func (t *Topics) LoadTopics(ctx context.Context) ([]*coordinator.TopicRecord, error) {
	dir := t.keys.prefix + topicsDir
	resp, err := t.cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcdstore: loading topics: %w", err)
	}
	out := make([]*coordinator.TopicRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r, err := t.decode(kv.Key, kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *coordinator.TopicRecord) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (t *Topics) decode(key, value []byte) (*coordinator.TopicRecord, error) {
	pk, err := t.keys.parse(string(key))
	if err == nil && pk.kind != kindTopic {
		err = errBadKey
	}
	if err != nil {
		return nil, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	r, err := decodeValue(pk, value)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	return r.(*coordinator.TopicRecord), nil
}

// CreateTopic implements store.TopicStore, as Topics does, on the store's
// prefix; it bypasses the fence and the guard, which do not concern
// topics.
func (s *Store) CreateTopic(ctx context.Context, rec *coordinator.TopicRecord) (*coordinator.TopicRecord, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return (&Topics{cli: s.cli, keys: s.keys}).CreateTopic(ctx, rec)
}

// DeleteTopic implements store.TopicStore, as Topics does, on the store's
// prefix, bypassing the fence and the guard like CreateTopic.
func (s *Store) DeleteTopic(ctx context.Context, rec *coordinator.TopicRecord) (bool, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return false, err
	}
	defer end()
	return (&Topics{cli: s.cli, keys: s.keys}).DeleteTopic(ctx, rec)
}

// LoadTopics implements store.TopicStore.
func (s *Store) LoadTopics(ctx context.Context) ([]*coordinator.TopicRecord, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return (&Topics{cli: s.cli, keys: s.keys}).LoadTopics(ctx)
}

// Decode returns the record a key and value of the layout under prefix
// hold, as Load reads them; ok is false for a key that holds no record
// (the meta/ keys, the HA set's, the users' credentials, the ACLs) or
// many (an offset batch: OffsetWrites reads it). Keys
// of any shard decode, under their group's name. Tools read the store's
// history with it: the chaos checker replays the assignment keys'
// revisions.
func Decode(prefix string, key, value []byte) (rec coordinator.Record, ok bool, err error) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	k := prefixKeys(prefix)
	pk, err := k.parse(string(key))
	if err != nil {
		return nil, false, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	if pk.kind == kindMeta || pk.kind == kindUser || pk.kind == kindACL || pk.kind == kindOffsetBatch {
		return nil, false, nil
	}
	r, err := decodeValue(pk, value)
	if err != nil {
		return nil, false, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	return r, true, nil
}

// An OffsetWrite is an offset commit (Rec) or deletion (Rec.Deleted) with
// its order: of two writes of a partition, the one of the higher order is
// the partition's (docs/STORE.md, "Offset batches").
type OffsetWrite struct {
	Rec   *coordinator.OffsetRecord
	Order int64
}

// OffsetWrites returns the offset writes a key of the layout under prefix
// holds at revision modRev: an offset batch's, or a partition key's one
// (whose order is its "fr", if a fold wrote it, or modRev); ok is false
// for other keys. Tools replaying the store's history use it: a fold
// rewrites a partition key with a write that is not new, at an order
// already seen.
func OffsetWrites(prefix string, key, value []byte, modRev int64) (writes []OffsetWrite, ok bool, err error) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	pk, err := prefixKeys(prefix).parse(string(key))
	if err != nil {
		return nil, false, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	switch pk.kind {
	case kindOffset:
		r, fr, err := decodeOffset(pk.group, pk.name, pk.partition, value)
		if err != nil {
			return nil, false, fmt.Errorf("etcdstore: key %q: %w", key, err)
		}
		if fr == 0 {
			fr = modRev
		}
		return []OffsetWrite{{r, fr}}, true, nil
	case kindOffsetBatch:
		err := readBatch(pk.group, value, func(p tp, _ []byte, r *coordinator.OffsetRecord) {
			if r == nil {
				r = &coordinator.OffsetRecord{Group: pk.group, Topic: p.topic, Partition: p.partition, Deleted: true}
			}
			writes = append(writes, OffsetWrite{r, modRev})
		})
		if err != nil {
			return nil, false, fmt.Errorf("etcdstore: key %q: %w", key, err)
		}
		return writes, true, nil
	}
	return nil, false, nil
}

// DeletedRecord returns the deletion a deleted key stands for: a
// MemberRecord or OffsetRecord with Deleted set, or a TopicRecord with
// Deleted; ok is false for other keys (a member's assignment goes with
// its member; a group's key is never deleted, only tombstoned).
func DeletedRecord(prefix string, key []byte) (rec coordinator.Record, ok bool, err error) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	k := prefixKeys(prefix)
	pk, err := k.parse(string(key))
	if err != nil {
		return nil, false, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	switch pk.kind {
	case kindMember:
		return &coordinator.MemberRecord{Group: pk.group, MemberID: pk.name, Deleted: true}, true, nil
	case kindOffset:
		return &coordinator.OffsetRecord{Group: pk.group, Topic: pk.name, Partition: pk.partition, Deleted: true}, true, nil
	case kindTopic:
		return &coordinator.TopicRecord{Name: pk.name, Deleted: true}, true, nil
	}
	return nil, false, nil
}
