package saslwire

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// TestLibrdkafkaNonce: librdkafka's client-final message repeats its
// client nonce before the server's nonce; with the right password over
// that message it authenticates, as on Kafka, and with a wrong one, or a
// nonce prefixed with anything but its own, it does not. Before, every
// librdkafka SCRAM login failed ("nonce received did not match").
func TestLibrdkafkaNonce(t *testing.T) {
	const user, password, clientNonce = "alice", "alicepw", "0;.qk2.omuZ7m-D8=hBJ`w`9w?^~6HZ\\"
	salt := []byte("0123456789abcdef01234567")
	salted, err := pbkdf2.Key(sha512.New, password, salt, 4096, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := scram.SHA512.NewClientUnprepped(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: 4096})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(context.Context, string) (scram.StoredCredentials, bool, error) { return cred, false, nil }
	hmacOf := func(key []byte, msg string) []byte {
		m := hmac.New(sha512.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}

	for _, tc := range []struct {
		name, password, prefix string
		want                   bool
	}{
		{"right password", password, clientNonce, true},
		{"wrong password", "wrong", clientNonce, false},
		{"another prefix", password, "x" + clientNonce[1:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := NewExchange(scram.SHA512, lookup)
			clientFirst := "n,,n=" + user + ",r=" + clientNonce
			serverFirst, done, _, err := x.Step(context.Background(), []byte(clientFirst))
			if err != nil || done {
				t.Fatalf("client-first: %v %v", done, err)
			}
			serverNonce := attr(string(serverFirst), "r")
			iters, _ := strconv.Atoi(attr(string(serverFirst), "i"))
			if !strings.HasPrefix(serverNonce, clientNonce) || iters != 4096 {
				t.Fatalf("server-first %q", serverFirst)
			}
			pw := salted
			if tc.password != password {
				pw, _ = pbkdf2.Key(sha512.New, tc.password, salt, 4096, sha512.Size)
			}
			withoutProof := "c=biws,r=" + tc.prefix + serverNonce
			authMessage := strings.TrimPrefix(clientFirst, "n,,") + "," + string(serverFirst) + "," + withoutProof
			clientKey := hmacOf(pw, "Client Key")
			h := sha512.Sum512(clientKey)
			sig := hmacOf(h[:], authMessage)
			proof := make([]byte, len(sig))
			for i := range sig {
				proof[i] = clientKey[i] ^ sig[i]
			}
			reply, done, got, err := x.Step(context.Background(), []byte(withoutProof+",p="+base64.StdEncoding.EncodeToString(proof)))
			if !tc.want {
				if err == nil || got != "" {
					t.Fatalf("authenticated %q (%q)", got, reply)
				}
				return
			}
			if err != nil || !done || got != user {
				t.Fatalf("client-final: %q %v %q %v", reply, done, got, err)
			}
			serverKey := hmacOf(pw, "Server Key")
			if want := "v=" + base64.StdEncoding.EncodeToString(hmacOf(serverKey, authMessage)); string(reply) != want {
				t.Errorf("server-final %q, want %q", reply, want)
			}
		})
	}
}
