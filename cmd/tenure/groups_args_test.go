package main

import (
	"flag"
	"fmt"
	"slices"
	"testing"
)

// TestParseInterleaved: flags anywhere among the positional arguments,
// and "--" ending the flags, so that a member ID beginning with '-' can
// be named; an unknown flag that is nothing like one says so.
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		undo    bool
		wantErr string
	}{
		{args: []string{"g", "m"}, pos: []string{"g", "m"}},
		{args: []string{"g", "--undo", "m"}, pos: []string{"g", "m"}, undo: true},
		{args: []string{"--undo", "g", "m"}, pos: []string{"g", "m"}, undo: true},
		{args: []string{"g", "--", "-Gwd"}, pos: []string{"g", "-Gwd"}},
		{args: []string{"g", "--undo", "--", "-Gwd", "--undo"}, pos: []string{"g", "-Gwd", "--undo"}, undo: true},
		{args: []string{"g", "-Gwd"}, wantErr: "unknown flag -Gwd (see --help); an argument that begins with '-', such as a member ID, goes after --: drain g -- -Gwd"},
		{args: []string{"g", "--Gwd"}, wantErr: "unknown flag --Gwd (see --help); an argument that begins with '-', such as a member ID, goes after --: drain g -- --Gwd"},
		{args: []string{"g", "--partitons", "m"}, wantErr: "unknown flag --partitons (see --help)"},
		{args: []string{"g", "--undi", "m"}, wantErr: "unknown flag --undi; did you mean --undo? (see --help)"},
	} {
		fs := flag.NewFlagSet("drain", flag.ContinueOnError)
		undo := fs.Bool("undo", false, "")
		pos, err := parseInterleaved(fs, tc.args)
		if got := fmt.Sprint(err); err != nil && got != tc.wantErr || err == nil && tc.wantErr != "" {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && (!slices.Equal(pos, tc.pos) || *undo != tc.undo) {
			t.Errorf("%q: positional %q undo %v, want %q %v", tc.args, pos, *undo, tc.pos, tc.undo)
		}
	}
}
