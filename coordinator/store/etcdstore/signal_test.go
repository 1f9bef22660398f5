package etcdstore_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// awaitSignal waits for a signal of a watch: within 10 s, which a starved
// etcd and client take to create a watch under -race on a loaded machine
// (a healthy one takes milliseconds).
func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the watch's channel closed", what)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no signal within 10 s", what)
	}
}

// TestWatchSignalsOnceInPlace: the ACLs' and the key ring's watches each
// signal once etcd has created them, with nothing changed: a change made
// after a node's first load and before its watch existed reaches no
// watch, and only the reload on this signal reads it (before, the node
// applied it at its next 30 s refresh). A change after that signals again.
func TestWatchSignalsOnceInPlace(t *testing.T) {
	s, _, prefix := open(t)
	ctx := testenv.Context(t)
	acls := etcdstore.NewACLs(etcd.Client(t), etcdstore.Prefix(prefix)).WatchACLs(ctx)
	keys := etcdstore.NewKeys(etcd.Client(t), etcdstore.Prefix(prefix)).WatchKeys(ctx)
	awaitSignal(t, acls, "the ACLs' watch in place")
	awaitSignal(t, keys, "the key ring's watch in place")

	b := acl.Binding{ResourceType: kmsg.ACLResourceTypeGroup, PatternType: kmsg.ACLResourcePatternTypeLiteral, ResourceName: "g",
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	if err := s.CreateACLs(ctx, []acl.Binding{b}); err != nil {
		t.Fatal(err)
	}
	awaitSignal(t, acls, "the ACLs' watch after a change")
	k, err := store.NewSigningKey(make([]byte, ed25519.SeedSize), time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreKeys(ctx, []store.SigningKey{k}, 0); err != nil {
		t.Fatal(err)
	}
	awaitSignal(t, keys, "the key ring's watch after a change")
}
