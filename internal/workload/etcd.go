package workload

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/etcdfence"
)

// EtcdResource keeps records in etcd, fenced by an etcdfence.Fence under
// the same prefix:
//
//	<prefix>/tokens/<partition>                  the fence's tokens
//	<prefix>/records/<partition>/<seq>/<token>   one key per record, JSON
//
// with seq and token in ten-digit decimal, so that a listing sorts records
// by sequence number, and the records of one sequence number (redone by a
// later owner) by token. Each append is one etcd transaction that checks
// the token and puts the record. One prefix serves one topic of one group.
type EtcdResource struct {
	kv       clientv3.KV
	fence    *etcdfence.Fence
	unfenced bool
	records  string // "<prefix>/records/"
}

var _ Resource = (*EtcdResource)(nil)

// NewEtcdResource returns a resource keeping its records under prefix
// (trailing slashes ignored). kv is usually a *clientv3.Client, which the
// caller closes.
func NewEtcdResource(kv clientv3.KV, prefix string, opts ...Option) *EtcdResource {
	prefix = strings.TrimRight(prefix, "/")
	o := applyOptions(opts)
	return &EtcdResource{kv: kv, fence: etcdfence.New(kv, prefix, etcdfence.WithVerifier(o.verifier)), records: prefix + "/records/"}
}

// NewUnfencedEtcdResource returns a resource with the layout of
// [NewEtcdResource] that checks no token: Admit does nothing and Append
// puts the record in a plain Put, so a former owner's late writes land.
// It is the control of a test or demo that must show what the fence
// prevents, never a way to run real work.
func NewUnfencedEtcdResource(kv clientv3.KV, prefix string) *EtcdResource {
	e := NewEtcdResource(kv, prefix)
	e.unfenced = true
	return e
}

// Key returns the etcd key of record r.
func (e *EtcdResource) Key(r Record) string {
	return fmt.Sprintf("%s%d/%010d/%010d", e.records, r.Partition, r.Seq, r.Token)
}

// Admit implements [Resource]. An unfenced resource admits everything and
// records nothing.
func (e *EtcdResource) Admit(ctx context.Context, p epoch.Partition, t epoch.SignedToken) error {
	if e.unfenced {
		return nil
	}
	return e.fence.AdmitSigned(ctx, p, t)
}

// Append implements [Resource]: one guarded transaction, or a plain Put
// for an unfenced resource.
func (e *EtcdResource) Append(ctx context.Context, r Record, t epoch.SignedToken) error {
	if t.Token != r.Token {
		return ErrTokenMismatch
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	if e.unfenced {
		if _, err := e.kv.Put(ctx, e.Key(r), string(v)); err != nil {
			return fmt.Errorf("workload: put record: %w", err)
		}
		return nil
	}
	_, err = e.fence.PutSigned(ctx, r.Partition, t, clientv3.OpPut(e.Key(r), string(v)))
	return err
}

// Records implements [Resource]; Order is the record's etcd revision.
func (e *EtcdResource) Records(ctx context.Context) ([]Stored, error) {
	resp, err := e.kv.Get(ctx, e.records, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("workload: read records: %w", err)
	}
	out := make([]Stored, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r Record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("workload: record %q: %w", kv.Key, err)
		}
		out = append(out, Stored{Record: r, Order: kv.ModRevision})
	}
	sortStored(out)
	return out, nil
}

func sortStored(s []Stored) {
	slices.SortFunc(s, func(a, b Stored) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Order, b.Order))
	})
}
