package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// ACLs keeps the authorizer's bindings in etcd (store.ACLStore), one key
// per binding, which every node of an HA set shares:
//
//	<p>acls/<type>/<pattern>/<name>/<principal>/<host>/<operation>/<permission>
//
// with the resource name, principal and host escaped like every other
// name, the enums in lower case (topic, prefixed, describe_configs,
// allow), and an empty value: the key is the binding, so creating one
// twice writes the same key, and `etcdctl get --prefix --keys-only
// <p>acls/` lists them readably. Like the topics, ACLs take no fence and
// no guard: any node may change them, leading or not.
type ACLs struct {
	cli  *clientv3.Client
	keys keys
}

var (
	_ store.ACLStore   = (*ACLs)(nil)
	_ store.ACLWatcher = (*ACLs)(nil)
)

// NewACLs returns the ACL store under the prefix of opts (Prefix; the
// others are ignored). cli stays the caller's.
func NewACLs(cli *clientv3.Client, opts ...Opt) *ACLs {
	c := newCfg(opts)
	return &ACLs{cli: cli, keys: prefixKeys(c.prefix)}
}

// aclTxnOps is the most keys one ACL transaction writes, well under
// etcd's default --max-txn-ops of 128.
const aclTxnOps = 64

// CreateACLs implements store.ACLStore.
func (a *ACLs) CreateACLs(ctx context.Context, bs []acl.Binding) error {
	// etcd refuses a transaction that names a key twice.
	ops := make([]clientv3.Op, 0, len(bs))
	seen := make(map[acl.Binding]bool, len(bs))
	for _, b := range bs {
		if !seen[b] {
			seen[b] = true
			ops = append(ops, clientv3.OpPut(a.keys.acl(&b), ""))
		}
	}
	if err := a.commit(ctx, ops); err != nil {
		return fmt.Errorf("etcdstore: creating ACLs: %w", err)
	}
	return nil
}

// DeleteACLs implements store.ACLStore. It reads every binding, matches
// the filters and deletes the matches; a binding created between the read
// and the deletion is kept.
func (a *ACLs) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	stored, err := a.LoadACLs(ctx)
	if err != nil {
		return nil, err
	}
	matched, all := store.MatchACLs(stored, filters)
	ops := make([]clientv3.Op, 0, len(all))
	for b := range all {
		ops = append(ops, clientv3.OpDelete(a.keys.acl(&b)))
	}
	if err := a.commit(ctx, ops); err != nil {
		return nil, fmt.Errorf("etcdstore: deleting ACLs: %w", err)
	}
	return matched, nil
}

// commit applies ops in transactions of at most aclTxnOps.
func (a *ACLs) commit(ctx context.Context, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), aclTxnOps)
		if _, err := a.cli.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// LoadACLs implements store.ACLStore.
func (a *ACLs) LoadACLs(ctx context.Context) ([]acl.Binding, error) {
	resp, err := a.cli.Get(ctx, a.keys.prefix+aclsDir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcdstore: loading ACLs: %w", err)
	}
	out := make([]acl.Binding, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		b, err := a.keys.parseACL(string(kv.Key))
		if err != nil {
			return nil, fmt.Errorf("etcdstore: key %q: %w", kv.Key, err)
		}
		out = append(out, b)
	}
	slices.SortFunc(out, acl.Compare)
	return out, nil
}

// WatchACLs implements store.ACLWatcher with an etcd watch of the acls/
// directory (watchSignals): a change reaches every node as soon as etcd
// delivers its event.
func (a *ACLs) WatchACLs(ctx context.Context) <-chan struct{} {
	return watchSignals(ctx, a.cli, a.keys.prefix+aclsDir, clientv3.WithPrefix())
}

// CreateACLs implements store.ACLStore, as ACLs does, on the store's
// prefix; like the topics, ACLs bypass the fence and the guard.
func (s *Store) CreateACLs(ctx context.Context, bs []acl.Binding) error {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	return (&ACLs{cli: s.cli, keys: s.keys}).CreateACLs(ctx, bs)
}

// DeleteACLs implements store.ACLStore, as ACLs does.
func (s *Store) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return (&ACLs{cli: s.cli, keys: s.keys}).DeleteACLs(ctx, filters)
}

// LoadACLs implements store.ACLStore.
func (s *Store) LoadACLs(ctx context.Context) ([]acl.Binding, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return (&ACLs{cli: s.cli, keys: s.keys}).LoadACLs(ctx)
}

// acl is the key of binding b.
func (k keys) acl(b *acl.Binding) string {
	var sb strings.Builder
	sb.WriteString(k.prefix)
	sb.WriteString(aclsDir)
	for i, part := range []string{
		enumName(b.ResourceType.String()), enumName(b.PatternType.String()),
		escape(b.ResourceName), escape(b.Principal), escape(b.Host),
		enumName(b.Operation.String()), enumName(b.Permission.String()),
	} {
		if i > 0 {
			sb.WriteByte('/')
		}
		sb.WriteString(part)
	}
	return sb.String()
}

// enumName is a Kafka enum's name as a key component: lower case, as
// Kafka's tools accept them.
func enumName(s string) string { return strings.ToLower(s) }

var errBadACLKey = errors.New("not an ACL key of this layout")

// parseACL inverts acl; only the canonical key of a valid binding parses.
func (k keys) parseACL(key string) (acl.Binding, error) {
	rest, ok := strings.CutPrefix(key, k.prefix+aclsDir)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 7 {
		return acl.Binding{}, errBadACLKey
	}
	var b acl.Binding
	var errs [7]error
	b.ResourceType, errs[0] = kmsg.ParseACLResourceType(parts[0])
	b.PatternType, errs[1] = kmsg.ParseACLResourcePatternType(parts[1])
	b.ResourceName, errs[2] = unescape(parts[2])
	b.Principal, errs[3] = unescape(parts[3])
	b.Host, errs[4] = unescape(parts[4])
	b.Operation, errs[5] = kmsg.ParseACLOperation(parts[5])
	b.Permission, errs[6] = kmsg.ParseACLPermissionType(parts[6])
	if err := errors.Join(errs[:]...); err != nil {
		return acl.Binding{}, fmt.Errorf("%w: %w", errBadACLKey, err)
	}
	if err := b.Validate(); err != nil {
		return acl.Binding{}, err
	}
	if k.acl(&b) != key {
		return acl.Binding{}, errBadACLKey
	}
	return b, nil
}
