package acl

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Filter selects bindings (Kafka's AclBindingFilter), as DescribeAcls and
// DeleteAcls carry it. A nil name, principal or host matches any; type
// ANY, operation ANY and permission ANY match any. Pattern ANY matches
// bindings of either pattern by exact name; pattern MATCH matches the
// bindings that apply to the named resource: its literal name, the
// literal wildcard and every prefix of it.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate rejects a filter with an UNKNOWN element, as Kafka does when it
// parses the request; the server answers INVALID_REQUEST.
func (f *Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown, f.PatternType == kmsg.ACLResourcePatternTypeUnknown,
		f.Operation == kmsg.ACLOperationUnknown, f.Permission == kmsg.ACLPermissionTypeUnknown:
		return fmt.Errorf("%w: the filter has UNKNOWN elements", ErrInvalid)
	case f.ResourceType > kmsg.ACLResourceTypeUser, f.PatternType > kmsg.ACLResourcePatternTypePrefixed,
		f.Operation > kmsg.ACLOperationDescribeTokens, f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: the filter has elements this server does not know", ErrInvalid)
	}
	return nil
}

// Matches reports whether f selects b.
func (f *Filter) Matches(b *Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// matchesPattern is Kafka's ResourcePatternFilter.matches.
func (f *Filter) matchesPattern(b *Binding) bool {
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch:
	default:
		if f.PatternType != b.PatternType {
			return false
		}
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
		return name == b.ResourceName
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return name == b.ResourceName || b.ResourceName == WildcardResource
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}
