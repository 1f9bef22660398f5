package etcdstore_test

import (
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/coordinator/store/storetest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

func TestUsersCredentials(t *testing.T) {
	storetest.Credentials(t, etcdstore.NewUsers(etcd.Client(t), etcdstore.Prefix(uniquePrefix(t))))
}

func TestStoreCredentials(t *testing.T) {
	s, _, _ := open(t)
	storetest.Credentials(t, s)
}

// TestUsersBesideGroups: credentials live under the store's prefix beside
// the groups, which Load and Decode skip, and one node's Users sees what
// another's store wrote. The value holds the salt, iterations and keys
// only, in JSON that etcdctl shows.
func TestUsersBesideGroups(t *testing.T) {
	s, cli, prefix := open(t)
	ctx := testenv.Context(t)
	if err := s.Persist(ctx, []coordinator.Record{&coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 3}}); err != nil {
		t.Fatal(err)
	}
	cred := &store.Credential{User: "alice/x", Mechanism: "SCRAM-SHA-512", Salt: []byte("salt"), Iterations: 8192,
		StoredKey: []byte("sk"), ServerKey: []byte("vk")}
	if err := s.AlterCredentials(ctx, []*store.Credential{cred}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Load(ctx)
	if err != nil || len(recs) != 1 {
		t.Fatalf("Load beside a credential: %v %v", recs, err)
	}
	resp, err := cli.Get(ctx, prefix+"users/alice%2Fx/SCRAM-SHA-512")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the credential's key: %v %v", resp, err)
	}
	want := `{"salt":"c2FsdA==","iterations":8192,"stored_key":"c2s=","server_key":"dms="}`
	if got := string(resp.Kvs[0].Value); got != want {
		t.Errorf("the credential's value:\n%s\nwant:\n%s", got, want)
	}
	if r, ok, err := etcdstore.Decode(prefix, resp.Kvs[0].Key, resp.Kvs[0].Value); ok || err != nil {
		t.Errorf("Decode of a user key: %v %v %v, want no record", r, ok, err)
	}
	got, err := etcdstore.NewUsers(cli, etcdstore.Prefix(prefix)).Credential(ctx, "alice/x", "SCRAM-SHA-512")
	if err != nil || got.Iterations != 8192 || string(got.Salt) != "salt" {
		t.Fatalf("another node's read: %+v %v", got, err)
	}

	// A value of a newer tenure, or one that is not a credential, is an
	// error that names its key.
	for _, v := range []string{`{"v":2,"salt":"","iterations":1,"stored_key":"","server_key":"","new":1}`, `{"x":1}`, `[]`} {
		if _, err := cli.Put(ctx, prefix+"users/bob/SCRAM-SHA-256", v); err != nil {
			t.Fatal(err)
		}
		_, err := s.Credential(ctx, "bob", "SCRAM-SHA-256")
		if err == nil || !strings.Contains(err.Error(), "users/bob/SCRAM-SHA-256") {
			t.Errorf("value %s: %v, want an error naming the key", v, err)
		}
		if strings.HasPrefix(v, `{"v":2`) && !strings.Contains(err.Error(), "newer") {
			t.Errorf("value %s: %v, want a newer-version error", v, err)
		}
	}
}
