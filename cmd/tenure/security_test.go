package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/internal/testpki"
)

// writePKI writes a CA and a server certificate for 127.0.0.1 into dir,
// returning the CA and the files' paths.
func writePKI(t *testing.T, dir string) (ca *testpki.CA, caFile, certFile, keyFile string) {
	t.Helper()
	ca = testpki.New(t, "test CA")
	cert := ca.Issue(pkix.Name{CommonName: "tenure"})
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return ca, write("ca.pem", ca.PEM()), write("cert.pem", cert.CertPEM), write("key.pem", cert.KeyPEM)
}

// TestServeListenerFlags: --listeners and its companions resolve into the
// server's listeners, or are refused with a message naming the fix.
func TestServeListenerFlags(t *testing.T) {
	_, caFile, certFile, keyFile := writePKI(t, t.TempDir())
	tlsFlags := []string{"--tls-cert", certFile, "--tls-key", keyFile}
	for _, tc := range []struct {
		name   string
		args   []string
		listen bool // --listen given
		want   string
		// lns is the resolved listeners, as NAME/PROTOCOL@bind>advertise.
		lns string
	}{
		{name: "default", lns: "PLAINTEXT/PLAINTEXT@127.0.0.1:9092>"},
		{name: "Kafka's names map to themselves", args: append([]string{"--listeners", "plaintext://127.0.0.1:1,SSL://:2,SASL_SSL://127.0.0.1:3",
			"--advertised-listeners", "SSL://tenure.example:9094"}, tlsFlags...),
			lns: "PLAINTEXT/PLAINTEXT@127.0.0.1:1> SSL/SSL@:2>tenure.example:9094 SASL_SSL/SASL_SSL@127.0.0.1:3>"},
		{name: "names of one's own", args: append([]string{"--listeners", "INTERNAL://127.0.0.1:1,EXTERNAL://:2",
			"--listener-security-protocol-map", "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL", "--tls-client-ca", caFile}, tlsFlags...),
			lns: "INTERNAL/PLAINTEXT@127.0.0.1:1> EXTERNAL/SASL_SSL@:2>"},
		{name: "no protocol", args: []string{"--listeners", "EXTERNAL://:2"}, want: "add EXTERNAL:PROTOCOL to --listener-security-protocol-map"},
		{name: "unknown protocol", args: []string{"--listeners", "X://:2", "--listener-security-protocol-map", "X:KERBEROS"}, want: "unknown security protocol"},
		{name: "--listen beside --listeners", args: []string{"--listeners", "PLAINTEXT://:2"}, listen: true, want: "--listen and --listeners"},
		{name: "not NAME://host:port", args: []string{"--listeners", "127.0.0.1:9092"}, want: "is not NAME://host:port"},
		{name: "a name twice", args: []string{"--listeners", "PLAINTEXT://:1,plaintext://:2"}, want: "names PLAINTEXT twice"},
		{name: "advertised without a host", args: []string{"--listeners", "PLAINTEXT://:1", "--advertised-listeners", "PLAINTEXT://:1"}, want: "has no host"},
		{name: "advertised listener not listened on", args: []string{"--listeners", "PLAINTEXT://:1", "--advertised-listeners", "SSL://a:1"}, want: "SSL, which is not in --listeners"},
		{name: "advertised without listeners", args: []string{"--advertised-listeners", "PLAINTEXT://a:1"}, want: "needs --listeners"},
		{name: "TLS listener without files", args: []string{"--listeners", "SSL://:1"}, want: "needs --tls-cert and --tls-key"},
		{name: "TLS files without a TLS listener", args: tlsFlags, want: "--listeners has none"},
		{name: "unloadable TLS files", args: []string{"--listeners", "SSL://:1", "--tls-cert", keyFile, "--tls-key", certFile}, want: "TLS certificate"},
		{name: "SASL without mechanisms", args: []string{"--listeners", "SASL_PLAINTEXT://:1", "--sasl-mechanisms", ""}, want: "--sasl-mechanisms is empty"},
		{name: "--listen's listener with a principal", args: []string{"--listener-principal", "plaintext=User:admin"},
			lns: "PLAINTEXT/PLAINTEXT@127.0.0.1:9092>=User:admin"},
		{name: "an admin listener", args: []string{"--listeners", "ADMIN://localhost:1,EXTERNAL://:2,INTERNAL://[::1]:3",
			"--listener-security-protocol-map", "ADMIN:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
			"--listener-principal", "ADMIN=User:admin, INTERNAL=User:ops"},
			lns: "ADMIN/PLAINTEXT@localhost:1>=User:admin EXTERNAL/SASL_PLAINTEXT@:2> INTERNAL/PLAINTEXT@[::1]:3>=User:ops"},
		{name: "principal on every interface", args: []string{"--listeners", "PLAINTEXT://:1", "--listener-principal", "PLAINTEXT=User:admin"},
			want: "bound to :1, not to loopback: every client that reaches it would act as User:admin"},
		{name: "principal on a network address", args: []string{"--listeners", "PLAINTEXT://10.1.2.3:1", "--listener-principal", "PLAINTEXT=User:admin"},
			want: "not to loopback"},
		{name: "principal on a SASL listener", args: []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--listener-principal", "SASL_PLAINTEXT=User:admin"},
			want: "whose clients authenticate"},
		{name: "principal of no listener", args: []string{"--listener-principal", "ADMIN=User:admin"}, want: "names listener ADMIN; the listeners are PLAINTEXT"},
		{name: "principal without a type", args: []string{"--listener-principal", "PLAINTEXT=admin"}, want: "is not NAME=User:name"},
		{name: "principal without a name", args: []string{"--listener-principal", "User:admin"}, want: "is not NAME=User:name"},
		{name: "a listener's principal twice", args: []string{"--listener-principal", "PLAINTEXT=User:a,PLAINTEXT=User:b"}, want: "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			f := addListenerFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg := server.DefaultConfig()
			bound, err := f.resolve(&cfg, "127.0.0.1:9092", "", tc.listen, false, zap.NewNop())
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range bound {
				l := b.cfg.Name + "/" + b.cfg.Protocol.String() + "@" + b.bind + ">" + b.cfg.Advertise
				if b.cfg.Principal != "" {
					l += "=" + b.cfg.Principal
				}
				got = append(got, l)
			}
			// The server is given the principals too.
			for i, l := range cfg.Listeners {
				if l != bound[i].cfg {
					t.Errorf("server listener %d is %+v, resolved %+v", i, l, bound[i].cfg)
				}
			}
			if strings.Contains(tc.lns, "=") && len(cfg.Listeners) != len(bound) {
				t.Errorf("the server has %d listeners, %d resolved", len(cfg.Listeners), len(bound))
			}
			if strings.Join(got, " ") != tc.lns {
				t.Errorf("listeners %q, want %q", strings.Join(got, " "), tc.lns)
			}
			if hasTLS := cfg.TLS != nil; hasTLS != strings.Contains(tc.lns, "SSL") {
				t.Errorf("TLS configured: %v", hasTLS)
			}
		})
	}
}

var listenerRe = regexp.MustCompile(`"listener": "(\w+)", "protocol": "\w+", "listen": "([^"]+)"`)

// TestServeSecure runs `tenure serve` with a plaintext listener on
// loopback and a SASL_SSL one; `tenure users add` creates a user on the
// plaintext one (the password from standard input), and `tenure topics`
// and a stock kgo client use the user over TLS; `tenure users list` and
// `delete` manage it, after which it no longer authenticates.
func TestServeSecure(t *testing.T) {
	dir := t.TempDir()
	ca, caFile, certFile, keyFile := writePKI(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--store", "memory",
			"--listeners", "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
			"--listener-security-protocol-map", "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
			"--tls-cert", certFile, "--tls-key", keyFile, "--sasl-mechanisms", "SCRAM-SHA-512,PLAIN"}, io.Discard, logs)
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
	pollUntil(t, 30*time.Second, "serve logs both listeners", func() string {
		for _, m := range listenerRe.FindAllStringSubmatch(logs.String(), -1) {
			addrs[m[1]] = m[2]
		}
		if len(addrs) < 2 {
			return "not yet: " + logs.String()
		}
		return ""
	})

	users := func(stdin string, args ...string) (string, error) {
		t.Helper()
		fs := flag.NewFlagSet("users", flag.ContinueOnError)
		var out bytes.Buffer
		runUsers := setupUsersIO(fs, strings.NewReader(stdin), &out, io.Discard, func() (int, bool) { return 0, false })
		pos, err := parseCommandLine(fs, usersCommand().subs, args, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		err = runUsers(context.Background(), pos)
		return out.String(), err
	}
	if out, err := users("s3cret\n", "add", "alice", "--brokers", addrs["INTERNAL"]); err != nil || out != "alice: added SCRAM-SHA-512\n" {
		t.Fatalf("users add: %q %v", out, err)
	}
	if _, err := users("", "add", "bob", "--brokers", addrs["INTERNAL"]); err == nil || !strings.Contains(err.Error(), "no password") {
		t.Fatalf("users add without a password: %v", err)
	}
	if out, err := users("", "list", "--brokers", addrs["INTERNAL"]); err != nil || !regexp.MustCompile(`alice\s+SCRAM-SHA-512\s+4096`).MatchString(out) {
		t.Fatalf("users list: %q %v", out, err)
	}

	secure := []string{"--brokers", addrs["EXTERNAL"], "--tls-ca", caFile, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--timeout", "5s"}
	topics := func(password string, args ...string) int {
		t.Setenv(saslPasswordEnv, password)
		var stderr bytes.Buffer
		code := run(context.Background(), append(append([]string{"topics"}, args...), secure...), io.Discard, &stderr)
		if code != 0 {
			t.Logf("topics %q: exit %d: %s", args, code, stderr.String())
		}
		return code
	}
	if code := topics("s3cret", "create", "jobs:4"); code != 0 {
		t.Fatalf("topics create over SASL_SSL: exit %d", code)
	}
	if code := topics("wrong", "list"); code == 0 {
		t.Fatal("topics list with a wrong password succeeded")
	}
	// The user's password over PLAIN, with a password file.
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"topics", "list", "--brokers", addrs["EXTERNAL"], "--tls-ca", caFile,
		"--sasl-mechanism", "PLAIN", "--sasl-user", "alice", "--sasl-password-file", pwFile, "--timeout", "5s"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("topics list over PLAIN: exit %d: %s", code, stderr.String())
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs["EXTERNAL"]), kgo.DialTLSConfig(ca.ClientConfig()),
		kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = cl.Ping(pctx)
	pcancel()
	cl.Close()
	if err != nil {
		t.Fatalf("kgo over SASL_SSL: %v", err)
	}

	if out, err := users("", "delete", "alice", "--brokers", addrs["INTERNAL"]); err != nil || out != "alice: deleted\n" {
		t.Fatalf("users delete: %q %v", out, err)
	}
	if out, err := users("", "list", "--brokers", addrs["INTERNAL"]); err != nil || strings.Contains(out, "alice") {
		t.Fatalf("users list after delete: %q %v", out, err)
	}
	if code := topics("s3cret", "list"); code == 0 {
		t.Fatal("a deleted user authenticated")
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Error("the password is in the server's logs")
	}
}

// TestClientSecurityFlags: the client flags' mistakes are usage errors,
// and the password is never a flag.
func TestClientSecurityFlags(t *testing.T) {
	t.Setenv(saslPasswordEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--sasl-user", "alice"}, "need --sasl-mechanism"},
		{[]string{"--sasl-mechanism", "SCRAM-SHA-512"}, "needs --sasl-user"},
		{[]string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice"}, "needs a password"},
		{[]string{"--sasl-mechanism", "GSSAPI", "--sasl-user", "alice", "--sasl-password-file", "/dev/null"}, "holds no password"},
		{[]string{"--tls-ca", "/nonexistent"}, "--tls-ca"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		c := addClientSecurityFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if _, err := c.kgoOpts(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	addClientSecurityFlags(fs)
	if fs.Lookup("sasl-password") != nil {
		t.Error("a --sasl-password flag exists")
	}
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	c := addClientSecurityFlags(fs)
	if opts, err := c.kgoOpts(); err != nil || len(opts) != 0 {
		t.Errorf("no flags: %d options, %v", len(opts), err)
	}
}
