package etcdstore_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/coordinator/store/storetest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

func TestKeysConformance(t *testing.T) {
	storetest.Keys(t, etcdstore.NewKeys(etcd.Client(t), etcdstore.Prefix(uniquePrefix(t))))
}

func TestStoreKeysConformance(t *testing.T) {
	s, _, _ := open(t)
	storetest.Keys(t, s)
}

// TestKeysBesideGroups: the key ring is one key under meta/, which Load,
// LoadGroup and Decode skip; another node's Keys sees what a store wrote,
// and its watch sees a rotation; a value of a newer tenure, or one that is
// not a ring, is an error naming the key.
func TestKeysBesideGroups(t *testing.T) {
	s, cli, prefix := open(t)
	ctx := testenv.Context(t)
	if err := s.Persist(ctx, []coordinator.Record{&coordinator.GroupRecord{Group: "g", Type: coordinator.Consumer, Epoch: 3}}); err != nil {
		t.Fatal(err)
	}
	other := etcdstore.NewKeys(etcd.Client(t), etcdstore.Prefix(prefix))
	watched := other.WatchKeys(ctx)
	awaitSignal(t, watched, "the watch in place")
	k, err := store.NewSigningKey(make([]byte, ed25519.SeedSize), time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreKeys(ctx, []store.SigningKey{k}, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watched:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not see the ring written within 5s")
	}
	for _, load := range []func() ([]coordinator.Record, error){
		func() ([]coordinator.Record, error) { return s.Load(ctx) },
		func() ([]coordinator.Record, error) { return s.LoadGroup(ctx, "g") },
	} {
		if recs, err := load(); err != nil || len(recs) != 1 {
			t.Fatalf("a load beside the key ring: %v %v", recs, err)
		}
	}
	resp, err := cli.Get(ctx, prefix+"meta/keys")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the ring's key: %v %v", resp, err)
	}
	if r, ok, err := etcdstore.Decode(prefix, resp.Kvs[0].Key, resp.Kvs[0].Value); ok || err != nil {
		t.Errorf("Decode of the ring's key: %v %v %v, want no record", r, ok, err)
	}
	want := `{"keys":[{"public":"O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=","seed":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","state":"active","created":"2026-05-01T00:00:00Z"}]}`
	if got := string(resp.Kvs[0].Value); got != want {
		t.Errorf("the ring's value:\n%s\nwant:\n%s", got, want)
	}
	ring, err := other.LoadKeys(ctx)
	if err != nil || len(ring.Keys) != 1 || ring.Keys[0].ID() != k.ID() {
		t.Fatalf("another node's read: %+v %v", ring, err)
	}
	for _, v := range []string{`{"v":2,"keys":[],"new":1}`, `{"x":1}`, `[]`,
		`{"keys":[{"public":"O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=","state":"active","created":"2026-05-01T00:00:00Z"}]}`} {
		if _, err := cli.Put(ctx, prefix+"meta/keys", v); err != nil {
			t.Fatal(err)
		}
		_, err := s.LoadKeys(ctx)
		if err == nil || !strings.Contains(err.Error(), "meta/keys") {
			t.Errorf("value %s: %v, want an error naming the key", v, err)
		}
		if strings.HasPrefix(v, `{"v":2`) && !strings.Contains(err.Error(), "newer") {
			t.Errorf("value %s: %v, want a newer-version error", v, err)
		}
	}
}
