package acl

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny

	opAll      = kmsg.ACLOperationAll
	opRead     = kmsg.ACLOperationRead
	opWrite    = kmsg.ACLOperationWrite
	opCreate   = kmsg.ACLOperationCreate
	opDelete   = kmsg.ACLOperationDelete
	opAlter    = kmsg.ACLOperationAlter
	opDescribe = kmsg.ACLOperationDescribe
	opDescCfg  = kmsg.ACLOperationDescribeConfigs
	opAlterCfg = kmsg.ACLOperationAlterConfigs
)

func bind(rt ResourceType, pt PatternType, name, principal, host string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: rt, PatternType: pt, ResourceName: name, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// TestAuthorize walks Kafka's rules one by one: each case is a set of
// bindings and a request, and the decision Kafka's StandardAuthorizer
// makes.
func TestAuthorize(t *testing.T) {
	type req struct {
		principal, host string
		rt              ResourceType
		name            string
		op              Operation
	}
	alice := func(rt ResourceType, name string, op Operation) req {
		return req{"User:alice", "10.0.0.1", rt, name, op}
	}
	for _, tc := range []struct {
		name     string
		bindings []Binding
		super    []string
		req      req
		want     bool
	}{
		{"no bindings: deny", nil, nil, alice(group, "g", opRead), false},
		{"super user without bindings", nil, []string{"User:alice"}, alice(group, "g", opRead), true},
		{"super user despite a deny", []Binding{bind(group, literal, "g", "User:alice", "*", opAll, deny)}, []string{"User:alice"}, alice(group, "g", opRead), true},
		{"literal allow", []Binding{bind(group, literal, "g", "User:alice", "*", opRead, allow)}, nil, alice(group, "g", opRead), true},
		{"literal allow, other name", []Binding{bind(group, literal, "g", "User:alice", "*", opRead, allow)}, nil, alice(group, "g2", opRead), false},
		{"literal allow, other type", []Binding{bind(topic, literal, "g", "User:alice", "*", opRead, allow)}, nil, alice(group, "g", opRead), false},
		{"literal allow, other principal", []Binding{bind(group, literal, "g", "User:bob", "*", opRead, allow)}, nil, alice(group, "g", opRead), false},
		{"principal is case-sensitive", []Binding{bind(group, literal, "g", "User:Alice", "*", opRead, allow)}, nil, alice(group, "g", opRead), false},
		{"wildcard principal", []Binding{bind(group, literal, "g", "User:*", "*", opRead, allow)}, nil, alice(group, "g", opRead), true},
		{"host matches", []Binding{bind(group, literal, "g", "User:alice", "10.0.0.1", opRead, allow)}, nil, alice(group, "g", opRead), true},
		{"other host", []Binding{bind(group, literal, "g", "User:alice", "10.0.0.2", opRead, allow)}, nil, alice(group, "g", opRead), false},
		{"wildcard resource", []Binding{bind(group, literal, "*", "User:alice", "*", opRead, allow)}, nil, alice(group, "anything", opRead), true},
		{"prefixed", []Binding{bind(group, prefixed, "team-", "User:alice", "*", opRead, allow)}, nil, alice(group, "team-a", opRead), true},
		{"prefixed equal to the name", []Binding{bind(group, prefixed, "team-", "User:alice", "*", opRead, allow)}, nil, alice(group, "team-", opRead), true},
		{"prefixed, not a prefix", []Binding{bind(group, prefixed, "team-", "User:alice", "*", opRead, allow)}, nil, alice(group, "team", opRead), false},
		{"prefixed * is a prefix, not a wildcard", []Binding{bind(group, prefixed, "*", "User:alice", "*", opRead, allow)}, nil, alice(group, "g", opRead), false},
		{"literal is not a prefix", []Binding{bind(group, literal, "team-", "User:alice", "*", opRead, allow)}, nil, alice(group, "team-a", opRead), false},
		{"ALL allows every op", []Binding{bind(group, literal, "g", "User:alice", "*", opAll, allow)}, nil, alice(group, "g", opDelete), true},
		{"READ implies DESCRIBE", []Binding{bind(group, literal, "g", "User:alice", "*", opRead, allow)}, nil, alice(group, "g", opDescribe), true},
		{"WRITE implies DESCRIBE", []Binding{bind(topic, literal, "t", "User:alice", "*", opWrite, allow)}, nil, alice(topic, "t", opDescribe), true},
		{"DELETE implies DESCRIBE", []Binding{bind(group, literal, "g", "User:alice", "*", opDelete, allow)}, nil, alice(group, "g", opDescribe), true},
		{"ALTER implies DESCRIBE", []Binding{bind(cluster, literal, ClusterName, "User:alice", "*", opAlter, allow)}, nil, alice(cluster, ClusterName, opDescribe), true},
		{"CREATE does not imply DESCRIBE", []Binding{bind(topic, literal, "t", "User:alice", "*", opCreate, allow)}, nil, alice(topic, "t", opDescribe), false},
		{"DESCRIBE does not imply READ", []Binding{bind(group, literal, "g", "User:alice", "*", opDescribe, allow)}, nil, alice(group, "g", opRead), false},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []Binding{bind(topic, literal, "t", "User:alice", "*", opAlterCfg, allow)}, nil, alice(topic, "t", opDescCfg), true},
		{"ALTER does not imply DESCRIBE_CONFIGS", []Binding{bind(topic, literal, "t", "User:alice", "*", opAlter, allow)}, nil, alice(topic, "t", opDescCfg), false},
		{"deny wins over allow", []Binding{
			bind(group, literal, "g", "User:alice", "*", opRead, allow),
			bind(group, literal, "g", "User:alice", "*", opRead, deny),
		}, nil, alice(group, "g", opRead), false},
		{"wildcard deny wins over literal allow", []Binding{
			bind(group, literal, "g", "User:alice", "*", opRead, allow),
			bind(group, literal, "*", "User:*", "*", opRead, deny),
		}, nil, alice(group, "g", opRead), false},
		{"prefixed deny wins over literal allow", []Binding{
			bind(group, literal, "team-a", "User:alice", "*", opAll, allow),
			bind(group, prefixed, "team-", "User:alice", "10.0.0.1", opDelete, deny),
		}, nil, alice(group, "team-a", opDelete), false},
		{"deny of another op does not deny", []Binding{
			bind(group, literal, "g", "User:alice", "*", opAll, allow),
			bind(group, literal, "g", "User:alice", "*", opDelete, deny),
		}, nil, alice(group, "g", opRead), true},
		{"deny of READ does not deny DESCRIBE", []Binding{
			bind(group, literal, "g", "User:alice", "*", opDescribe, allow),
			bind(group, literal, "g", "User:alice", "*", opRead, deny),
		}, nil, alice(group, "g", opDescribe), true},
		{"deny ALL denies DESCRIBE", []Binding{
			bind(group, literal, "g", "User:alice", "*", opDescribe, allow),
			bind(group, literal, "g", "User:alice", "*", opAll, deny),
		}, nil, alice(group, "g", opDescribe), false},
		{"deny for another host does not deny", []Binding{
			bind(group, literal, "g", "User:alice", "*", opRead, allow),
			bind(group, literal, "g", "User:alice", "10.9.9.9", opRead, deny),
		}, nil, alice(group, "g", opRead), true},
		{"anonymous by wildcard", []Binding{bind(group, literal, "g", "User:*", "*", opRead, allow)}, nil,
			req{"User:ANONYMOUS", "127.0.0.1", group, "g", opRead}, true},
		{"invalid binding ignored", []Binding{bind(group, literal, "", "User:alice", "*", opRead, allow)}, nil, alice(group, "", opRead), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.bindings, tc.super)
			r := tc.req
			if got := a.Authorize(r.principal, r.host, r.rt, r.name, r.op); got != tc.want {
				t.Fatalf("Authorize(%s, %s, %v %q, %v) = %v, want %v", r.principal, r.host, r.rt, r.name, r.op, got, tc.want)
			}
			if got := naiveAuthorize(tc.bindings, tc.super, r.principal, r.host, r.rt, r.name, r.op); got != tc.want {
				t.Fatalf("the naive reference disagrees with the table: %v", got)
			}
		})
	}
}

// naiveAuthorize is the reference: every binding checked against the
// request, written from Kafka's rules without an index.
func naiveAuthorize(bindings []Binding, super []string, principal, host string, rt ResourceType, name string, op Operation) bool {
	for _, s := range super {
		if s == principal {
			return true
		}
	}
	allowed := false
	for _, b := range bindings {
		if b.Validate() != nil || b.ResourceType != rt {
			continue
		}
		switch b.PatternType {
		case literal:
			if b.ResourceName != name && b.ResourceName != "*" {
				continue
			}
		case prefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				continue
			}
		}
		if b.Principal != principal && b.Principal != "User:*" {
			continue
		}
		if b.Host != host && b.Host != "*" {
			continue
		}
		covers := b.Operation == opAll || b.Operation == op
		if b.Permission == allow && op == opDescribe {
			covers = covers || b.Operation == opRead || b.Operation == opWrite || b.Operation == opDelete || b.Operation == opAlter
		}
		if b.Permission == allow && op == opDescCfg {
			covers = covers || b.Operation == opAlterCfg
		}
		if !covers {
			continue
		}
		if b.Permission == deny {
			return false
		}
		allowed = true
	}
	return allowed
}

// Small pools, so that generated bindings and requests meet often.
var (
	genPrincipal = rapid.SampledFrom([]string{"User:alice", "User:bob", "User:*", "User:ANONYMOUS"})
	genReqUser   = rapid.SampledFrom([]string{"User:alice", "User:bob", "User:ANONYMOUS"})
	genHost      = rapid.SampledFrom([]string{"*", "10.0.0.1", "10.0.0.2"})
	genReqHost   = rapid.SampledFrom([]string{"10.0.0.1", "10.0.0.2"})
	genName      = rapid.SampledFrom([]string{"*", "a", "ab", "abc", "b", "team-", "team-x"})
	genReqName   = rapid.SampledFrom([]string{"a", "ab", "abc", "b", "team-x", "team-xy", "*"})
	genType      = rapid.SampledFrom([]ResourceType{topic, group})
	genOp        = rapid.SampledFrom([]Operation{opAll, opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescCfg, opAlterCfg})
	genReqOp     = rapid.SampledFrom([]Operation{opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescCfg, opAlterCfg})
	genPattern   = rapid.SampledFrom([]PatternType{literal, prefixed})
	genPerm      = rapid.SampledFrom([]Permission{allow, deny})
)

func genBinding(t *rapid.T, label string) Binding {
	return Binding{
		ResourceType: genType.Draw(t, label+".type"),
		PatternType:  genPattern.Draw(t, label+".pattern"),
		ResourceName: genName.Draw(t, label+".name"),
		Principal:    genPrincipal.Draw(t, label+".principal"),
		Host:         genHost.Draw(t, label+".host"),
		Operation:    genOp.Draw(t, label+".op"),
		Permission:   genPerm.Draw(t, label+".perm"),
	}
}

type request struct {
	principal, host string
	rt              ResourceType
	name            string
	op              Operation
}

func genRequest(t *rapid.T) request {
	return request{genReqUser.Draw(t, "req.principal"), genReqHost.Draw(t, "req.host"), genType.Draw(t, "req.type"),
		genReqName.Draw(t, "req.name"), genReqOp.Draw(t, "req.op")}
}

func genBindings(t *rapid.T) []Binding {
	n := rapid.IntRange(0, 12).Draw(t, "n")
	bs := make([]Binding, n)
	for i := range bs {
		bs[i] = genBinding(t, "b")
	}
	return bs
}

// TestAuthorizeProperties checks the index against the naive reference
// and Kafka's invariants on random binding sets.
func TestAuthorizeProperties(t *testing.T) {
	t.Run("index equals the reference", rapid.MakeCheck(func(t *rapid.T) {
		bs := genBindings(t)
		r := genRequest(t)
		got := New(bs, nil).Authorize(r.principal, r.host, r.rt, r.name, r.op)
		if want := naiveAuthorize(bs, nil, r.principal, r.host, r.rt, r.name, r.op); got != want {
			t.Fatalf("Authorize = %v, reference %v, bindings %v", got, want, bs)
		}
	}))
	t.Run("a matching deny always wins", rapid.MakeCheck(func(t *rapid.T) {
		bs := genBindings(t)
		r := genRequest(t)
		d := Binding{ResourceType: r.rt, PatternType: literal, ResourceName: r.name, Principal: r.principal, Host: r.host, Operation: r.op, Permission: deny}
		if r.name == "*" {
			d.PatternType = prefixed // a literal * would be the wildcard: same resource all the same
		}
		d.Principal = rapid.SampledFrom([]string{r.principal, "User:*"}).Draw(t, "deny.principal")
		d.Host = rapid.SampledFrom([]string{r.host, "*"}).Draw(t, "deny.host")
		d.Operation = rapid.SampledFrom([]Operation{r.op, opAll}).Draw(t, "deny.op")
		if New(append(bs, d), nil).Authorize(r.principal, r.host, r.rt, r.name, r.op) {
			t.Fatalf("allowed despite %v", d)
		}
	}))
	t.Run("adding an allow never removes access", rapid.MakeCheck(func(t *rapid.T) {
		bs := genBindings(t)
		r := genRequest(t)
		before := New(bs, nil).Authorize(r.principal, r.host, r.rt, r.name, r.op)
		b := genBinding(t, "extra")
		b.Permission = allow
		after := New(append(bs, b), nil).Authorize(r.principal, r.host, r.rt, r.name, r.op)
		if before && !after {
			t.Fatalf("adding %v removed access", b)
		}
	}))
	t.Run("removing a deny never removes access", rapid.MakeCheck(func(t *rapid.T) {
		bs := genBindings(t)
		r := genRequest(t)
		before := New(bs, nil).Authorize(r.principal, r.host, r.rt, r.name, r.op)
		var kept []Binding
		for _, b := range bs {
			if b.Permission != deny {
				kept = append(kept, b)
			}
		}
		if before && !New(kept, nil).Authorize(r.principal, r.host, r.rt, r.name, r.op) {
			t.Fatalf("removing the denies removed access")
		}
	}))
	t.Run("a super user is always allowed", rapid.MakeCheck(func(t *rapid.T) {
		bs := genBindings(t)
		r := genRequest(t)
		if !New(bs, []string{r.principal}).Authorize(r.principal, r.host, r.rt, r.name, r.op) {
			t.Fatal("super user denied")
		}
	}))
	t.Run("order and duplicates do not matter", rapid.MakeCheck(func(t *rapid.T) {
		bs := genBindings(t)
		r := genRequest(t)
		perm := rapid.Permutation(append(bs, bs...)).Draw(t, "perm")
		a, b := New(bs, nil), New(perm, nil)
		if a.Authorize(r.principal, r.host, r.rt, r.name, r.op) != b.Authorize(r.principal, r.host, r.rt, r.name, r.op) {
			t.Fatal("a permutation with duplicates decides differently")
		}
		if len(a.Bindings()) != len(b.Bindings()) {
			t.Fatalf("%d bindings, %d after duplication", len(a.Bindings()), len(b.Bindings()))
		}
	}))
	t.Run("MATCH selects the bindings that decide", rapid.MakeCheck(func(t *rapid.T) {
		// Every binding that changes the decision on a resource is
		// among those a MATCH filter on its name selects: deleting
		// what it selects leaves the resource with no applicable
		// binding.
		bs := genBindings(t)
		r := genRequest(t)
		name := r.name
		f := Filter{ResourceType: r.rt, ResourceName: &name, PatternType: kmsg.ACLResourcePatternTypeMatch,
			Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
		var rest []Binding
		for i := range bs {
			if !f.Matches(&bs[i]) {
				rest = append(rest, bs[i])
			}
		}
		d := Binding{ResourceType: r.rt, PatternType: literal, ResourceName: r.name, Principal: r.principal, Host: r.host, Operation: r.op, Permission: allow}
		with := New(append(rest, d), nil).Authorize(r.principal, r.host, r.rt, r.name, r.op)
		if !with {
			t.Fatalf("a binding MATCH did not select still denies: %v", rest)
		}
		if New(rest, nil).Authorize(r.principal, r.host, r.rt, r.name, r.op) {
			t.Fatalf("a binding MATCH did not select still allows: %v", rest)
		}
	}))
}

func TestValidate(t *testing.T) {
	ok := bind(group, literal, "g", "User:alice", "*", opRead, allow)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Binding)
	}{
		{"type ANY", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny }},
		{"type UNKNOWN", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeUnknown }},
		{"pattern MATCH", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }},
		{"pattern ANY", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeAny }},
		{"operation ANY", func(b *Binding) { b.Operation = kmsg.ACLOperationAny }},
		{"operation beyond the known", func(b *Binding) { b.Operation = 99 }},
		{"permission ANY", func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny }},
		{"empty name", func(b *Binding) { b.ResourceName = "" }},
		{"cluster of another name", func(b *Binding) { b.ResourceType, b.ResourceName = cluster, "c" }},
		{"principal without a type", func(b *Binding) { b.Principal = "alice" }},
		{"principal with an empty type", func(b *Binding) { b.Principal = ":alice" }},
		{"empty host", func(b *Binding) { b.Host = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ok
			tc.mutate(&b)
			if err := b.Validate(); err == nil {
				t.Fatalf("%v validated", b)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	str := func(s string) *string { return &s }
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	lit := bind(group, literal, "team-a", "User:alice", "*", opRead, allow)
	pre := bind(group, prefixed, "team-", "User:alice", "*", opRead, allow)
	wild := bind(group, literal, "*", "User:alice", "*", opRead, allow)
	for _, tc := range []struct {
		name   string
		mutate func(*Filter)
		want   [3]bool // lit, pre, wild
	}{
		{"any", func(*Filter) {}, [3]bool{true, true, true}},
		{"type topic", func(f *Filter) { f.ResourceType = topic }, [3]bool{}},
		{"any pattern, exact name", func(f *Filter) { f.ResourceName = str("team-a") }, [3]bool{true, false, false}},
		{"literal pattern", func(f *Filter) { f.PatternType = literal }, [3]bool{true, false, true}},
		{"prefixed pattern, name", func(f *Filter) { f.PatternType, f.ResourceName = prefixed, str("team-") }, [3]bool{false, true, false}},
		{"match", func(f *Filter) { f.PatternType, f.ResourceName = kmsg.ACLResourcePatternTypeMatch, str("team-a") }, [3]bool{true, true, true}},
		{"match another name", func(f *Filter) { f.PatternType, f.ResourceName = kmsg.ACLResourcePatternTypeMatch, str("team-b") }, [3]bool{false, true, true}},
		{"match without a name", func(f *Filter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch }, [3]bool{true, true, true}},
		{"principal", func(f *Filter) { f.Principal = str("User:bob") }, [3]bool{}},
		{"host", func(f *Filter) { f.Host = str("*") }, [3]bool{true, true, true}},
		{"operation", func(f *Filter) { f.Operation = opDescribe }, [3]bool{}},
		{"permission", func(f *Filter) { f.Permission = deny }, [3]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := any
			tc.mutate(&f)
			for i, b := range []Binding{lit, pre, wild} {
				if got := f.Matches(&b); got != tc.want[i] {
					t.Errorf("%v: Matches = %v, want %v", b, got, tc.want[i])
				}
			}
		})
	}
	bad := any
	bad.Operation = kmsg.ACLOperationUnknown
	if bad.Validate() == nil {
		t.Fatal("a filter with an UNKNOWN operation validated")
	}
	if any.Validate() != nil {
		t.Fatal("the any filter did not validate")
	}
}

// BenchmarkAuthorize is the check on the heartbeat path: a group READ
// among a thousand literal bindings, some wildcards and prefixes.
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := range 1000 {
		bs = append(bs, bind(group, literal, "g"+strings.Repeat("x", i%7)+string(rune('a'+i%26)), "User:u"+string(rune('a'+i%26)), "*", opRead, allow))
	}
	bs = append(bs, bind(group, prefixed, "team-", "User:alice", "*", opRead, allow),
		bind(group, prefixed, "t", "User:bob", "*", opRead, allow),
		bind(group, literal, "*", "User:ops", "*", opDescribe, allow))
	a := New(bs, []string{"User:admin"})
	b.ReportAllocs()
	for b.Loop() {
		if !a.Authorize("User:alice", "10.0.0.1", group, "team-orders", opRead) {
			b.Fatal("denied")
		}
	}
}
