package saslwire

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// FuzzParsePlain: a PLAIN message parses only if it is exactly authzid NUL
// user NUL password, with a user and a password and an authzid that is
// empty or the user; what parses rebuilds the message.
func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00secret", "alice\x00alice\x00secret", "bob\x00alice\x00x", "\x00\x00", "a\x00b", "\x00a\x00b\x00c", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, pass, err := ParsePlain(msg)
		if err != nil {
			if user != "" || pass != "" {
				t.Fatalf("%q: an error with a user %q or password", msg, user)
			}
			return
		}
		if user == "" || pass == "" || strings.ContainsRune(user, 0) || strings.ContainsRune(pass, 0) {
			t.Fatalf("%q parsed to %q %q", msg, user, pass)
		}
		if !bytes.Equal(msg, []byte("\x00"+user+"\x00"+pass)) && !bytes.Equal(msg, []byte(user+"\x00"+user+"\x00"+pass)) {
			t.Fatalf("%q parsed to %q %q, which do not rebuild it", msg, user, pass)
		}
	})
}

// FuzzScramExchange drives the SCRAM exchange with a fuzzed client-first
// and client-final message, the final one with "{nonce}" replaced by the
// nonce the server answered (so that the fuzzer reaches the proof's
// check). User "alice" exists; any other gets a decoy, as the server's
// lookup gives. Without her password no input may authenticate; the
// exchange ends after the final message, or at the first error; and
// nothing panics.
func FuzzScramExchange(f *testing.F) {
	f.Add("n,,n=alice,r=abcdefgh", "c=biws,r={nonce},p=dGVzdA==")
	f.Add("n,,n=alice,r=abcdefgh", "c=biws,r={nonce},p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Add("n,a=alice,n=alice,r=x", "c=bixhPWFsaWNlLA==,r={nonce},e=1,p=AA==")
	f.Add("y,,n=mallory,r=x", "c=eSws,r={nonce},p=")
	f.Add("p=tls-unique,,n=alice,r=x", "c=,r=,p=")
	f.Add("n,,m=ext,n=alice,r=x", "")
	f.Add("n,,n=al=2Cice=3D,r=x", "c=biws,r={nonce}")
	f.Add("n,,n=a=2,r=x", "garbage")
	type mech struct {
		name string
		hash scram.HashGeneratorFcn
		cred scram.StoredCredentials
	}
	var mechs []mech
	for _, m := range []struct {
		name string
		hash scram.HashGeneratorFcn
	}{{"SCRAM-SHA-256", scram.SHA256}, {"SCRAM-SHA-512", scram.SHA512}} {
		cl, err := m.hash.NewClient("alice", "right", "")
		if err != nil {
			f.Fatal(err)
		}
		cred, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: "salt-of-alice", Iters: 4096})
		if err != nil {
			f.Fatal(err)
		}
		mechs = append(mechs, mech{m.name, m.hash, cred})
	}
	f.Fuzz(func(t *testing.T, first, final string) {
		for _, m := range mechs {
			x := NewExchange(m.hash, func(_ context.Context, user string) (scram.StoredCredentials, bool, error) {
				if user == "alice" {
					return m.cred, false, nil
				}
				return m.cred, true, nil // a decoy: the same work, then a failure
			})
			reply, done, user, err := x.Step(context.Background(), []byte(first))
			if user != "" {
				t.Fatalf("%s: authenticated %q on the first message", m.name, user)
			}
			if err != nil || done {
				if !done || err == nil {
					t.Fatalf("%s: first message: done %v, error %v", m.name, done, err)
				}
				continue
			}
			nonce, _, _ := strings.Cut(strings.TrimPrefix(string(reply), "r="), ",")
			_, done, user, err = x.Step(context.Background(), []byte(strings.ReplaceAll(final, "{nonce}", nonce)))
			if user != "" || err == nil || !done {
				t.Fatalf("%s: final message %q: user %q, done %v, error %v", m.name, final, user, done, err)
			}
			if _, _, _, err := x.Step(context.Background(), []byte(final)); err == nil {
				t.Fatalf("%s: a step after the end succeeded", m.name)
			}
		}
	})
}

// TestExchangeAuthenticates: the right password authenticates, through
// xdg-go/scram's client, and a decoy never does, whatever the password.
func TestExchangeAuthenticates(t *testing.T) {
	for _, hash := range []scram.HashGeneratorFcn{scram.SHA256, scram.SHA512} {
		cl, err := hash.NewClient("alice", "right", "")
		if err != nil {
			t.Fatal(err)
		}
		cred, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: "salt", Iters: 4096})
		if err != nil {
			t.Fatal(err)
		}
		for _, decoy := range []bool{false, true} {
			x := NewExchange(hash, func(context.Context, string) (scram.StoredCredentials, bool, error) { return cred, decoy, nil })
			conv := cl.NewConversation()
			msg, _ := conv.Step("")
			var user string
			for range 3 {
				reply, done, u, err := x.Step(context.Background(), []byte(msg))
				if done {
					if !decoy && err != nil || decoy && err != ErrAuthFailed {
						t.Fatalf("decoy %v: %v", decoy, err)
					}
					user = u
					break
				}
				if msg, err = conv.Step(string(reply)); err != nil {
					t.Fatal(err)
				}
			}
			if want := map[bool]string{false: "alice", true: ""}[decoy]; user != want {
				t.Fatalf("decoy %v: authenticated %q, want %q", decoy, user, want)
			}
		}
	}
}
