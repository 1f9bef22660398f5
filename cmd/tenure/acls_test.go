package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// aclsCmd runs `tenure acls args...`, returning its output and error.
func aclsCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	fs := flag.NewFlagSet("tenure acls", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var out bytes.Buffer
	runACLs := setupACLsOut(fs, &out)
	pos, err := parseCommandLine(fs, aclsCommand().subs, args, noEnv)
	if err != nil {
		return "", err
	}
	err = runACLs(context.Background(), pos)
	return out.String(), err
}

// TestACLsFlags: what tenure acls cannot send is refused before it
// connects, as a usage error naming the flag and what it takes.
func TestACLsFlags(t *testing.T) {
	dead := "--brokers=127.0.0.1:1" // nothing is dialled for these
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand: list, add or delete"},
		{[]string{"show"}, `unknown subcommand "show": list, add or delete`},
		{[]string{"list", "User:alice"}, "list takes no argument"},
		{[]string{"add", "--operation", "read", "--group", "g"}, "add needs --principal"},
		{[]string{"add", "--principal", "User:a", "--group", "g"}, "add needs --operation"},
		{[]string{"add", "--principal", "User:a", "--operation", "read"}, "add needs what the ACL is on: --topic, --group or --cluster"},
		{[]string{"add", "--principal", "alice", "--operation", "read", "--group", "g"}, `--principal "alice" is not Type:name: give User:alice`},
		{[]string{"add", "--principal", "User:a", "--operation", "reed", "--group", "g"}, `--operation "reed": want ALL, READ`},
		{[]string{"add", "--principal", "User:a", "--operation", "any", "--group", "g"}, `--operation "any"`},
		{[]string{"add", "--principal", "User:a", "--operation", "read", "--group", "g", "--permission", "maybe"}, `--permission "maybe": allow or deny`},
		{[]string{"add", "--principal", "User:a", "--operation", "read", "--group", "g", "--permission", "any"}, `--permission "any": allow or deny`},
		{[]string{"add", "--principal", "User:a", "--operation", "read", "--group", "g", "--resource-pattern-type", "match"}, "selects ACLs (list, delete)"},
		{[]string{"add", "--principal", "User:a", "--operation", "read", "--group", "g", "--resource-pattern-type", "regex"}, "literal or prefixed"},
		{[]string{"add", "--principal", "User:a", "--operation", "alter", "--cluster", "--resource-pattern-type", "prefixed"}, "--cluster takes no prefix"},
		{[]string{"delete", "--principal", "User:a"}, "delete needs what the ACLs are on"},
		{[]string{"list", "--resource-pattern-type", "prefixed"}, "needs a --topic, --group or --cluster"},
		{[]string{"list", "--resource-pattern-type", "regex", "--topic", "t"}, "literal, prefixed, any or match"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := aclsCmd(t, append(tc.args, dead)...)
			var ue usageError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ue) {
				t.Fatalf("error %v, want a usage error with %q", err, tc.want)
			}
		})
	}
	// The flag package's own errors name the flag.
	if _, err := aclsCmd(t, "list", "--topic="); err == nil || !strings.Contains(err.Error(), "-topic") {
		t.Fatalf("an empty --topic: %v", err)
	}
}

// TestACLsBootstrap runs `tenure serve --authorizer on` with a loopback
// admin listener whose clients act as the super user (--listener-
// principal), a plaintext one whose clients are anonymous and a SASL one.
// The first user and ACLs are added through the admin listener with
// `tenure users` and `tenure acls`; the anonymous listener is refused
// with a message saying how to get in, and so is the new user, who may do
// what its ACLs allow only.
func TestACLsBootstrap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--store", "memory", "--authorizer", "on", "--super-users", "User:admin",
			"--listeners", "ADMIN://127.0.0.1:0,ANON://127.0.0.1:0,SASL://127.0.0.1:0",
			"--listener-security-protocol-map", "ADMIN:PLAINTEXT,ANON:PLAINTEXT,SASL:SASL_PLAINTEXT",
			"--listener-principal", "ADMIN=User:admin", "--topic", "jobs:4"}, io.Discard, logs)
	}()
	defer func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	addrs := map[string]string{}
	pollUntil(t, 30*time.Second, "serve logs its listeners", func() string {
		for _, m := range listenerRe.FindAllStringSubmatch(logs.String(), -1) {
			addrs[m[1]] = m[2]
		}
		if len(addrs) < 3 {
			return "not yet: " + logs.String()
		}
		return ""
	})
	users := func(at string, stdin string, args ...string) (string, error) {
		t.Helper()
		fs := flag.NewFlagSet("tenure users", flag.ContinueOnError)
		var out bytes.Buffer
		runUsers := setupUsersIO(fs, strings.NewReader(stdin), &out, io.Discard, func() (int, bool) { return 0, false })
		pos, err := parseCommandLine(fs, usersCommand().subs, append(args, "--brokers", addrs[at]), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		err = runUsers(context.Background(), pos)
		return out.String(), err
	}
	admin, anon := "--brokers="+addrs["ADMIN"], "--brokers="+addrs["ANON"]
	t.Setenv(saslPasswordEnv, "s3cret")
	alice := []string{"--brokers", addrs["SASL"], "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--timeout", "5s"}

	// The case: users add on a plaintext loopback listener, as
	// User:ANONYMOUS.
	_, err := users("ANON", "s3cret\n", "add", "alice")
	if err == nil || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") || !strings.Contains(err.Error(), "--listener-principal") {
		t.Fatalf("users add as ANONYMOUS: %v, want CLUSTER_AUTHORIZATION_FAILED and how to get in", err)
	}
	if _, err := aclsCmd(t, "list", anon); err == nil || !strings.Contains(err.Error(), "--super-users") {
		t.Fatalf("acls list as ANONYMOUS: %v, want CLUSTER_AUTHORIZATION_FAILED and how to get in", err)
	}

	if out, err := users("ADMIN", "s3cret\n", "add", "alice"); err != nil || out != "alice: added SCRAM-SHA-512\n" {
		t.Fatalf("users add through the admin listener: %q %v", out, err)
	}
	out, err := aclsCmd(t, "add", admin, "--principal", "User:alice", "--operation", "read", "--group", "orders", "--topic", "jobs")
	if err != nil {
		t.Fatalf("acls add: %v", err)
	}
	wantAdded := `added:
RESOURCE  PATTERN  NAME    PRINCIPAL   HOST  OPERATION  PERMISSION
TOPIC     LITERAL  jobs    User:alice  *     READ       ALLOW
GROUP     LITERAL  orders  User:alice  *     READ       ALLOW
`
	if out != wantAdded {
		t.Fatalf("acls add printed:\n%s\nwant:\n%s", out, wantAdded)
	}
	if out, err := aclsCmd(t, "add", admin, "--principal", "User:mallory", "--permission", "deny", "--operation", "all",
		"--group", "ord", "--resource-pattern-type", "prefixed", "--host", "10.0.0.1"); err != nil || !strings.Contains(out, "GROUP     PREFIXED  ord   User:mallory  10.0.0.1  ALL        DENY") {
		t.Fatalf("acls add a prefixed deny: %q %v", out, err)
	}

	// list: everything, then what applies to group orders.
	out, err = aclsCmd(t, "list", admin)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 4 || !regexp.MustCompile(`(?m)^GROUP +PREFIXED +ord +User:mallory`).MatchString(out) {
		t.Fatalf("acls list:\n%s", out)
	}
	out, err = aclsCmd(t, "list", admin, "--group", "orders", "--resource-pattern-type", "match")
	if err != nil || strings.Count(out, "\n") != 3 || strings.Contains(out, "TOPIC") {
		t.Fatalf("acls list of what applies to group orders: %v\n%s", err, out)
	}
	if out, err := aclsCmd(t, "list", admin, "--principal", "User:nobody"); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("acls list of a principal without ACLs: %v\n%s", err, out)
	}

	// alice may read group orders and topic jobs, not list ACLs.
	var stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"groups", "list"}, alice...), io.Discard, &stderr); code != 0 {
		t.Fatalf("groups list as alice: exit %d: %s", code, stderr.String())
	}
	if _, err := aclsCmd(t, append([]string{"list"}, alice...)...); err == nil || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("acls list as alice: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	out, err = aclsCmd(t, "delete", admin, "--topic", "jobs", "--principal", "User:alice")
	if err != nil || out != "deleted:\nRESOURCE  PATTERN  NAME  PRINCIPAL   HOST  OPERATION  PERMISSION\nTOPIC     LITERAL  jobs  User:alice  *     READ       ALLOW\n" {
		t.Fatalf("acls delete: %v\n%s", err, out)
	}
	if out, err := aclsCmd(t, "delete", admin, "--topic", "jobs"); err != nil || out != "no ACL matched: nothing deleted\n" {
		t.Fatalf("acls delete again: %v\n%s", err, out)
	}
	if out, err := aclsCmd(t, "list", admin); err != nil || strings.Contains(out, "jobs") || strings.Count(out, "\n") != 3 {
		t.Fatalf("acls list after delete: %v\n%s", err, out)
	}
}
