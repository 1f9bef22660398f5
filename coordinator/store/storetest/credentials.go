// Package storetest holds the conformance tests that every implementation
// of a store interface runs against itself.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// Credentials checks a CredentialStore that holds no credential yet:
// writes and reads back, overwrites, deletions (of present and missing
// credentials, in one atomic step with writes), names that need escaping
// in a key-value store, the order of Credentials, and that the store keeps
// its own copy of what it is given.
func Credentials(t *testing.T, cs store.CredentialStore) {
	ctx := context.Background()
	describe := func() string {
		t.Helper()
		all, err := cs.Credentials(ctx)
		if err != nil {
			t.Fatalf("Credentials: %v", err)
		}
		var b strings.Builder
		for _, c := range all {
			fmt.Fprintf(&b, "%s %s salt=%x i=%d stored=%x server=%x\n", c.User, c.Mechanism, c.Salt, c.Iterations, c.StoredKey, c.ServerKey)
		}
		return b.String()
	}
	alter := func(creds ...*store.Credential) {
		t.Helper()
		if err := cs.AlterCredentials(ctx, creds); err != nil {
			t.Fatalf("AlterCredentials: %v", err)
		}
	}
	cred := func(user, mech string, b byte) *store.Credential {
		return &store.Credential{User: user, Mechanism: mech, Salt: []byte{b, 1}, Iterations: 4096 + int(b),
			StoredKey: []byte{b, 2}, ServerKey: []byte{b, 3}}
	}

	if got := describe(); got != "" {
		t.Fatalf("a new store holds credentials:\n%s", got)
	}
	if _, err := cs.Credential(ctx, "alice", "SCRAM-SHA-256"); !errors.Is(err, store.ErrNoCredential) {
		t.Fatalf("Credential of nobody: %v, want ErrNoCredential", err)
	}

	given := cred("bob", "SCRAM-SHA-512", 2)
	alter(cred("alice", "SCRAM-SHA-512", 1), given, cred("alice", "SCRAM-SHA-256", 3),
		cred("a/b c=d,é", "SCRAM-SHA-256", 4), cred("a", "SCRAM-SHA-256", 5))
	given.Salt[0], given.User = 99, "mallory" // the store must have copied
	want := "a SCRAM-SHA-256 salt=0501 i=4101 stored=0502 server=0503\n" +
		"a/b c=d,é SCRAM-SHA-256 salt=0401 i=4100 stored=0402 server=0403\n" +
		"alice SCRAM-SHA-256 salt=0301 i=4099 stored=0302 server=0303\n" +
		"alice SCRAM-SHA-512 salt=0101 i=4097 stored=0102 server=0103\n" +
		"bob SCRAM-SHA-512 salt=0201 i=4098 stored=0202 server=0203\n"
	if got := describe(); got != want {
		t.Fatalf("after the first writes:\n%s\nwant:\n%s", got, want)
	}
	c, err := cs.Credential(ctx, "a/b c=d,é", "SCRAM-SHA-256")
	if err != nil || c.User != "a/b c=d,é" || c.Iterations != 4100 || string(c.StoredKey) != "\x04\x02" {
		t.Fatalf("Credential of an escaped name: %+v, %v", c, err)
	}
	if _, err := cs.Credential(ctx, "alice", "SCRAM-SHA-1"); !errors.Is(err, store.ErrNoCredential) {
		t.Fatalf("Credential of a mechanism alice has not: %v, want ErrNoCredential", err)
	}

	// One step: overwrite, delete, delete what is not there, add.
	alter(cred("alice", "SCRAM-SHA-512", 7),
		&store.Credential{User: "bob", Mechanism: "SCRAM-SHA-512", Deleted: true},
		&store.Credential{User: "nobody", Mechanism: "SCRAM-SHA-256", Deleted: true},
		&store.Credential{User: "a", Mechanism: "SCRAM-SHA-256", Deleted: true},
		cred("carol", "SCRAM-SHA-256", 8))
	want = "a/b c=d,é SCRAM-SHA-256 salt=0401 i=4100 stored=0402 server=0403\n" +
		"alice SCRAM-SHA-256 salt=0301 i=4099 stored=0302 server=0303\n" +
		"alice SCRAM-SHA-512 salt=0701 i=4103 stored=0702 server=0703\n" +
		"carol SCRAM-SHA-256 salt=0801 i=4104 stored=0802 server=0803\n"
	if got := describe(); got != want {
		t.Fatalf("after the alteration:\n%s\nwant:\n%s", got, want)
	}
	if _, err := cs.Credential(ctx, "bob", "SCRAM-SHA-512"); !errors.Is(err, store.ErrNoCredential) {
		t.Fatalf("Credential of a deleted credential: %v, want ErrNoCredential", err)
	}
	// The user "a" is a prefix of "a/b c=d,é" and "alice": deleting it
	// must not have touched theirs (checked above), nor must an empty
	// alteration do anything.
	alter()
	if got := describe(); got != want {
		t.Fatalf("after an empty alteration:\n%s\nwant:\n%s", got, want)
	}
}
