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
	// subs lists the subcommands of a command that has them (tenure
	// groups list), in the order its help shows them: --help lists them
	// above help, and "tenure groups list --help" or "tenure groups help
	// list" prints one's usage. The command's run function dispatches
	// them.
	subs  []subcommand
	setup func(fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

// subcommand is one subcommand of a command, as its help shows it.
type subcommand struct {
	name string
	// args names the positional arguments: "GROUP", "[MEMBER]" if it
	// may be left out, "NAME..." for one or more.
	args []string
	// help is one or more lines of at most 56 characters.
	help string
	// flags names every flag of the command that the subcommand reads
	// (-o goes with --output); nil if it reads them all. Its --help lists
	// these alone, any other is refused with it, naming the subcommands
	// it belongs to, and only these are set from the environment
	// (parseCommandLine). TestSubcommandFlags checks that each names a
	// flag of the command and that each flag has a subcommand.
	flags []string
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
		aclsCommand(),
		keysCommand(),
	}, chaosCommands()...)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal stops the command gracefully; a second one, with
	// the handler gone, ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code: 0 on
// success, 2 for a usage error, 1 for a failed command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		printVersion(stdout)
		return 0
	}
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		if len(args) > 1 {
			// tenure help groups list: tenure groups list --help.
			args = append(args[1:], "--help")
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
	var pos []string
	var err error
	if len(cmd.subs) > 0 {
		// Flags anywhere, each subcommand's own, and its environment.
		pos, err = parseCommandLine(fs, cmd.subs, args[1:], os.LookupEnv)
	} else if err = fs.Parse(args[1:]); err == nil {
		pos, err = fs.Args(), applyEnv(fs, os.LookupEnv)
	} else if !errors.Is(err, flag.ErrHelp) {
		err = flagError(fs, err)
	}
	fs.SetOutput(stderr)
	if err != nil {
		// --help after a subcommand, or after its arguments: the
		// positional arguments before it say whose usage it asks for.
		var help helpRequest
		if errors.As(err, &help) || errors.Is(err, flag.ErrHelp) {
			return printHelpOf(stdout, stderr, cmd, fs, help.before)
		}
		fmt.Fprintf(stderr, "tenure %s: %v\n", cmd.name, err)
		return 2
	}
	if err := runCmd(ctx, pos); err != nil {
		// Errors of the command's packages may begin with its name
		// (sim: bad scenario): once is enough.
		fmt.Fprintf(stderr, "tenure %s: %s\n", cmd.name, strings.TrimPrefix(err.Error(), cmd.name+": "))
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks an error in the command line (rather than a failure of
// the command), which exits with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }
