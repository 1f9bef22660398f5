package acl

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorizer decides requests against a fixed set of bindings and super
// users. It is immutable, so any number of goroutines may use it while a
// new one is built for the next change.
//
// A decision costs a map look-up for the literal name, a scan of the
// type's wildcard bindings, and one map look-up per distinct prefix length
// of the type's prefixed bindings, whatever the number of bindings; it
// allocates nothing.
type Authorizer struct {
	super    map[string]bool
	bindings []Binding // sorted (Compare), deduplicated
	types    [kmsg.ACLResourceTypeUser + 1]typeIndex
}

// typeIndex holds the entries of one resource type.
type typeIndex struct {
	literal  map[string][]entry
	wildcard []entry
	// prefixed maps a prefix to its entries; lengths lists the distinct
	// prefix lengths, ascending.
	prefixed map[string][]entry
	lengths  []int
}

// entry is a binding without its resource pattern.
type entry struct {
	principal  string
	host       string
	operation  Operation
	permission Permission
}

// New returns an Authorizer over bindings (each validated by the caller;
// invalid ones are ignored) with superUsers ("User:alice") allowed
// everything.
func New(bindings []Binding, superUsers []string) *Authorizer {
	a := &Authorizer{super: make(map[string]bool, len(superUsers))}
	for _, u := range superUsers {
		a.super[u] = true
	}
	a.bindings = slices.Clone(bindings)
	slices.SortFunc(a.bindings, Compare)
	a.bindings = slices.Compact(a.bindings)
	for i := range a.bindings {
		b := &a.bindings[i]
		if b.Validate() != nil {
			continue
		}
		t := &a.types[b.ResourceType]
		e := entry{principal: b.Principal, host: b.Host, operation: b.Operation, permission: b.Permission}
		switch {
		case b.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			if t.prefixed == nil {
				t.prefixed = make(map[string][]entry)
			}
			if _, ok := t.prefixed[b.ResourceName]; !ok {
				if n := len(b.ResourceName); !slices.Contains(t.lengths, n) {
					t.lengths = append(t.lengths, n)
				}
			}
			t.prefixed[b.ResourceName] = append(t.prefixed[b.ResourceName], e)
		case b.ResourceName == WildcardResource:
			t.wildcard = append(t.wildcard, e)
		default:
			if t.literal == nil {
				t.literal = make(map[string][]entry)
			}
			t.literal[b.ResourceName] = append(t.literal[b.ResourceName], e)
		}
	}
	for i := range a.types {
		slices.Sort(a.types[i].lengths)
	}
	return a
}

// Bindings returns the authorizer's bindings, sorted and without
// duplicates. The slice is shared: do not modify it.
func (a *Authorizer) Bindings() []Binding { return a.bindings }

// SuperUser reports whether principal is a super user.
func (a *Authorizer) SuperUser(principal string) bool { return a.super[principal] }

// Authorize reports whether principal, connected from host, may perform
// op on the resource of type rt named name.
func (a *Authorizer) Authorize(principal, host string, rt ResourceType, name string, op Operation) bool {
	if a.super[principal] {
		return true
	}
	if rt <= kmsg.ACLResourceTypeAny || int(rt) >= len(a.types) {
		return false
	}
	t := &a.types[rt]
	var d decision
	d.scan(t.literal[name], principal, host, op)
	d.scan(t.wildcard, principal, host, op)
	for _, n := range t.lengths {
		if n > len(name) {
			break
		}
		d.scan(t.prefixed[name[:n]], principal, host, op)
	}
	return d.allowed && !d.denied
}

// decision accumulates the entries that apply to one request.
type decision struct {
	allowed, denied bool
}

func (d *decision) scan(es []entry, principal, host string, op Operation) {
	for i := range es {
		e := &es[i]
		if !e.applies(principal, host, op) {
			continue
		}
		if e.permission == kmsg.ACLPermissionTypeDeny {
			d.denied = true
		} else {
			d.allowed = true
		}
	}
}

// applies reports whether e speaks about principal at host doing op.
func (e *entry) applies(principal, host string, op Operation) bool {
	if e.principal != principal && e.principal != WildcardPrincipal {
		return false
	}
	if e.host != host && e.host != WildcardHost {
		return false
	}
	return e.implies(op)
}

// implies reports whether e's operation covers op (Kafka's
// StandardAuthorizerData.findResult).
func (e *entry) implies(op Operation) bool {
	if e.operation == kmsg.ACLOperationAll || e.operation == op {
		return true
	}
	if e.permission != kmsg.ACLPermissionTypeAllow {
		return false
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch e.operation {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return e.operation == kmsg.ACLOperationAlterConfigs
	}
	return false
}
