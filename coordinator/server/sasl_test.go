package server

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// saslServer starts a server with a plaintext listener INTERNAL (to
// bootstrap users through, as Kafka operators do), SASL (SASL_PLAINTEXT)
// and SASL_TLS (SASL_SSL), offering every mechanism.
func saslServer(t testing.TB, mutate func(*Config)) (*testServer, *testTLS, *observer.ObservedLogs) {
	t.Helper()
	tt := newTestTLS(t)
	ts, logs := observed(t, func(c *Config) {
		c.Listeners = []Listener{
			{Name: "INTERNAL", Protocol: Plaintext},
			{Name: "SASL", Protocol: SASLPlaintext},
			{Name: "SASL_TLS", Protocol: SASLSSL},
		}
		c.TLS = tt.serverConfig(nil)
		c.SASLMechanisms = []string{Plain, ScramSHA256, ScramSHA512}
		c.DefaultPartitions = 4
		c.Core.InitialRebalanceDelay = 0
		if mutate != nil {
			mutate(c)
		}
	})
	return ts, tt, logs
}

// TestKgoSASL: stock kgo clients authenticate with each mechanism, over
// plaintext and TLS, with users that kadm created (AlterUserSCRAMs on the
// plaintext listener), then join a group and commit; the connection acts
// as User:<name>.
func TestKgoSASL(t *testing.T) {
	ts, tt, logs := saslServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, ts))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Password: "alice-256"},
		{User: "alice", Mechanism: kadm.ScramSha512, Password: "alice-512", Iterations: 8192},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	for _, tc := range []struct {
		name     string
		listener string
		mech     sasl.Mechanism
	}{
		// PLAIN checks the password against the SCRAM-SHA-512
		// credential.
		{"PLAIN over TLS", "SASL_TLS", plain.Auth{User: "alice", Pass: "alice-512"}.AsMechanism()},
		{"SCRAM-SHA-256", "SASL", scram.Auth{User: "alice", Pass: "alice-256"}.AsSha256Mechanism()},
		{"SCRAM-SHA-512 over TLS", "SASL_TLS", scram.Auth{User: "alice", Pass: "alice-512"}.AsSha512Mechanism()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kgo.Opt{kgo.SeedBrokers(ts.addrs[tc.listener]), kgo.SASL(tc.mech)}
			if tc.listener == "SASL_TLS" {
				opts = append(opts, kgo.DialTLSConfig(tt.clientConfig()))
			}
			kgoGroupRoundTrip(t, ts, opts...)
			got := principals(logs, tc.listener)
			if len(got) == 0 || slices.ContainsFunc(got, func(p string) bool { return p != "User:alice" }) {
				t.Errorf("principals on %s: %q", tc.listener, got)
			}
		})
	}
	// A wrong password over TLS gets Kafka's refusal, written before the
	// connection closes.
	bad := newKgo(t, ts, kgo.SeedBrokers(ts.addrs["SASL_TLS"]), kgo.DialTLSConfig(tt.clientConfig()),
		kgo.SASL(scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism()))
	if err := bad.Ping(ctx); err == nil || !strings.Contains(err.Error(), string(errAuthFailed)) {
		t.Errorf("a wrong password over TLS: %v, want %q", err, errAuthFailed)
	}
	// A SASL client on the plaintext listener is refused: SaslHandshake
	// is ILLEGAL_SASL_STATE there.
	cl := newKgo(t, ts, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-256"}.AsSha256Mechanism()))
	if err := cl.Ping(ctx); err == nil {
		t.Errorf("a SASL client authenticated on the plaintext listener")
	}
}

// TestKadmUserSCRAMs: kadm manages users through DescribeUserScramCredentials
// and AlterUserScramCredentials, with Kafka's checks; a user whose
// alteration fails has none of its changes made.
func TestKadmUserSCRAMs(t *testing.T) {
	cs := store.NewMemory()
	ts := startServer(t, func(c *Config) { c.Store = cs })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, ts))
	describe := func(users ...string) string {
		t.Helper()
		d, err := adm.DescribeUserSCRAMs(ctx, users...)
		if err != nil {
			t.Fatalf("DescribeUserSCRAMs: %v", err)
		}
		var b strings.Builder
		for _, u := range d.Sorted() {
			fmt.Fprintf(&b, "%s:", u.User)
			if u.Err != nil {
				fmt.Fprintf(&b, " %s", errName(errCode(u.Err)))
			}
			for _, ci := range u.CredInfos {
				fmt.Fprintf(&b, " %s/%d", ci.Mechanism, ci.Iterations)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	alter := func(del []kadm.DeleteSCRAM, up []kadm.UpsertSCRAM) string {
		t.Helper()
		res, err := adm.AlterUserSCRAMs(ctx, del, up)
		if err != nil {
			t.Fatalf("AlterUserSCRAMs: %v", err)
		}
		users := make([]string, 0, len(res))
		for u := range res {
			users = append(users, u)
		}
		slices.Sort(users)
		var b strings.Builder
		for _, u := range users {
			fmt.Fprintf(&b, "%s: %s\n", u, errName(errCode(res[u].Err)))
		}
		return b.String()
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", what, got, want)
		}
	}

	check("describe nobody", describe(), "")
	check("alter", alter(nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Password: "a"},
		{User: "alice", Mechanism: kadm.ScramSha512, Password: "a", Iterations: 16384},
		{User: "bob", Mechanism: kadm.ScramSha512, Password: "b"},
	}), "alice: NONE\nbob: NONE\n")
	check("describe all", describe(), "alice: SCRAM-SHA-256/4096 SCRAM-SHA-512/16384\nbob: SCRAM-SHA-512/4096\n")
	check("describe some", describe("bob", "carol"), "bob: SCRAM-SHA-512/4096\ncarol: RESOURCE_NOT_FOUND\n")

	// Raw requests for what kadm checks itself.
	c := dial(t, ts.addr)
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(user string, mech int8, iters int32, salt, salted []byte) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iters, salt, salted
		return u
	}
	del := func(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mech
		return d
	}
	good := make([]byte, 32)
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("", 1, 4096, []byte("s"), good),
		up("few", 1, 4095, []byte("s"), good),
		up("many", 1, 16385, []byte("s"), good),
		up("mech", 3, 4096, []byte("s"), good),
		up("nosalt", 1, 4096, nil, good),
		up("short", 1, 4096, []byte("s"), good[:31]),
		up("twice", 1, 4096, []byte("s"), good),
		up("twice", 1, 4096, []byte("s"), good),
		// bob: a valid upsertion beside a deletion of what is not
		// there; neither is made.
		up("bob", 2, 8192, []byte("s"), make([]byte, 64)),
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("bob", 1), del("alice", 2)}
	resp := c.roundTrip(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	var got strings.Builder
	for _, r := range resp.Results {
		fmt.Fprintf(&got, "%q: %s\n", r.User, errName(r.ErrorCode))
	}
	check("raw alteration", got.String(), `"bob": RESOURCE_NOT_FOUND
"alice": NONE
"": UNACCEPTABLE_CREDENTIAL
"few": UNACCEPTABLE_CREDENTIAL
"many": UNACCEPTABLE_CREDENTIAL
"mech": UNSUPPORTED_SASL_MECHANISM
"nosalt": UNACCEPTABLE_CREDENTIAL
"short": UNACCEPTABLE_CREDENTIAL
"twice": DUPLICATE_RESOURCE
`)
	check("after the raw alteration", describe(), "alice: SCRAM-SHA-256/4096\nbob: SCRAM-SHA-512/4096\n")

	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"alice", "alice"} {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		dreq.Users = append(dreq.Users, ru)
	}
	dresp := c.roundTrip(dreq).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if len(dresp.Results) != 1 || dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code {
		t.Errorf("describe alice twice: %+v", dresp.Results)
	}

	// The store holds keys derived from the salted password, never the
	// password or the salted password.
	creds, err := cs.Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, cred := range creds {
		if len(cred.StoredKey) == 0 || len(cred.ServerKey) != len(cred.StoredKey) || len(cred.Salt) != 24 {
			t.Errorf("stored %+v", cred)
		}
	}
	check("delete", alter([]kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}, {User: "bob", Mechanism: kadm.ScramSha512}}, nil),
		"alice: NONE\nbob: NONE\n")
	check("after deleting everyone", describe(), "")
}

// errCode is the Kafka code of an error kadm returns, 0 for nil, -1 for
// one that is not Kafka's.
func errCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.Code
	}
	return -1
}

// TestScramKeysMatch: the keys the server derives from a salted password
// (what AlterUserScramCredentials carries) are those xdg-go/scram derives
// from the password, so a user kadm created authenticates.
func TestScramKeysMatch(t *testing.T) {
	for _, m := range []*scramMechanism{scram256, scram512} {
		var h func() hash.Hash = sha256.New
		if m == scram512 {
			h = sha512.New
		}
		salt := []byte("0123456789abcdef01234567")
		salted, err := pbkdf2.Key(h, "pa55 wörd", salt, 4096, h().Size())
		if err != nil {
			t.Fatal(err)
		}
		storedKey, serverKey := scramKeys(h, salted)
		cl, err := m.hash.NewClientUnprepped("u", "pa55 wörd", "")
		if err != nil {
			t.Fatal(err)
		}
		want, err := cl.GetStoredCredentialsWithError(xscram.KeyFactors{Salt: string(salt), Iters: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if string(storedKey) != string(want.StoredKey) || string(serverKey) != string(want.ServerKey) {
			t.Errorf("%s: keys differ from xdg-go/scram's", m.name)
		}
	}
}

// TestParsePlain: PLAIN messages as Kafka's PlainSaslServer takes them.
func TestParsePlain(t *testing.T) {
	for _, tc := range []struct {
		msg        string
		user, pass string
		err        error
	}{
		{"\x00alice\x00secret", "alice", "secret", nil},
		{"alice\x00alice\x00secret", "alice", "secret", nil},
		{"\x00alice\x00sec\x01ret with spaces", "alice", "sec\x01ret with spaces", nil},
		{"bob\x00alice\x00secret", "", "", errAuthzID},
		{"\x00\x00secret", "", "", errPlainNoUser},
		{"\x00alice\x00", "", "", errPlainNoPass},
		{"alice\x00secret", "", "", errPlainTokens},
		{"\x00alice\x00secret\x00more", "", "", errPlainTokens},
		{"", "", "", errPlainTokens},
	} {
		user, pass, err := parsePlain([]byte(tc.msg))
		if user != tc.user || pass != tc.pass || err != tc.err {
			t.Errorf("%q: %q %q %v, want %q %q %v", tc.msg, user, pass, err, tc.user, tc.pass, tc.err)
		}
	}
}

// TestSaslStates: SaslHandshake and SaslAuthenticate where they do not
// belong are ILLEGAL_SASL_STATE without closing the connection, as Kafka
// answers them: on a listener without SASL, and after authentication.
func TestSaslStates(t *testing.T) {
	ts, _, _ := saslServer(t, nil)
	addUser(t, ts.creds.cs, "alice", "pw", ScramSHA256)
	c := dial(t, ts.addrs["INTERNAL"])
	if r := c.saslHandshake(Plain); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("handshake on a plaintext listener: %s", errName(r.ErrorCode))
	}
	if r := c.saslAuthenticate([]byte("\x00alice\x00pw")); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("authenticate on a plaintext listener: %s", errName(r.ErrorCode))
	}
	checkServes(t, c)

	s := dial(t, ts.addrs["SASL"])
	if r := s.saslHandshake(Plain); r.ErrorCode != 0 || !slices.Equal(r.SupportedMechanisms, []string{Plain, ScramSHA256, ScramSHA512}) {
		t.Fatalf("handshake: %s %q", errName(r.ErrorCode), r.SupportedMechanisms)
	}
	if r := s.saslAuthenticate([]byte("\x00alice\x00pw")); r.ErrorCode != 0 {
		t.Fatalf("PLAIN: %s", errName(r.ErrorCode))
	}
	if r := s.saslHandshake(Plain); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("handshake after authenticating: %s", errName(r.ErrorCode))
	}
	if r := s.saslAuthenticate([]byte("\x00alice\x00pw")); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("authenticate after authenticating: %s", errName(r.ErrorCode))
	}
	checkServes(t, s)
}

// checkServes asserts that c is open and served beyond the pre-auth
// requests.
func checkServes(t *testing.T, c *rawClient) {
	t.Helper()
	if r := c.roundTrip(metadataRequest(12)).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatalf("Metadata: %+v", r)
	}
}
