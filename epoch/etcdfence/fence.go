package etcdfence

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/epoch"
)

// Fence guards writes to etcd with fencing tokens, one per partition, stored
// under a prefix. It holds no state of its own beyond its client, so any
// number of Fences (in any number of processes) built with the same prefix
// guard the same partitions. A Fence is safe for concurrent use.
type Fence struct {
	kv       clientv3.KV
	tokens   string // "<prefix>/tokens/"
	lo, hi   []byte // the key range [lo, hi) holding every token key
	verifier *epoch.Verifier
}

var _ epoch.SignedFence = (*Fence)(nil)

// Option configures a Fence; see New.
type Option func(*Fence)

// WithVerifier makes the fence check signed tokens with v before it
// writes anything ([Fence.PutSigned]), and, if v requires signatures,
// refuse every plain token given to Put and Admit. Without it the fence
// checks tokens only against each other, and takes a signed token's
// Token alone.
func WithVerifier(v *epoch.Verifier) Option { return func(f *Fence) { f.verifier = v } }

// New returns a Fence that stores its tokens under prefix (see the package
// doc for the layout); trailing slashes on prefix are ignored. kv is usually
// a *clientv3.Client; a namespaced KV works too.
func New(kv clientv3.KV, prefix string, opts ...Option) *Fence {
	tokens := strings.TrimRight(prefix, "/") + "/tokens/"
	f := &Fence{
		kv:     kv,
		tokens: tokens,
		lo:     []byte(tokens),
		hi:     prefixEnd([]byte(tokens)),
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Key returns the etcd key holding partition p's token. A caller composing
// its own transactions can watch it or read it, but must not write it.
func (f *Fence) Key(p epoch.Partition) string {
	return f.tokens + strconv.FormatInt(int64(p), 10)
}

// Put applies ops and records token t for partition p in one etcd
// transaction, if and only if t is not older than the token stored for p.
//
// On success the response is that of the transaction's applied branch:
// Responses holds one entry per op, in order, followed by the response to the
// token's own put, and Header.Revision is the revision at which the effect
// became visible.
//
// If a newer token is stored, nothing is written and the error is an
// [*epoch.StaleError] (wrapping [epoch.ErrStale]) with Current set to the
// stored token. A token that is not [epoch.Token.Valid] (zero, or negative
// such as Kafka's generation -1) returns an error wrapping [epoch.ErrNoToken],
// and an op that writes a token key one wrapping [ErrTokenKey]; neither
// reaches etcd; nor does a plain token refused by a verifier that
// requires signatures ([epoch.ErrUnsigned], see [WithVerifier]). Any other
// error comes from etcd, and then the outcome is unknown.
func (f *Fence) Put(ctx context.Context, p epoch.Partition, t epoch.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("etcdfence: partition %d token %v: %w", p, t, epoch.ErrNoToken)
	}
	if err := f.verifier.CheckUnsigned(p, t); err != nil {
		return nil, err
	}
	return f.put(ctx, p, t, ops)
}

// PutSigned is Put for a signed token: the fence's verifier checks it
// first, and a token that does not verify (an invented one, another
// partition's, group's or member's, one of an unknown or revoked key, a
// tampered signature) is refused with a [*epoch.VerifyError] wrapping
// [epoch.ErrUnverified], without reaching etcd: the stored token does not
// move. A verified token is cached by the verifier, so an owner's
// further writes pay no signature check. Without a verifier PutSigned is
// Put of t.Token.
func (f *Fence) PutSigned(ctx context.Context, p epoch.Partition, t epoch.SignedToken, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if !t.Token.Valid() {
		return nil, fmt.Errorf("etcdfence: partition %d token %v: %w", p, t.Token, epoch.ErrNoToken)
	}
	if err := f.verifier.Verify(p, t); err != nil {
		return nil, err
	}
	return f.put(ctx, p, t.Token, ops)
}

// put is the guarded write, once t is known to be a token the fence may
// admit.
func (f *Fence) put(ctx context.Context, p epoch.Partition, t epoch.Token, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := checkOps(ops, f.lo, f.hi); err != nil {
		return nil, err
	}
	key := f.Key(p)
	mine := encodeToken(t)
	apply := make([]clientv3.Op, 0, len(ops)+1)
	apply = append(apply, ops...)
	apply = append(apply, clientv3.OpPut(key, mine))

	// The condition is the rejection, not the admission, because etcd has no
	// "<=" and a missing key must admit: a stored token that is present and
	// greater than mine rejects; anything else (absent, equal, smaller)
	// takes the Else branch and writes.
	resp, err := f.kv.Txn(ctx).
		If(
			clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
			clientv3.Compare(clientv3.Value(key), ">", mine),
		).
		Then(clientv3.OpGet(key)).
		Else(apply...).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdfence: partition %d token %v: %w", p, t, err)
	}
	if !resp.Succeeded {
		return resp, nil
	}
	stale := &epoch.StaleError{Partition: p, Token: t}
	if len(resp.Responses) == 1 {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
			cur, err := decodeToken(key, kvs[0].Value)
			if err != nil {
				return nil, err
			}
			stale.Current = cur
		}
	}
	return nil, stale
}

// Admit records token t for partition p with no other effect, rejecting it
// like [Fence.Put] if a newer token is stored, or if t is not
// [epoch.Token.Valid] ([epoch.ErrNoToken]). It implements [epoch.Fence].
func (f *Fence) Admit(ctx context.Context, p epoch.Partition, t epoch.Token) error {
	_, err := f.Put(ctx, p, t)
	return err
}

// AdmitSigned records the signed token t for partition p with no other
// effect, as [Fence.PutSigned] checks and records it. It implements
// [epoch.SignedFence].
func (f *Fence) AdmitSigned(ctx context.Context, p epoch.Partition, t epoch.SignedToken) error {
	_, err := f.PutSigned(ctx, p, t)
	return err
}

// Current returns the token stored for partition p, or [epoch.None] if no
// token has been admitted for it. The read is linearizable.
func (f *Fence) Current(ctx context.Context, p epoch.Partition) (epoch.Token, error) {
	key := f.Key(p)
	resp, err := f.kv.Get(ctx, key)
	if err != nil {
		return epoch.None, fmt.Errorf("etcdfence: partition %d: %w", p, err)
	}
	if len(resp.Kvs) == 0 {
		return epoch.None, nil
	}
	return decodeToken(key, resp.Kvs[0].Value)
}
