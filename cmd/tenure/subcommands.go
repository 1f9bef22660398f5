package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
)

// parseCommandLine parses the command line args of a command with
// subcommands subs, whose flags are registered on fs, and returns its
// positional arguments: the subcommand and its arguments. Flags may come
// before or after the subcommand (parseInterleaved). The subcommand takes
// only the flags it reads (subcommand.flags): another subcommand's flag is
// refused with an error that names the subcommands it belongs to, and its
// environment variable is left alone, so that a variable exported for one
// subcommand does not break another. --help returns a helpRequest, as does
// the subcommand "help" (tenure groups help list).
//
// When args name no known subcommand, every flag is taken and none is set
// from the environment: the command's run function says what is missing.
func parseCommandLine(fs *flag.FlagSet, subs []subcommand, args []string, lookup func(string) (string, bool)) ([]string, error) {
	sub, ok := subcommandIn(fs, subs, args)
	if ok {
		scopeFlags(fs, subs, sub)
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 && pos[0] == "help" {
		return nil, helpRequest{before: pos[1:]}
	}
	if !ok {
		return pos, nil
	}
	if err := refuseForeign(fs); err != nil {
		return nil, err
	}
	if err := applyEnv(fs, lookup); err != nil {
		return nil, err
	}
	return pos, nil
}

// reads reports whether s reads the flag name of its command: every flag
// when s names none.
func (s subcommand) reads(name string) bool {
	return s.flags == nil || slices.Contains(s.flags, name)
}

// subcommandIn returns the subcommand that args name: their first
// positional argument, found as fs.Parse finds it (a flag that is not a
// boolean takes the next argument as its value), but without setting any
// flag. ok is false if there is none, or it is not one of subs, or a flag
// before it is wrong (the real parse says how).
func subcommandIn(fs *flag.FlagSet, subs []subcommand, args []string) (sub subcommand, ok bool) {
	dry := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	dry.SetOutput(io.Discard)
	fs.VisitAll(func(f *flag.Flag) { dry.Var(discardValue{isBoolFlag(f.Value)}, f.Name, "") })
	if dry.Parse(args) != nil || dry.NArg() == 0 {
		return subcommand{}, false
	}
	i := slices.IndexFunc(subs, func(s subcommand) bool { return s.name == dry.Arg(0) })
	if i < 0 {
		return subcommand{}, false
	}
	return subs[i], true
}

// discardValue is a flag value that takes anything and keeps nothing
// (subcommandIn's dry run).
type discardValue struct{ isBool bool }

func (discardValue) String() string     { return "" }
func (discardValue) Set(string) error   { return nil }
func (d discardValue) IsBoolFlag() bool { return d.isBool }

func isBoolFlag(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// scopeFlags makes fs the flag set of sub, one of subs: each flag of the
// command that sub does not read gets a foreignFlag for its value. It does
// nothing to a flag that already has one.
func scopeFlags(fs *flag.FlagSet, subs []subcommand, sub subcommand) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*foreignFlag); done {
			return
		}
		name := f.Name
		if a, ok := f.Value.(interface{ aliasOf() string }); ok {
			name = a.aliasOf() // -o goes with --output
		}
		if sub.reads(name) {
			return
		}
		ff := &foreignFlag{Value: f.Value, name: "--" + f.Name, cmd: commandOf(fs), sub: sub.name}
		if name != f.Name {
			ff.name = "-" + f.Name
		}
		for _, s := range subs {
			if s.reads(name) {
				ff.owners = append(ff.owners, s.name)
			}
		}
		f.Value = ff
	})
}

// foreignFlag stands in for a flag of the command that the subcommand on
// the command line does not read. It parses as the flag does (a boolean
// takes no value) but sets nothing, and refuseForeign refuses it once
// parsed, naming the subcommands it belongs to. It has no environment
// variable (applyEnv), and neither --help nor did-you-mean shows it.
type foreignFlag struct {
	flag.Value // the flag's own, which it leaves alone
	name       string
	cmd, sub   string   // the command line's
	owners     []string // the subcommands that read it
}

func (f *foreignFlag) Set(string) error { return nil }

func (f *foreignFlag) IsBoolFlag() bool { return isBoolFlag(f.Value) }

// refusal is the usage error for giving the flag.
func (f *foreignFlag) refusal() error {
	return usagef("unknown flag %s for %s %s (it is a flag of %s %s)", f.name, f.cmd, f.sub, f.cmd, joinAnd(f.owners))
}

// isForeign reports whether f stands for another subcommand's flag.
func isForeign(f *flag.Flag) bool {
	_, ok := f.Value.(*foreignFlag)
	return ok
}

// refuseForeign returns a usage error for the first flag given on the
// command line (in the order of their names) that its subcommand does not
// read.
func refuseForeign(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if ff, ok := f.Value.(*foreignFlag); ok && err == nil {
			err = ff.refusal()
		}
	})
	return err
}

// joinAnd lists names as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// flagNames are the names of the flags register registers, in their
// order: a subcommand's list of flags it reads that a shared helper
// (addAdminFlags) registers.
func flagNames(register func(fs *flag.FlagSet)) []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	register(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// parseInterleaved parses flags found anywhere in args and returns the
// positional arguments, in order. Everything after "--" is positional:
// member IDs are random and may begin with '-'.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	out := fs.Output()
	fs.SetOutput(io.Discard) // flagError says it, once
	defer fs.SetOutput(out)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{before: pos}
			}
			return nil, positionalHint(fs, err, pos, args)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		args = rest
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// positionalHint is flagError's line for an error of fs.Parse, with the
// way out added when the "unknown flag" is nothing like a flag of fs:
// most likely a member ID that begins with '-', which only "--" lets
// through. An argument near a flag's name, or made as flags' names are
// (lower-case letters and dashes), stays a typo of a flag.
// pos are the positional arguments before it, to show the command line.
func positionalHint(fs *flag.FlagSet, err error, pos, args []string) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if ok && !slices.Contains(args, name) {
		name = "-" + name // the flag package names --x as -x
	}
	word := strings.TrimLeft(name, "-")
	flagLike := strings.Trim(word, "abcdefghijklmnopqrstuvwxyz-") == "" // as every flag's name is
	if !ok || flagLike || closestFlag(fs, word) != "" || !slices.Contains(args, name) {
		return flagError(fs, err)
	}
	line := strings.Join(append(append([]string{fs.Name()}, pos...), "--", name), " ")
	return usagef("unknown flag %s (see --help); an argument that begins with '-', such as a member ID, goes after --: %s", name, line)
}
