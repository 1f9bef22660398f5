package etcdstore

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// TestACLKeys: every valid binding, whatever bytes its names hold, has a
// key that parses back to it, and keys that are not canonical do not
// parse.
func TestACLKeys(t *testing.T) {
	k := prefixKeys("/p/")
	rapid.Check(t, func(t *rapid.T) {
		b := acl.Binding{
			ResourceType: rapid.SampledFrom([]acl.ResourceType{kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup,
				kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser}).Draw(t, "type"),
			PatternType:  rapid.SampledFrom([]acl.PatternType{kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed}).Draw(t, "pattern"),
			ResourceName: anyName.Draw(t, "name"),
			Principal:    "User:" + anyName.Draw(t, "principal"),
			Host:         anyName.Draw(t, "host"),
			Operation:    acl.Operation(rapid.IntRange(int(kmsg.ACLOperationAll), int(kmsg.ACLOperationDescribeTokens)).Draw(t, "op")),
			Permission:   rapid.SampledFrom([]acl.Permission{kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny}).Draw(t, "perm"),
		}
		if b.Validate() != nil {
			t.Skip("invalid binding")
		}
		key := k.acl(&b)
		got, err := k.parseACL(key)
		if err != nil || got != b {
			t.Fatalf("key %q parsed to %v, %v; want %v", key, got, err, b)
		}
		if pk, err := k.parse(key); err != nil || pk.kind != kindACL {
			t.Fatalf("the store's parser takes %q for %v, %v", key, pk.kind, err)
		}
	})
	for _, bad := range []string{
		"/p/acls/group/literal/g/User:a/*/read",              // too short
		"/p/acls/group/literal/g/User%3Aa/%2A/read/allow/x",  // too long
		"/p/acls/GROUP/literal/g/User%3Aa/%2A/read/allow",    // upper case
		"/p/acls/group/literal/g/User%3Aa/%2A/Read/allow",    // upper case
		"/p/acls/any/literal/g/User%3Aa/%2A/read/allow",      // not a binding
		"/p/acls/group/match/g/User%3Aa/%2A/read/allow",      // not a binding
		"/p/acls/group/literal/g/User:a/%2A/read/allow",      // not escaped
		"/p/acls/group/literal//User%3Aa/%2A/read/allow",     // empty name
		"/p/acls/cluster/literal/c/User%3Aa/%2A/alter/allow", // not the cluster's name
		"/q/acls/group/literal/g/User%3Aa/%2A/read/allow",    // other prefix
	} {
		if b, err := k.parseACL(bad); err == nil {
			t.Errorf("%q parsed to %v", bad, b)
		}
	}
}
