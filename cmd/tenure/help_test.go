package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// TestHelpEverywhere asks for help in every way on every command and
// subcommand of the command table, so that a new one is covered: each
// prints its own usage to stdout and exits 0, with nothing on stderr.
func TestHelpEverywhere(t *testing.T) {
	type ask struct {
		args []string
		want string // the usage line's start
	}
	var asks []ask
	for _, c := range commands() {
		usage := "Usage: tenure " + c.name + " "
		for _, h := range []string{"--help", "-h", "-help"} {
			asks = append(asks, ask{[]string{c.name, h}, usage})
		}
		asks = append(asks, ask{[]string{"help", c.name}, usage})
		if len(c.subs) == 0 {
			continue
		}
		asks = append(asks, ask{[]string{c.name, "help"}, usage})
		for _, s := range c.subs {
			usage := "Usage: tenure " + c.name + " " + s.name + " "
			args := []string{c.name, s.name}
			// With its arguments, too: help comes before any check.
			for _, a := range s.args {
				args = append(args, strings.Trim(strings.TrimSuffix(a, "..."), "[]"))
			}
			for _, h := range []string{"--help", "-h"} {
				asks = append(asks, ask{[]string{c.name, s.name, h}, usage}, ask{append(slices.Clone(args), h), usage})
			}
			asks = append(asks,
				ask{[]string{c.name, "help", s.name}, usage},
				ask{[]string{"help", c.name, s.name}, usage},
				ask{[]string{c.name, "--timeout", "5s", s.name, "--help"}, usage})
		}
	}
	for _, a := range asks {
		t.Run(strings.Join(a.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), a.args, &stdout, &stderr); code != 0 {
				t.Errorf("exit %d, want 0; stderr:\n%s", code, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), a.want) {
				t.Errorf("stdout does not begin with %q:\n%s", a.want, stdout.String())
			}
			if !strings.Contains(stdout.String(), "Flags (environment variable in brackets):") {
				t.Errorf("stdout lacks the flags:\n%s", stdout.String())
			}
			if stderr.Len() > 0 {
				t.Errorf("stderr: %s", stderr.String())
			}
		})
	}
	if len(asks) < 100 {
		t.Errorf("only %d ways to ask for help: is the command table empty?", len(asks))
	}
}

// TestHelpOfUnknownSubcommand: help on a subcommand that does not exist
// is a usage error, which names the ones that do.
func TestHelpOfUnknownSubcommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"groups", "help", "rebalance"}, &stdout, &stderr); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), `unknown subcommand "rebalance"`) || !strings.Contains(stderr.String(), "what-if") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "tenure ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/tenure-dev/tenure", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "48c9c709b3d3"}, {Key: "vcs.time", Value: "2026-12-02T11:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}}
	got := versionLine(bi)
	for _, want := range []string{"tenure v1.4.0 commit 48c9c709b3d3 with uncommitted changes of 2026-12-02T11:00:00Z, go"} {
		if !strings.HasPrefix(got, want) {
			t.Errorf("versionLine = %q, want it to begin with %q", got, want)
		}
	}
	if got := versionLine(nil); !strings.HasPrefix(got, "tenure (devel) commit unknown") {
		t.Errorf("versionLine(nil) = %q", got)
	}
}
