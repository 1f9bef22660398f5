package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// isHelp reports whether arg asks for help as a flag does.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--h" || arg == "-help" || arg == "--help"
}

// helpRequest is returned by a command's run function for --help found
// among its arguments (parseInterleaved), after the positional arguments
// before: a subcommand and its arguments, whose usage it asks for.
type helpRequest struct{ before []string }

func (h helpRequest) Error() string { return "help requested" }

func (h helpRequest) Is(target error) bool { return target == flag.ErrHelp }

// printHelpOf prints the usage of the level args name: cmd's, or that of
// its subcommand args[0]. It returns the exit code.
func printHelpOf(stdout, stderr io.Writer, cmd *command, fs *flag.FlagSet, args []string) int {
	if len(args) == 0 || len(cmd.subs) == 0 {
		printCommandUsage(stdout, cmd, fs)
		return 0
	}
	i := slices.IndexFunc(cmd.subs, func(s subcommand) bool { return s.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "tenure %s: unknown subcommand %q: %s (see --help)\n", cmd.name, args[0], subNames(cmd.subs))
		return 2
	}
	printSubcommandUsage(stdout, cmd, cmd.subs[i], fs)
	return 0
}

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
	fmt.Fprintln(w, `Run "tenure <command> --help" for a command's flags, "tenure <command>`)
	fmt.Fprintln(w, `<subcommand> --help" for a subcommand's, "tenure --version" for the version.`)
	fmt.Fprintln(w, "Every flag can also be set by an environment variable: --session-timeout is")
	fmt.Fprintln(w, "TENURE_SESSION_TIMEOUT, but a flag that another command uses in another sense")
	fmt.Fprintln(w, "has a variable of its own: tenure worker --topic is TENURE_WORKER_TOPIC. Each")
	fmt.Fprintln(w, "command's --help names them.")
}

func printCommandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "Usage: tenure %s [flags] <subcommand> [arguments]\n\n%s\n", c.name, c.summary)
		fmt.Fprintf(w, "\nSubcommands (tenure %s <subcommand> --help for one's usage and the flags it takes):\n\n%s", c.name, subsHelp(c.subs))
	} else {
		fmt.Fprintf(w, "Usage: tenure %s [flags]\n\n%s\n", c.name, c.summary)
	}
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
	printFlags(w, fs)
}

// printSubcommandUsage prints the usage of sub, with the flags of its
// command that it reads (scopeFlags leaves out the others).
func printSubcommandUsage(w io.Writer, c *command, sub subcommand, fs *flag.FlagSet) {
	scopeFlags(fs, c.subs, sub)
	fmt.Fprintf(w, "Usage: tenure %s %s\n\n", c.name, strings.Join(append([]string{sub.name, "[flags]"}, sub.args...), " "))
	for _, line := range strings.Split(sub.help, "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprintf(w, "\nSee tenure %s --help for more on %s.\n", c.name, c.name)
	printFlags(w, fs)
}

// subsHelp lists subcommands, one entry each, their help beside their
// usage.
func subsHelp(subs []subcommand) string {
	width := 0
	for _, s := range subs {
		width = max(width, len(strings.Join(append([]string{s.name}, s.args...), " ")))
	}
	var b strings.Builder
	for _, s := range subs {
		usage := strings.Join(append([]string{s.name}, s.args...), " ")
		for i, line := range strings.Split(s.help, "\n") {
			if i > 0 {
				usage = ""
			}
			fmt.Fprintf(&b, "  %s\n", strings.TrimRight(fmt.Sprintf("%-*s  %s", width, usage, line), " "))
		}
	}
	return b.String()
}

func subNames(subs []subcommand) string {
	var names []string
	for _, s := range subs {
		names = append(names, s.name)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func printFlags(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "\nFlags (environment variable in brackets):\n")
	fs.VisitAll(func(f *flag.Flag) {
		if isForeign(f) {
			return // another subcommand's
		}
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

// printVersion prints the module's version and the commit it was built
// from, as the go command recorded them in the binary.
func printVersion(w io.Writer) {
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(w, versionLine(bi))
}

// versionLine describes the build bi (nil if the binary has no build
// information).
func versionLine(bi *debug.BuildInfo) string {
	version, commit, when, modified := "", "", "", false
	if bi != nil {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = "(devel)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tenure %s", version)
	if commit != "" {
		fmt.Fprintf(&b, " commit %s", commit)
		if modified {
			b.WriteString(" with uncommitted changes")
		}
		if when != "" {
			fmt.Fprintf(&b, " of %s", when)
		}
	} else {
		b.WriteString(" commit unknown (built without version control information: -buildvcs=false, or outside a git checkout)")
	}
	fmt.Fprintf(&b, ", %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}
