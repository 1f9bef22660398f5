package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// Users is the SASL users' SCRAM credentials in etcd, one key per user
// and mechanism (users/<user>/<mechanism>), which every node of an HA set
// shares (store.CredentialStore): any node, leading or not, authenticates
// clients and answers AlterUserScramCredentials. Like Topics it takes no
// fence and no guard: a credential does not depend on who leads.
type Users struct {
	cli  *clientv3.Client
	keys keys
}

var _ store.CredentialStore = (*Users)(nil)

// NewUsers returns the credentials under the prefix of opts (Prefix; the
// others are ignored). cli stays the caller's.
func NewUsers(cli *clientv3.Client, opts ...Opt) *Users {
	c := newCfg(opts)
	return &Users{cli: cli, keys: prefixKeys(c.prefix)}
}

// credentialValue is a credential's value: the byte fields in base64 (JSON's
// []byte), the user and mechanism being the key's. No password is stored,
// nor the salted password.
type credentialValue struct {
	V          int    `json:"v,omitzero"`
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// credentialVersion is the version of credentialValue.
const credentialVersion = 1

func encodeCredential(c *store.Credential) []byte {
	b, err := json.Marshal(credentialValue{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey})
	if err != nil {
		panic(fmt.Sprintf("etcdstore: encoding a credential: %v", err)) // ints and bytes only
	}
	return b
}

func (u *Users) decode(key, value []byte) (*store.Credential, error) {
	pk, err := u.keys.parse(string(key))
	if err == nil && pk.kind != kindUser {
		err = errBadKey
	}
	if err != nil {
		return nil, fmt.Errorf("etcdstore: key %q: %w", key, err)
	}
	var v credentialValue
	if err := decodeStrict(string(key), value, &v, &v.V, credentialVersion); err != nil {
		return nil, err
	}
	return &store.Credential{User: pk.name, Mechanism: pk.mechanism, Salt: v.Salt, Iterations: v.Iterations,
		StoredKey: v.StoredKey, ServerKey: v.ServerKey}, nil
}

// errBadMechanism: a mechanism name that cannot be a key component.
var errBadMechanism = errors.New("etcdstore: not a SASL mechanism name")

// Credential implements store.CredentialStore. The read is linearizable:
// a password changed on one node is the one every node checks from then
// on.
func (u *Users) Credential(ctx context.Context, user, mechanism string) (*store.Credential, error) {
	if !validMechanismKey(mechanism) {
		return nil, fmt.Errorf("%w: %q", errBadMechanism, mechanism)
	}
	resp, err := u.cli.Get(ctx, u.keys.user(user, mechanism))
	if err != nil {
		return nil, fmt.Errorf("etcdstore: reading the credential of %q: %w", user, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, store.ErrNoCredential
	}
	return u.decode(resp.Kvs[0].Key, resp.Kvs[0].Value)
}

// Credentials implements store.CredentialStore.
func (u *Users) Credentials(ctx context.Context) ([]*store.Credential, error) {
	resp, err := u.cli.Get(ctx, u.keys.prefix+usersDir, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcdstore: loading the users: %w", err)
	}
	out := make([]*store.Credential, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		c, err := u.decode(kv.Key, kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	store.SortCredentials(out) // escaped names need not sort as names do
	return out, nil
}

// AlterCredentials implements store.CredentialStore with one transaction.
func (u *Users) AlterCredentials(ctx context.Context, creds []*store.Credential) error {
	ops := make([]clientv3.Op, 0, len(creds))
	for _, c := range creds {
		if !validMechanismKey(c.Mechanism) {
			return fmt.Errorf("%w: %q", errBadMechanism, c.Mechanism)
		}
		key := u.keys.user(c.User, c.Mechanism)
		if c.Deleted {
			ops = append(ops, clientv3.OpDelete(key))
		} else {
			ops = append(ops, clientv3.OpPut(key, string(encodeCredential(c))))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := u.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("etcdstore: altering credentials: %w", err)
	}
	return nil
}

// Credential implements store.CredentialStore, as Users does, on the
// store's prefix; it bypasses the fence and the guard, which do not
// concern credentials.
func (s *Store) Credential(ctx context.Context, user, mechanism string) (*store.Credential, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return (&Users{cli: s.cli, keys: s.keys}).Credential(ctx, user, mechanism)
}

// Credentials implements store.CredentialStore, as Users does.
func (s *Store) Credentials(ctx context.Context) ([]*store.Credential, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return (&Users{cli: s.cli, keys: s.keys}).Credentials(ctx)
}

// AlterCredentials implements store.CredentialStore, as Users does,
// bypassing the fence and the guard like CreateTopic.
func (s *Store) AlterCredentials(ctx context.Context, creds []*store.Credential) error {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	return (&Users{cli: s.cli, keys: s.keys}).AlterCredentials(ctx, creds)
}
