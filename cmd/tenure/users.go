package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/term"
)

// usersCommand is `tenure users`: the SASL users' SCRAM credentials, over
// the Kafka protocol (DescribeUserScramCredentials,
// AlterUserScramCredentials), as kadm manages them.
func usersCommand() *command {
	return &command{
		name:    "users",
		summary: "add, list and delete SASL users (SCRAM credentials, Kafka protocol)",
		subs: []subcommand{
			{name: "add", args: []string{"NAME"}, flags: append(adminFlagNames(), "mechanism", "iterations"), help: "add NAME, or change its password, for --mechanism;\nthe password is read from standard input (its first\nline), or asked for twice when standard input is a\nterminal: never from a flag"},
			{name: "list", help: "every user, with its mechanisms and iterations", flags: adminFlagNames()},
			{name: "delete", args: []string{"NAME"}, flags: append(adminFlagNames(), "mechanism"), help: "delete NAME's credential for --mechanism (default:\nevery mechanism NAME has)"},
		},
		help: `The client derives the salted password (PBKDF2 with a random salt, as kadm
does) and sends it, not the password; the coordinator keeps only the salt,
the iterations and the keys SCRAM derives from it. A salted password lets
whoever holds it authenticate as the user: send it over TLS (--tls) unless
the listener is on loopback. PLAIN clients are checked against the same
credential. Users are shared by every node of an HA set.

To add the first user of a cluster whose listeners all need SASL, use a
plaintext listener on loopback (tenure serve --listeners
INTERNAL://127.0.0.1:9092,... with INTERNAL:PLAINTEXT), or a TLS one that
takes client certificates. With serve --authorizer on, managing users needs
ALTER on the cluster (listing, DESCRIBE): make that listener's clients a
super user (serve --super-users User:admin --listener-principal
INTERNAL=User:admin). Flags may come before or after the subcommand.`,
		setup: setupUsers,
	}
}

// scramMechanisms are the mechanisms a user may have a credential for.
var scramMechanisms = map[string]kadm.ScramMechanism{
	"SCRAM-SHA-256": kadm.ScramSha256,
	"SCRAM-SHA-512": kadm.ScramSha512,
}

func setupUsers(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	return setupUsersIO(fs, os.Stdin, os.Stdout, os.Stderr, stdinTerminal)
}

// setupUsersIO is setupUsers reading the password from in (or from the
// terminal that terminal names, prompting on prompt) and writing to out.
func setupUsersIO(fs *flag.FlagSet, in io.Reader, out, prompt io.Writer, terminal func() (int, bool)) func(ctx context.Context, args []string) error {
	admin := addAdminFlags(fs)
	mechanism := fs.String("mechanism", "", "add: the SCRAM `mechanism`, SCRAM-SHA-256 or SCRAM-SHA-512 (default SCRAM-SHA-512); delete: the one to delete (default: every one)")
	iterations := fs.Int("iterations", 4096, "add: PBKDF2 iterations of the salted password, 4096 to 16384 (an unknown user looks like one with 4096 to a SCRAM client: other counts tell users apart from names that are not)")
	return func(ctx context.Context, args []string) error {
		u := usersCLI{admin: admin, mechanism: *mechanism, iterations: *iterations,
			in: in, out: out, prompt: prompt, terminal: terminal}
		return admin.guard(ctx, func(ctx context.Context) error { return u.run(ctx, args) })
	}
}

// stdinTerminal returns the file descriptor of standard input if it is a
// terminal.
func stdinTerminal() (int, bool) {
	fd := int(os.Stdin.Fd())
	return fd, term.IsTerminal(fd)
}

// usersCLI runs `tenure users` with its input and output.
type usersCLI struct {
	admin      adminFlags
	mechanism  string
	iterations int
	in         io.Reader
	out        io.Writer
	prompt     io.Writer // where a terminal is asked for the password
	terminal   func() (fd int, ok bool)
}

func (u usersCLI) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("missing subcommand: add, list or delete")
	}
	sub, args := args[0], args[1:]
	var mech kadm.ScramMechanism
	if u.mechanism != "" {
		m, ok := scramMechanisms[strings.ToUpper(u.mechanism)]
		if !ok {
			return usagef("unknown --mechanism %q (SCRAM-SHA-256 or SCRAM-SHA-512)", u.mechanism)
		}
		mech = m
	}
	switch sub {
	case "list":
		if len(args) != 0 {
			return usagef("list takes no argument, got %q", args)
		}
	case "add", "delete":
		if len(args) != 1 || args[0] == "" {
			return usagef("%s takes one user NAME", sub)
		}
	default:
		return usagef("unknown subcommand %q: add, list or delete", sub)
	}
	if sub == "add" {
		if u.iterations < 4096 || u.iterations > 16384 {
			return usagef("--iterations %d is outside 4096..16384", u.iterations)
		}
		if mech == 0 {
			mech = kadm.ScramSha512
		}
	}
	// The password is read before anything is sent, so that a prompt is
	// not interleaved with connection errors.
	var password string
	if sub == "add" {
		var err error
		if password, err = u.readPassword(args[0]); err != nil {
			return err
		}
	}
	adm, ctx, done, err := u.admin.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	switch sub {
	case "list":
		return u.list(ctx, adm)
	case "add":
		up := kadm.UpsertSCRAM{User: args[0], Mechanism: mech, Iterations: int32(u.iterations), Password: password}
		return u.alter(ctx, adm, nil, []kadm.UpsertSCRAM{up}, "added "+mech.String())
	}
	var dels []kadm.DeleteSCRAM
	if mech != 0 {
		dels = append(dels, kadm.DeleteSCRAM{User: args[0], Mechanism: mech})
	} else {
		described, err := adm.DescribeUserSCRAMs(ctx, args[0])
		if err != nil {
			return err
		}
		d := described[args[0]]
		if d.Err != nil {
			return fmt.Errorf("user %q: %w", args[0], d.Err)
		}
		for _, ci := range d.CredInfos {
			dels = append(dels, kadm.DeleteSCRAM{User: args[0], Mechanism: ci.Mechanism})
		}
	}
	return u.alter(ctx, adm, dels, nil, "deleted")
}

func (u usersCLI) list(ctx context.Context, adm *kadm.Client) error {
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		return err
	}
	if err := described.Error(); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(u.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
	for _, d := range described.Sorted() {
		for _, ci := range d.CredInfos {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", d.User, ci.Mechanism, ci.Iterations)
		}
	}
	return tw.Flush()
}

func (u usersCLI) alter(ctx context.Context, adm *kadm.Client, dels []kadm.DeleteSCRAM, ups []kadm.UpsertSCRAM, done string) error {
	res, err := adm.AlterUserSCRAMs(ctx, dels, ups)
	if err != nil {
		return err
	}
	for user, r := range res {
		if r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("user %q: %w: %s", user, r.Err, r.ErrMessage)
			}
			return fmt.Errorf("user %q: %w", user, r.Err)
		}
		fmt.Fprintf(u.out, "%s: %s\n", user, done)
	}
	return nil
}

// readPassword reads the password of user: asked twice, unechoed, on a
// terminal; else the first line of the input.
func (u usersCLI) readPassword(user string) (string, error) {
	if fd, ok := u.terminal(); ok {
		fmt.Fprintf(u.prompt, "Password for %s: ", user)
		first, err := term.ReadPassword(fd)
		fmt.Fprintln(u.prompt)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		fmt.Fprintf(u.prompt, "Again: ")
		again, err := term.ReadPassword(fd)
		fmt.Fprintln(u.prompt)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		if string(first) != string(again) {
			return "", errors.New("the passwords differ")
		}
		if len(first) == 0 {
			return "", errors.New("empty password")
		}
		return string(first), nil
	}
	line, err := bufio.NewReader(u.in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password from standard input: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", usagef("no password on standard input (its first line is the password)")
	}
	return line, nil
}
