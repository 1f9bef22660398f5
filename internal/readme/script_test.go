package readme

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// script holds an example script's directives, its "# readme:" lines:
//
//	# readme: live             the output differs from run to run: compare
//	                           it with the README by shape (see compare)
//	# readme: mask REGEXP      (live only) what varies between runs: each
//	                           match, or each capture group of one if the
//	                           expression has groups, reads as "*"
type script struct {
	path  string
	live  bool
	masks []*regexp.Regexp
}

const directive = "# readme:"

// parseScript reads the directives of the script at path, whose text is
// given. An unknown directive is an error, as is a mask without live.
// There is no directive for a server or tool: a reader pastes the
// examples' commands on a fresh machine, where there is only bin/tenure,
// and the test runs every one of them, skipping none.
func parseScript(path, text string) (script, error) {
	s := script{path: path}
	for i, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, directive)
		if !ok {
			continue
		}
		word, arg, _ := strings.Cut(strings.TrimSpace(rest), " ")
		arg = strings.TrimSpace(arg)
		bad := func(format string, args ...any) (script, error) {
			return script{}, fmt.Errorf("%s:%d: %s", path, i+1, fmt.Sprintf(format, args...))
		}
		switch {
		case word == "live" && arg == "":
			s.live = true
		case word == "needs":
			return bad("an example needs nothing but bin/tenure: a reader pastes its commands on a fresh machine (%s is what the example must bring up itself, or do without)", arg)
		case word == "mask" && arg != "":
			re, err := regexp.Compile(arg)
			if err != nil {
				return bad("mask: %v", err)
			}
			s.masks = append(s.masks, re)
		default:
			return bad("unknown directive %q: want live or mask REGEXP", strings.TrimSpace(l))
		}
	}
	if len(s.masks) > 0 && !s.live {
		return script{}, fmt.Errorf("%s: masks apply to live examples only: add # readme: live, or drop them", path)
	}
	return s, nil
}

func TestParseScript(t *testing.T) {
	s, err := parseScript("x.sh", "#!/usr/bin/env bash\n# readme: live\n# readme: mask \\d+\n# a comment\nrun 'x'\n")
	if err != nil {
		t.Fatal(err)
	}
	if !s.live || len(s.masks) != 1 || s.masks[0].String() != `\d+` {
		t.Fatalf("parsed %+v", s)
	}
	for _, tt := range []struct {
		name, text, want string
	}{
		{"unknown", "# readme: fast\n", `x.sh:1: unknown directive "# readme: fast"`},
		{"live with an argument", "# readme: live now\n", "x.sh:1: unknown directive"},
		{"needs a server", "# readme: needs postgres\n", "x.sh:1: an example needs nothing but bin/tenure"},
		{"empty mask", "# readme: live\n# readme: mask\n", "x.sh:2: unknown directive"},
		{"bad mask", "# readme: live\n# readme: mask (\n", "x.sh:2: mask: error parsing regexp"},
		{"mask of an exact example", "# readme: mask \\d+\n", "masks apply to live examples only"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScript("x.sh", tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}
