// Command tenure runs the tenure coordinator, demo workers, the simulator and
// the timing tuner. Run "tenure help" for the list of subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one subcommand. setup registers the command's flags on fs and
// returns the function that runs it once the flags are parsed.
type command struct {
	name    string
	summary string
	// help, if set, is printed under the summary by --help: what a user
	// must know beyond the flags.
	help string
	// hidden keeps the command out of "tenure help": a helper process of
	// another command.
	hidden bool
	setup  func(fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

// commands lists every subcommand, in the order "tenure help" shows them.
func commands() []*command {
	return append([]*command{
		serveCommand(),
		simCommand(),
		tuneCommand(),
		workerCommand(),
		groupsCommand(),
		topicsCommand(),
		usersCommand(),
		keysCommand(),
	}, chaosCommands()...)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code: 0 on
// success, 2 for a usage error, 1 for a failed command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			args = []string{args[1], "--help"}
		} else {
			printUsage(stdout, cmds)
			return 0
		}
	}
	var cmd *command
	for _, c := range cmds {
		if c.name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "tenure: unknown command %q\n\n", args[0])
		printUsage(stderr, cmds)
		return 2
	}
	fs := flag.NewFlagSet("tenure "+cmd.name, flag.ContinueOnError)
	runCmd := cmd.setup(fs)
	// The flag package prints a parse error and the usage itself; here
	// --help prints the usage to stdout, and a parse error is one line
	// (flagError) without the usage, which would bury it. The commands
	// log to fs.Output() once parsed.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args[1:])
	fs.SetOutput(stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, cmd, fs)
			return 0
		}
		fmt.Fprintf(stderr, "tenure %s: %v\n", cmd.name, flagError(fs, err))
		return 2
	}
	if err := applyEnv(fs, os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "tenure %s: %v\n", cmd.name, err)
		return 2
	}
	if err := runCmd(ctx, fs.Args()); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "tenure %s: %v\n", cmd.name, err)
			return 2
		}
		fmt.Fprintf(stderr, "tenure %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

// usageError marks an error in the command line (rather than a failure of
// the command), which exits with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func printUsage(w io.Writer, cmds []*command) {
	fmt.Fprintln(w, "tenure: a Kafka-style partition-assignment coordinator with fencing tokens.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: tenure <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range cmds {
		if !c.hidden {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "tenure <command> --help" for a command's flags. Every flag can also be`)
	fmt.Fprintln(w, "set by an environment variable: --session-timeout is TENURE_SESSION_TIMEOUT, but")
	fmt.Fprintln(w, "a flag that another command uses in another sense has a variable of its own:")
	fmt.Fprintln(w, "tenure worker --topic is TENURE_WORKER_TOPIC. Each command's --help names them.")
}

func printCommandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: tenure %s [flags]\n\n%s\n", c.name, c.summary)
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
	fmt.Fprintf(w, "\nFlags (environment variable in brackets):\n")
	fs.VisitAll(func(f *flag.Flag) {
		if a, ok := f.Value.(interface{ aliasOf() string }); ok {
			fmt.Fprintf(w, "  -%s\n    \tshort for --%s\n", f.Name, a.aliasOf())
			return
		}
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "  [%s]\n    \t%s", flagEnv(fs, f.Name), usage)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
