package etcdstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestACLsMatchMemory: random creations and deletions leave the etcd
// store and the memory store (the reference) with the same bindings, and
// each deletion reports the same matches.
func TestACLsMatchMemory(t *testing.T) {
	cli := etcd.Client(t)
	str := func(s string) *string { return &s }
	names := rapid.SampledFrom([]string{"g", "g/1", "team-", "team-a", "*", "kafka-cluster"})
	principals := rapid.SampledFrom([]string{"User:alice", "User:b/ob", "User:*"})
	genBinding := rapid.Custom(func(t *rapid.T) acl.Binding {
		b := acl.Binding{
			ResourceType: rapid.SampledFrom([]acl.ResourceType{kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster}).Draw(t, "type"),
			PatternType:  rapid.SampledFrom([]acl.PatternType{kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed}).Draw(t, "pattern"),
			ResourceName: names.Draw(t, "name"),
			Principal:    principals.Draw(t, "principal"),
			Host:         rapid.SampledFrom([]string{"*", "::1"}).Draw(t, "host"),
			Operation:    rapid.SampledFrom([]acl.Operation{kmsg.ACLOperationRead, kmsg.ACLOperationAll, kmsg.ACLOperationAlter}).Draw(t, "op"),
			Permission:   rapid.SampledFrom([]acl.Permission{kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny}).Draw(t, "perm"),
		}
		if b.ResourceType == kmsg.ACLResourceTypeCluster {
			b.ResourceName = acl.ClusterName
		}
		return b
	})
	genFilter := rapid.Custom(func(t *rapid.T) acl.Filter {
		f := acl.Filter{
			ResourceType: rapid.SampledFrom([]acl.ResourceType{kmsg.ACLResourceTypeAny, kmsg.ACLResourceTypeGroup}).Draw(t, "type"),
			PatternType: rapid.SampledFrom([]acl.PatternType{kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch,
				kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed}).Draw(t, "pattern"),
			Operation:  kmsg.ACLOperationAny,
			Permission: rapid.SampledFrom([]acl.Permission{kmsg.ACLPermissionTypeAny, kmsg.ACLPermissionTypeDeny}).Draw(t, "perm"),
		}
		if rapid.Bool().Draw(t, "named") {
			f.ResourceName = str(names.Draw(t, "name"))
		}
		if rapid.Bool().Draw(t, "by principal") {
			f.Principal = str(principals.Draw(t, "principal"))
		}
		return f
	})
	rapid.Check(t, func(rt *rapid.T) {
		// A deadline per case: a loaded machine may take a while
		// over a hundred of them.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		a := etcdstore.NewACLs(cli, etcdstore.Prefix(uniquePrefix(t)))
		m := store.NewMemory()
		for range rapid.IntRange(1, 6).Draw(rt, "steps") {
			if rapid.Bool().Draw(rt, "create") {
				bs := rapid.SliceOfN(genBinding, 1, 4).Draw(rt, "bindings")
				if err := a.CreateACLs(ctx, bs); err != nil {
					rt.Fatal(err)
				}
				m.CreateACLs(ctx, bs)
				continue
			}
			fs := rapid.SliceOfN(genFilter, 1, 3).Draw(rt, "filters")
			got, err := a.DeleteACLs(ctx, fs)
			if err != nil {
				rt.Fatal(err)
			}
			want, _ := m.DeleteACLs(ctx, fs)
			if !slices.EqualFunc(got, want, slices.Equal) {
				rt.Fatalf("deleted %v, the reference %v", got, want)
			}
		}
		got, err := a.LoadACLs(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		want, _ := m.LoadACLs(ctx)
		if !slices.Equal(got, want) {
			rt.Fatalf("holds %v, the reference %v", got, want)
		}
	})
}

// TestACLsBesideRecords: ACLs share the store's prefix without being
// taken for records, and a watch on another client sees a change.
func TestACLsBesideRecords(t *testing.T) {
	s, cli, prefix := open(t)
	ctx := testenv.Context(t)
	before, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watched := etcdstore.NewACLs(etcd.Client(t), etcdstore.Prefix(prefix)).WatchACLs(ctx)
	// The watch in place: a change before it would be missed.
	awaitSignal(t, watched, "the watch in place")
	b := acl.Binding{ResourceType: kmsg.ACLResourceTypeGroup, PatternType: kmsg.ACLResourcePatternTypeLiteral, ResourceName: "g",
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	start := time.Now()
	if err := s.CreateACLs(ctx, []acl.Binding{b}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watched:
		t.Logf("the watch saw the change %v after the write began", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not see the change within 5s")
	}
	after, err := s.Load(ctx)
	if err != nil || len(after) != len(before) {
		t.Fatalf("Load with an ACL stored: %d records, %v; %d before", len(after), err, len(before))
	}
	got, err := etcdstore.NewACLs(cli, etcdstore.Prefix(prefix)).LoadACLs(ctx)
	if err != nil || !slices.Equal(got, []acl.Binding{b}) {
		t.Fatalf("LoadACLs = %v, %v", got, err)
	}
}
