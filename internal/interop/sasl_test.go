//go:build unix

package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// saslLogin is one client's SCRAM login: it joins a group over a
// SASL_PLAINTEXT listener and says whether it owned a partition.
type saslLogin struct {
	name string
	// missing says why the client cannot run here ("" if it can).
	missing func() string
	// run logs in and reports whether the client joined, with its
	// output.
	run func(ctx context.Context, addr, mech, user, pass, group string) (joined bool, out string)
}

// saslLogins are the clients whose logins the test tries: librdkafka 2.0
// through Debian's kcat, kafka-python 2.0.2 (python3-kafka), which sends
// SaslHandshake v0 and raw tokens, and kafkajs.
func saslLogins(tl tools) []saslLogin {
	kcat, _ := exec.LookPath("kcat")
	script := func(argv ...string) func(ctx context.Context, addr, mech, user, pass, group string) (bool, string) {
		return func(ctx context.Context, addr, mech, user, pass, group string) (bool, string) {
			args := append(argv[1:], addr, mech, user, pass, group, saslTopic, "20")
			out, err := exec.CommandContext(ctx, argv[0], args...).CombinedOutput()
			return err == nil && strings.Contains(string(out), "joined"), string(out)
		}
	}
	return []saslLogin{
		{name: "kcat", missing: func() string {
			if kcat == "" {
				return "no kcat (apt-get install kcat)"
			}
			return ""
		}, run: func(ctx context.Context, addr, mech, user, pass, group string) (bool, string) {
			// -e: exit once every assigned partition is at its end, so a
			// joined consumer exits 0 at once (the topics hold no record).
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(cctx, kcat, "-b", addr, "-G", group, "-e",
				"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms="+mech,
				"-X", "sasl.username="+user, "-X", "sasl.password="+pass, saslTopic).CombinedOutput()
			return err == nil && strings.Contains(string(out), "assigned:"), string(out)
		}},
		{name: "kafka-python", missing: pythonMissing(tl.python, "kafka"),
			run: script(tl.python, filepath.Join(tl.dir, "python", "kafka_python_sasl.py"))},
		{name: "kafkajs", missing: nodeMissing(tl, "kafkajs"),
			run: script(tl.node, filepath.Join(tl.dir, "node", "kafkajs_sasl.mjs"))},
	}
}

const saslTopic = "sasl-interop"

// TestSASLLogins: SCRAM-SHA-256 and SCRAM-SHA-512 logins of stock clients
// of three languages against a SASL_PLAINTEXT listener: the right
// password joins a group and owns its partitions, a wrong one is refused.
// kcat (librdkafka 2.0.2) said "SASL Handshake not supported by broker"
// and kafka-python 2.0.2 "NoBrokersAvailable" while tenure served
// SaslHandshake v1 only. It runs with the fail-over matrix (-interop,
// TENURE_INTEROP=1, make interop); a client whose tools are missing is
// skipped with a line saying so, or fails with TENURE_REQUIRE_TOOLS=1.
func TestSASLLogins(t *testing.T) {
	if !*enabled {
		t.Skip("the interop tests run with -interop or TENURE_INTEROP=1 (make interop)")
	}
	tenure := *tenureBin
	if tenure == "" {
		tenure = proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure")[0]
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tl := tools{dir: filepath.Join(wd, "drivers")}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		tl.python = "/usr/bin/python3"
	} else if p, err := exec.LookPath("python3"); err == nil {
		tl.python = p
	}
	if p, err := exec.LookPath("node"); err == nil {
		tl.node = p
	}

	node := proctest.StartServe(t, "serve", tenure, "serve", "--store", "memory", "--http", "",
		"--listeners", "INTERNAL://{addr},SASL://{addr}",
		"--listener-security-protocol-map", "INTERNAL:PLAINTEXT,SASL:SASL_PLAINTEXT",
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "--topic", saslTopic+":4",
		"--consumer-session-timeout", "10s")
	internal, sasl := node.Listeners["INTERNAL"], node.Listeners["SASL"]
	passwords := map[string]string{"SCRAM-SHA-256": "alice-secret-256", "SCRAM-SHA-512": "alice-secret-512"}
	for mech, pw := range passwords {
		add := exec.Command(tenure, "users", "add", "alice", "--mechanism", mech, "--brokers", internal)
		add.Stdin = strings.NewReader(pw + "\n")
		add.Env = []string{}
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("tenure users add alice --mechanism %s: %v\n%s", mech, err, out)
		}
	}

	for _, cl := range saslLogins(tl) {
		t.Run(cl.name, func(t *testing.T) {
			if why := cl.missing(); why != "" {
				if os.Getenv("TENURE_REQUIRE_TOOLS") == "1" {
					t.Fatalf("%s cannot run, and TENURE_REQUIRE_TOOLS=1: %s", cl.name, why)
				}
				t.Skipf("%s cannot run: %s", cl.name, why)
			}
			for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				group := fmt.Sprintf("sasl-%s-%s", cl.name, strings.ToLower(mech))
				if joined, out := cl.run(ctx, sasl, mech, "alice", passwords[mech], group); !joined {
					t.Errorf("%s with the right password did not join:\n%s", mech, out)
				}
				if joined, out := cl.run(ctx, sasl, mech, "alice", "wrong", group+"-bad"); joined {
					t.Errorf("%s with a wrong password joined:\n%s", mech, out)
				} else {
					t.Logf("%s, wrong password: %s", mech, lastLine(out))
				}
				cancel()
			}
		})
	}
}

func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(lines[len(lines)-1])
}
