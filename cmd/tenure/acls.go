package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// aclsCommand is `tenure acls`: the coordinator's ACLs over the Kafka
// protocol (DescribeAcls, CreateAcls, DeleteAcls), as kafka-acls.sh and
// kadm manage them.
func aclsCommand() *command {
	return &command{
		name:    "acls",
		summary: "list, add and delete ACLs (Kafka protocol, as kafka-acls)",
		subs: []subcommand{
			{name: "list", help: "the ACLs the flags select (default: every ACL)"},
			{name: "add", help: "allow (or, with --permission deny, deny) every\n--principal each --operation on each --topic,\n--group and --cluster"},
			{name: "delete", help: "delete the ACLs the flags select on each --topic,\n--group and --cluster, printing each one deleted"},
		},
		help: `ACLs are in force while the coordinator runs with tenure serve --authorizer
on; without it these requests answer SECURITY_DISABLED. Listing needs
DESCRIBE on the cluster, adding and deleting ALTER on it: a super user
(serve --super-users). To add the first ones, connect as a super user: over
SASL (--sasl-user), or through a loopback listener whose clients serve's
--listener-principal makes a super user (docs/SECURITY.md, "The first
administrator").

A binding allows or denies one principal (User:alice, or User:* for
everyone), from one host (an IP address, or * for any), one operation
(ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
ALTER_CONFIGS...) on the resources a pattern names: a literal name (* is
every resource of the type) or, with --resource-pattern-type prefixed,
every name starting with it. For list and delete, a flag left out matches
anything; --resource-pattern-type match selects every ACL that applies to
the named resource (its name, *, and its prefixes). --topic, --group and
--principal may be repeated. Flags may come before or after the
subcommand.`,
		setup: setupACLs,
	}
}

func setupACLs(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	return setupACLsOut(fs, os.Stdout)
}

// aclFlags are the flags that select or describe bindings.
type aclFlags struct {
	principals []string
	topics     []string
	groups     []string
	cluster    bool
	operations []string
	permission string
	host       string
	pattern    string
	given      map[string]bool
}

// setupACLsOut is setupACLs writing to out.
func setupACLsOut(fs *flag.FlagSet, out io.Writer) func(ctx context.Context, args []string) error {
	admin := addAdminFlags(fs)
	var f aclFlags
	appendTo := func(list *[]string) func(string) error {
		return func(v string) error {
			if v == "" {
				return fmt.Errorf("empty value")
			}
			*list = append(*list, v)
			return nil
		}
	}
	fs.Func("principal", "`principal` of the ACL, as Type:name: User:alice, or User:* for every principal (repeatable)", appendTo(&f.principals))
	fs.Func("topic", "a topic `name` the ACL is on, or * for every topic (repeatable)", appendTo(&f.topics))
	fs.Func("group", "a group `name` the ACL is on, or * for every group (repeatable)", appendTo(&f.groups))
	fs.BoolVar(&f.cluster, "cluster", false, "the ACL is on the cluster (kafka-cluster): CREATE to create topics, ALTER to manage users and ACLs, DESCRIBE to list them")
	fs.Func("operation", "comma-separated `operations`: ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS... (case and '_' do not matter; repeatable)", func(v string) error {
		f.operations = append(f.operations, splitList(v)...)
		return nil
	})
	fs.StringVar(&f.permission, "permission", "", "allow or deny (add: default allow; list, delete: default either)")
	fs.StringVar(&f.host, "host", "", "the client `host` (IP address) the ACL is for, or * for any host (add: default *; list, delete: default any)")
	fs.StringVar(&f.pattern, "resource-pattern-type", "", "literal or prefixed (add, delete: default literal); list and delete also take any (either, by exact name) and match (every ACL that applies to the name) (list: default any)")
	return func(ctx context.Context, args []string) error {
		f.given = map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
		if len(args) == 0 {
			return usagef("missing subcommand: list, add or delete")
		}
		sub, args := args[0], args[1:]
		if len(args) != 0 {
			return usagef("%s takes no argument, got %q: name what with flags (--principal, --operation, --topic, --group, --cluster)", sub, args)
		}
		var run func(context.Context, *kgo.Client) error
		switch sub {
		case "list":
			filters, err := f.filters(sub)
			if err != nil {
				return err
			}
			run = func(ctx context.Context, cl *kgo.Client) error { return listACLs(ctx, cl, filters, out) }
		case "add":
			bindings, err := f.bindings()
			if err != nil {
				return err
			}
			run = func(ctx context.Context, cl *kgo.Client) error { return addACLs(ctx, cl, bindings, out) }
		case "delete":
			filters, err := f.filters(sub)
			if err != nil {
				return err
			}
			run = func(ctx context.Context, cl *kgo.Client) error { return deleteACLs(ctx, cl, filters, out) }
		default:
			return usagef("unknown subcommand %q: list, add or delete", sub)
		}
		cl, ctx, done, err := admin.kgoClient(ctx)
		if err != nil {
			return err
		}
		defer done()
		return admin.guard(ctx, func(ctx context.Context) error { return run(ctx, cl) })
	}
}

// resources are the resource types and names the flags name.
func (f *aclFlags) resources() []resourceName {
	var out []resourceName
	for _, t := range f.topics {
		out = append(out, resourceName{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range f.groups {
		out = append(out, resourceName{kmsg.ACLResourceTypeGroup, g})
	}
	if f.cluster {
		out = append(out, resourceName{kmsg.ACLResourceTypeCluster, acl.ClusterName})
	}
	return out
}

type resourceName struct {
	typ  acl.ResourceType
	name string
}

func (f *aclFlags) parseOperations() ([]acl.Operation, error) {
	var out []acl.Operation
	for _, o := range f.operations {
		op, err := kmsg.ParseACLOperation(o)
		if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny {
			return nil, usagef("--operation %q: want ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS or IDEMPOTENT_WRITE", o)
		}
		out = append(out, op)
	}
	return out, nil
}

func (f *aclFlags) parsePrincipals() error {
	for _, p := range f.principals {
		if i := strings.IndexByte(p, ':'); i <= 0 || i == len(p)-1 {
			return usagef("--principal %q is not Type:name: give User:%s", p, p)
		}
	}
	return nil
}

// parsePermission returns --permission, or def when it is not given.
func (f *aclFlags) parsePermission(def acl.Permission, allowAny bool) (acl.Permission, error) {
	if f.permission == "" {
		return def, nil
	}
	p, err := kmsg.ParseACLPermissionType(f.permission)
	if err != nil || p == kmsg.ACLPermissionTypeUnknown || (p == kmsg.ACLPermissionTypeAny && !allowAny) {
		return 0, usagef("--permission %q: allow or deny", f.permission)
	}
	return p, nil
}

// parsePattern returns --resource-pattern-type, or def when it is not
// given; filter allows ANY and MATCH.
func (f *aclFlags) parsePattern(def acl.PatternType, filter bool) (acl.PatternType, error) {
	if f.pattern == "" {
		return def, nil
	}
	p, err := kmsg.ParseACLResourcePatternType(f.pattern)
	switch {
	case err != nil || p == kmsg.ACLResourcePatternTypeUnknown:
		if filter {
			return 0, usagef("--resource-pattern-type %q: literal, prefixed, any or match", f.pattern)
		}
		return 0, usagef("--resource-pattern-type %q: literal or prefixed", f.pattern)
	case !filter && (p == kmsg.ACLResourcePatternTypeAny || p == kmsg.ACLResourcePatternTypeMatch):
		return 0, usagef("--resource-pattern-type %v selects ACLs (list, delete); an ACL to add is literal or prefixed", p)
	}
	return p, nil
}

// bindings are the ACLs add creates: every principal, operation and
// resource combined.
func (f *aclFlags) bindings() ([]acl.Binding, error) {
	if err := f.parsePrincipals(); err != nil {
		return nil, err
	}
	ops, err := f.parseOperations()
	if err != nil {
		return nil, err
	}
	perm, err := f.parsePermission(kmsg.ACLPermissionTypeAllow, false)
	if err != nil {
		return nil, err
	}
	pattern, err := f.parsePattern(kmsg.ACLResourcePatternTypeLiteral, false)
	if err != nil {
		return nil, err
	}
	res := f.resources()
	switch {
	case len(f.principals) == 0:
		return nil, usagef("add needs --principal (User:name, or User:* for every principal)")
	case len(ops) == 0:
		return nil, usagef("add needs --operation (READ, WRITE, DESCRIBE, ALL...)")
	case len(res) == 0:
		return nil, usagef("add needs what the ACL is on: --topic, --group or --cluster")
	case f.cluster && pattern == kmsg.ACLResourcePatternTypePrefixed:
		return nil, usagef("--cluster takes no prefix: the cluster is one resource, kafka-cluster")
	}
	host := f.host
	if host == "" {
		host = acl.WildcardHost
	}
	var out []acl.Binding
	for _, r := range res {
		for _, p := range f.principals {
			for _, op := range ops {
				b := acl.Binding{ResourceType: r.typ, ResourceName: r.name, PatternType: pattern,
					Principal: p, Host: host, Operation: op, Permission: perm}
				if err := b.Validate(); err != nil {
					return nil, usagef("%v", strings.TrimPrefix(err.Error(), "acl: "))
				}
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// filters are the filters list and delete send: one per resource,
// principal and operation, each left out matching any.
func (f *aclFlags) filters(sub string) ([]acl.Filter, error) {
	if err := f.parsePrincipals(); err != nil {
		return nil, err
	}
	ops, err := f.parseOperations()
	if err != nil {
		return nil, err
	}
	perm, err := f.parsePermission(kmsg.ACLPermissionTypeAny, true)
	if err != nil {
		return nil, err
	}
	defPattern := kmsg.ACLResourcePatternTypeLiteral
	if sub == "list" {
		defPattern = kmsg.ACLResourcePatternTypeAny
	}
	pattern, err := f.parsePattern(defPattern, true)
	if err != nil {
		return nil, err
	}
	res := f.resources()
	if len(res) == 0 {
		if sub == "delete" {
			return nil, usagef("delete needs what the ACLs are on: --topic, --group or --cluster (--topic '*' is the literal *, not every topic)")
		}
		if f.given["resource-pattern-type"] {
			return nil, usagef("--resource-pattern-type needs a --topic, --group or --cluster to apply to")
		}
		res = []resourceName{{typ: kmsg.ACLResourceTypeAny}}
	}
	var host *string
	if f.host != "" {
		host = &f.host
	}
	principals := []*string{nil}
	if len(f.principals) > 0 {
		principals = nil
		for i := range f.principals {
			principals = append(principals, &f.principals[i])
		}
	}
	if len(ops) == 0 {
		ops = []acl.Operation{kmsg.ACLOperationAny}
	}
	var out []acl.Filter
	for _, r := range res {
		for _, p := range principals {
			for _, op := range ops {
				flt := acl.Filter{ResourceType: r.typ, PatternType: kmsg.ACLResourcePatternTypeAny,
					Principal: p, Host: host, Operation: op, Permission: perm}
				if r.typ != kmsg.ACLResourceTypeAny {
					flt.ResourceName, flt.PatternType = &r.name, pattern
				}
				out = append(out, flt)
			}
		}
	}
	return out, nil
}

func listACLs(ctx context.Context, cl *kgo.Client, filters []acl.Filter, out io.Writer) error {
	var found []acl.Binding
	for _, flt := range filters {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = flt.ResourceType, flt.ResourceName, flt.PatternType
		req.Principal, req.Host, req.Operation, req.PermissionType = flt.Principal, flt.Host, flt.Operation, flt.Permission
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return withMessage(err, deref(resp.ErrorMessage))
		}
		for _, r := range resp.Resources {
			for _, a := range r.ACLs {
				found = append(found, acl.Binding{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
					Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType})
			}
		}
	}
	slices.SortFunc(found, acl.Compare)
	return printBindings(out, slices.Compact(found))
}

func addACLs(ctx context.Context, cl *kgo.Client, bindings []acl.Binding, out io.Writer) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bindings {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Results) != len(bindings) {
		return fmt.Errorf("%d results for %d ACLs", len(resp.Results), len(bindings))
	}
	var failed []string
	var firstErr error
	var created []acl.Binding
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", bindingText(bindings[i]), withMessage(err, deref(r.ErrorMessage))))
			if firstErr == nil {
				firstErr = withMessage(err, deref(r.ErrorMessage))
			}
			continue
		}
		created = append(created, bindings[i])
	}
	if len(created) > 0 {
		fmt.Fprintln(out, "added:")
		if err := printBindings(out, created); err != nil {
			return err
		}
	}
	if firstErr != nil {
		if len(failed) == 1 && len(created) == 0 {
			return firstErr
		}
		return fmt.Errorf("%d of %d ACLs not added: %w (%s)", len(failed), len(bindings), firstErr, strings.Join(failed, "; "))
	}
	return nil
}

func deleteACLs(ctx context.Context, cl *kgo.Client, filters []acl.Filter, out io.Writer) error {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, flt := range filters {
		rf := kmsg.NewDeleteACLsRequestFilter()
		rf.ResourceType, rf.ResourceName, rf.ResourcePatternType = flt.ResourceType, flt.ResourceName, flt.PatternType
		rf.Principal, rf.Host, rf.Operation, rf.PermissionType = flt.Principal, flt.Host, flt.Operation, flt.Permission
		req.Filters = append(req.Filters, rf)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var deleted []acl.Binding
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return withMessage(err, deref(r.ErrorMessage))
		}
		for _, m := range r.MatchingACLs {
			if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
				return withMessage(err, deref(m.ErrorMessage))
			}
			deleted = append(deleted, acl.Binding{ResourceType: m.ResourceType, ResourceName: m.ResourceName, PatternType: m.ResourcePatternType,
				Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType})
		}
	}
	slices.SortFunc(deleted, acl.Compare)
	deleted = slices.Compact(deleted)
	if len(deleted) == 0 {
		fmt.Fprintln(out, "no ACL matched: nothing deleted")
		return nil
	}
	fmt.Fprintln(out, "deleted:")
	return printBindings(out, deleted)
}

// printBindings writes bindings as a table, in the order given.
func printBindings(out io.Writer, bindings []acl.Binding) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tPATTERN\tNAME\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, b := range bindings {
		fmt.Fprintf(tw, "%v\t%v\t%s\t%s\t%s\t%v\t%v\n", b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
	}
	return tw.Flush()
}

func bindingText(b acl.Binding) string {
	return fmt.Sprintf("%v %v %s %s %s %v %v", b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// withMessage adds a response's error message to its error code's error.
func withMessage(err error, msg string) error {
	if msg == "" || msg == err.Error() {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}
