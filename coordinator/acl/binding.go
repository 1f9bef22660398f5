// Package acl is tenure's authorization model: Kafka's access control
// lists (KIP-11, KIP-290) and the pure decision over them.
//
// A Binding allows or denies one principal, from one host, one operation
// on the resources one pattern names: a literal name (or "*", every
// resource of the type) or a prefix. An Authorizer is an immutable index
// of bindings and super users that answers Authorize(principal, host,
// resource, operation) the way Kafka's StandardAuthorizer does:
//
//   - a super user may do anything;
//   - a DENY binding that matches wins over any ALLOW;
//   - otherwise an ALLOW binding that matches allows, and nothing else
//     does: with authorization on, the default is deny;
//   - operation ALL matches every operation; an ALLOW of READ, WRITE,
//     DELETE or ALTER also allows DESCRIBE, and an ALLOW of
//     ALTER_CONFIGS allows DESCRIBE_CONFIGS (implied operations only
//     widen allows: a DENY of READ does not deny DESCRIBE);
//   - principal "User:*" matches every principal, host "*" every host.
//
// Filters select bindings for DescribeAcls and DeleteAcls, with Kafka's
// ANY and MATCH semantics.
//
// The package holds no state and does no I/O: the server keeps the
// bindings in a store (store.ACLStore) and swaps in a new Authorizer when
// they change.
package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resource types, pattern types, operations and permissions are Kafka's
// wire enums, so requests and bindings convert without tables.
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

// ClusterName is the name of the one cluster resource, as Kafka names it.
const ClusterName = "kafka-cluster"

// Wildcards: a literal resource name, a principal and a host matching
// every resource, user and host.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Binding is one access control entry on one resource pattern (Kafka's
// AclBinding).
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType // Literal or Prefixed
	Principal    string      // "User:alice", or WildcardPrincipal
	Host         string      // an IP address, or WildcardHost
	Operation    Operation
	Permission   Permission // Allow or Deny
}

// ErrInvalid is wrapped by every error Validate returns; the server
// answers such a creation INVALID_REQUEST.
var ErrInvalid = errors.New("acl: invalid binding")

// Validate checks b as Kafka checks a binding to create: concrete types
// (no ANY, MATCH or UNKNOWN), a non-empty resource name, the cluster
// named ClusterName, and a principal of the form "Type:name".
func (b *Binding) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	switch {
	case b.ResourceType < kmsg.ACLResourceTypeTopic || b.ResourceType > kmsg.ACLResourceTypeUser:
		return bad("resource type %v", b.ResourceType)
	case b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return bad("pattern type %v (LITERAL or PREFIXED)", b.PatternType)
	case b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationDescribeTokens:
		return bad("operation %v", b.Operation)
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return bad("permission %v (ALLOW or DENY)", b.Permission)
	case b.ResourceName == "":
		return bad("empty resource name")
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName:
		return bad("the only valid name for the CLUSTER resource is %s", ClusterName)
	case !validPrincipal(b.Principal):
		return bad("principal %q is not of the form Type:name", b.Principal)
	case b.Host == "":
		return bad("empty host (use * for every host)")
	}
	return nil
}

// validPrincipal reports whether p is "Type:name" with a non-empty type.
func validPrincipal(p string) bool {
	i := strings.IndexByte(p, ':')
	return i > 0
}

// String renders b as Kafka's tools do, for logs and errors.
func (b Binding) String() string {
	return fmt.Sprintf("(pattern=%v:%v:%s, principal=%s, host=%s, operation=%v, permission=%v)",
		b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// Compare orders bindings by every field, resource first, so that lists
// of them sort stably for output and tests.
func Compare(a, b Binding) int {
	if c := int(a.ResourceType) - int(b.ResourceType); c != 0 {
		return c
	}
	if c := int(a.PatternType) - int(b.PatternType); c != 0 {
		return c
	}
	if c := strings.Compare(a.ResourceName, b.ResourceName); c != 0 {
		return c
	}
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	if c := int(a.Operation) - int(b.Operation); c != 0 {
		return c
	}
	return int(a.Permission) - int(b.Permission)
}
