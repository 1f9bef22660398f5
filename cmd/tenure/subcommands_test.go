package main

import (
	"bytes"
	"context"
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// noEnv is an environment with no variable set.
func noEnv(string) (string, bool) { return "", false }

// subcommandCases are every subcommand of every command that has them,
// with the command's flags registered on fs, and the flags the
// subcommand reads as its table (subcommand.flags) says: the one source
// the tests below derive what to expect from.
type subcommandCase struct {
	cmd   *command
	sub   subcommand
	fs    *flag.FlagSet
	reads map[string]bool // by name, -o with --output
}

func subcommandCases(t *testing.T) []subcommandCase {
	t.Helper()
	var cases []subcommandCase
	for _, c := range commands() {
		for _, s := range c.subs {
			fs := flag.NewFlagSet("tenure "+c.name, flag.ContinueOnError)
			c.setup(fs)
			reads := map[string]bool{}
			fs.VisitAll(func(f *flag.Flag) {
				name := f.Name
				if a, ok := f.Value.(interface{ aliasOf() string }); ok {
					name = a.aliasOf()
				}
				reads[f.Name] = s.flags == nil || slices.Contains(s.flags, name)
			})
			cases = append(cases, subcommandCase{c, s, fs, reads})
		}
	}
	if len(cases) < 15 {
		t.Fatalf("only %d subcommands: is the command table empty?", len(cases))
	}
	return cases
}

// TestSubcommandFlags keeps the tables of the flags each subcommand reads
// in step with the flags its command registers: a name in a table that
// is no flag is a typo, and a flag that no subcommand reads cannot be
// given at all (it was added and not listed).
func TestSubcommandFlags(t *testing.T) {
	readBySome := map[string]map[string]bool{}
	for _, tc := range subcommandCases(t) {
		for _, name := range tc.sub.flags {
			if tc.fs.Lookup(name) == nil {
				t.Errorf("%s %s reads --%s, which is no flag of %s", tc.cmd.name, tc.sub.name, name, tc.cmd.name)
			}
		}
		if readBySome[tc.cmd.name] == nil {
			readBySome[tc.cmd.name] = map[string]bool{}
		}
		for name, ok := range tc.reads {
			readBySome[tc.cmd.name][name] = readBySome[tc.cmd.name][name] || ok
		}
	}
	for cmd, flags := range readBySome {
		for name, ok := range flags {
			if !ok {
				t.Errorf("no subcommand of %s reads --%s: list it in the flags of those that do", cmd, name)
			}
		}
	}
}

// helpFlags are the flags a usage lists, by name, sorted.
func helpFlags(usage string) []string {
	_, flags, _ := strings.Cut(usage, "\nFlags (environment variable in brackets):\n")
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  --?([a-z][a-z0-9-]*)`).FindAllStringSubmatch(flags, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return names
}

func subHelp(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(args, "--help"), &stdout, &stderr); code != 0 {
		t.Fatalf("%q --help: exit %d: %s", args, code, stderr.String())
	}
	return stdout.String()
}

// TestSubcommandHelpListsItsFlags: `tenure C S --help` lists exactly the
// flags S reads, those its table names, and, pinned by hand, what an
// operator should see for a few.
func TestSubcommandHelpListsItsFlags(t *testing.T) {
	for _, tc := range subcommandCases(t) {
		t.Run(tc.cmd.name+" "+tc.sub.name, func(t *testing.T) {
			var want []string
			for name, ok := range tc.reads {
				if ok {
					want = append(want, name)
				}
			}
			slices.Sort(want)
			if got := helpFlags(subHelp(t, tc.cmd.name, tc.sub.name)); !slices.Equal(got, want) {
				t.Errorf("--help lists\n  %q\nwant\n  %q", got, want)
			}
			// The same usage however help is asked for.
			if got := helpFlags(subHelp(t, "help", tc.cmd.name, tc.sub.name)); !slices.Equal(got, want) {
				t.Errorf("tenure help %s %s lists %q, want %q", tc.cmd.name, tc.sub.name, got, want)
			}
		})
	}

	conn := []string{"brokers", "sasl-mechanism", "sasl-password-file", "sasl-user", "timeout",
		"tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name"}
	sorted := func(names ...[]string) []string { return slices.Sorted(slices.Values(slices.Concat(names...))) }
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"groups", "list"}, sorted(conn, []string{"o", "output"})},
		{[]string{"groups", "offsets"}, sorted(conn, []string{"o", "output"})},
		{[]string{"groups", "describe"}, sorted(conn, []string{"admin", "o", "output"})},
		{[]string{"groups", "explain"}, []string{"admin", "epoch", "limit", "o", "output", "timeout"}},
		{[]string{"groups", "drain"}, sorted(conn, []string{"admin", "o", "output", "remove", "undo", "wait"})},
		{[]string{"groups", "what-if"}, sorted(conn, []string{"add", "assignor", "current-heartbeat", "current-session",
			"heartbeat", "o", "output", "remove", "risk-duration", "seed", "seeds", "session"})},
		{[]string{"keys", "list"}, []string{"admin", "o", "output", "timeout"}},
		{[]string{"keys", "rotate"}, []string{"admin", "now", "o", "output", "timeout"}},
		{[]string{"users", "list"}, conn},
		{[]string{"users", "add"}, sorted(conn, []string{"iterations", "mechanism"})},
		{[]string{"users", "delete"}, sorted(conn, []string{"mechanism"})},
		{[]string{"topics", "create"}, conn},
		{[]string{"acls", "delete"}, sorted(conn, []string{"cluster", "group", "host", "operation", "permission",
			"principal", "resource-pattern-type", "topic"})},
	} {
		if got := helpFlags(subHelp(t, tc.args...)); !slices.Equal(got, tc.want) {
			t.Errorf("%s --help lists\n  %q\nwant\n  %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}

	// The command's own help still lists every flag.
	if got := helpFlags(subHelp(t, "groups")); !slices.Contains(got, "epoch") || !slices.Contains(got, "brokers") || !slices.Contains(got, "undo") {
		t.Errorf("tenure groups --help lists %q", got)
	}
}

// TestForeignFlagRefused: a flag of another subcommand, before or after
// the subcommand, is a usage error that names the subcommands it belongs
// to; it is not taken, as a flag of no subcommand is not.
func TestForeignFlagRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"groups", "list", "--epoch", "5"}, want: "unknown flag --epoch for groups list (it is a flag of groups explain)"},
		{args: []string{"groups", "--epoch", "5", "list"}, want: "unknown flag --epoch for groups list (it is a flag of groups explain)"},
		// Its variable set does not let the flag through.
		{args: []string{"groups", "list", "--epoch", "5"}, env: map[string]string{"TENURE_EPOCH": "5"},
			want: "unknown flag --epoch for groups list (it is a flag of groups explain)"},
		// Without the value it takes, last.
		{args: []string{"groups", "describe", "g", "--limit"}, want: "unknown flag --limit for groups describe (it is a flag of groups explain)"},
		{args: []string{"groups", "describe", "--add", "3", "g"}, want: "unknown flag --add for groups describe (it is a flag of groups what-if)"},
		{args: []string{"groups", "list", "--admin", "http://127.0.0.1:1"}, want: "unknown flag --admin for groups list (it is a flag of groups describe, explain and drain)"},
		{args: []string{"groups", "offsets", "g", "--remove", "m"}, want: "unknown flag --remove for groups offsets (it is a flag of groups drain and what-if)"},
		{args: []string{"groups", "explain", "g", "--brokers", "127.0.0.1:1"}, want: "unknown flag --brokers for groups explain (it is a flag of groups list, describe, offsets, delete, drain and what-if)"},
		// A boolean takes no value: g stays the group.
		{args: []string{"groups", "describe", "--undo", "g"}, want: "unknown flag --undo for groups describe (it is a flag of groups drain)"},
		{args: []string{"groups", "what-if", "g", "--limit", "3", "--add", "1"}, want: "unknown flag --limit for groups what-if (it is a flag of groups explain)"},
		{args: []string{"keys", "list", "--now"}, want: "unknown flag --now for keys list (it is a flag of keys rotate)"},
		{args: []string{"keys", "revoke", "0123456789abcdef", "--now"}, want: "unknown flag --now for keys revoke (it is a flag of keys rotate)"},
		{args: []string{"users", "list", "--iterations", "8192"}, want: "unknown flag --iterations for users list (it is a flag of users add)"},
		{args: []string{"users", "list", "--mechanism", "SCRAM-SHA-256"}, want: "unknown flag --mechanism for users list (it is a flag of users add and delete)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if want := "tenure " + tc.args[0] + ": " + tc.want + "\n"; code != 2 || stderr.String() != want {
				t.Errorf("exit %d, stderr\n  %q\nwant exit 2 and\n  %q", code, stderr.String(), want)
			}
		})
	}

	// Every flag of every subcommand's command that it does not read.
	n := 0
	for _, tc := range subcommandCases(t) {
		var owners []string
		tc.fs.VisitAll(func(f *flag.Flag) {
			if tc.reads[f.Name] || f.Name == "o" {
				return
			}
			owners = owners[:0]
			for _, s := range tc.cmd.subs {
				if s.reads(f.Name) {
					owners = append(owners, s.name)
				}
			}
			arg := "--" + f.Name + "=1"
			if isBoolFlag(f.Value) {
				arg = "--" + f.Name
			}
			args := []string{tc.cmd.name, tc.sub.name, arg}
			for _, a := range tc.sub.args {
				args = append(args, strings.Trim(strings.TrimSuffix(a, "..."), "[]"))
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr)
			want := "unknown flag --" + f.Name + " for " + tc.cmd.name + " " + tc.sub.name + " (it is a flag of " + tc.cmd.name + " " + joinAnd(owners) + ")"
			if code != 2 || !strings.Contains(stderr.String(), want) {
				t.Errorf("%q: exit %d, stderr %q; want 2 and %q", args, code, stderr.String(), want)
			}
			n++
		})
	}
	if n < 20 {
		t.Errorf("only %d foreign flags tried", n)
	}
}

// TestForeignFlagEnvIgnored: a variable of a flag the subcommand does not
// read, exported for the subcommand that does, is left alone, even with a
// value that flag would refuse; the subcommand that reads it still does.
func TestForeignFlagEnvIgnored(t *testing.T) {
	// Every foreign flag's variable set to what no flag takes.
	for _, tc := range subcommandCases(t) {
		var foreign []string
		tc.fs.VisitAll(func(f *flag.Flag) {
			if !tc.reads[f.Name] {
				foreign = append(foreign, flagEnv(tc.fs, f.Name))
			}
		})
		lookup := func(name string) (string, bool) {
			if slices.Contains(foreign, name) {
				return "\x00 not a value", true
			}
			return "", false
		}
		args := []string{tc.sub.name}
		for _, a := range tc.sub.args {
			args = append(args, strings.Trim(strings.TrimSuffix(a, "..."), "[]"))
		}
		if _, err := parseCommandLine(tc.fs, tc.cmd.subs, args, lookup); err != nil {
			t.Errorf("%s %s with %q set: %v", tc.cmd.name, tc.sub.name, foreign, err)
		}
		tc.fs.VisitAll(func(f *flag.Flag) {
			if !tc.reads[f.Name] && f.Value.String() != f.DefValue {
				t.Errorf("%s %s: --%s is %q, want its default %q", tc.cmd.name, tc.sub.name, f.Name, f.Value.String(), f.DefValue)
			}
		})
	}

	// The operator's case, on the command line.
	t.Setenv("TENURE_LIMIT", "x")      // for explain
	t.Setenv("TENURE_UNDO", "perhaps") // for drain
	t.Setenv("TENURE_ADD", "many")     // for what-if
	t.Setenv("TENURE_NOW", "soon")     // for keys rotate
	t.Setenv("TENURE_ITERATIONS", "x") // for users add
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 8))
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"groups", "list", "--brokers", broker}, &stdout, &stderr); code != 0 {
		t.Errorf("groups list: exit %d: %s", code, stderr.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		// Each fails on its arguments, not on a variable of another's.
		{[]string{"keys", "list", "x"}, "tenure keys: list takes no argument"},
		{[]string{"users", "list", "x"}, "tenure users: list takes no argument"},
		// The subcommand that reads it.
		{[]string{"groups", "explain", "g"}, `tenure groups: invalid value "x" for TENURE_LIMIT`},
		{[]string{"keys", "rotate"}, `tenure keys: invalid value "soon" for TENURE_NOW`},
	} {
		stderr.Reset()
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 || !strings.HasPrefix(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
