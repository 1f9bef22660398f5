package main

import (
	"flag"
	"slices"
	"testing"
)

// TestParseInterleaved: flags anywhere among the positional arguments,
// and "--" ending the flags, so that a member ID beginning with '-' can
// be named.
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		undo    bool
		wantErr bool
	}{
		{args: []string{"g", "m"}, pos: []string{"g", "m"}},
		{args: []string{"g", "--undo", "m"}, pos: []string{"g", "m"}, undo: true},
		{args: []string{"--undo", "g", "m"}, pos: []string{"g", "m"}, undo: true},
		{args: []string{"g", "--", "-Gwd"}, pos: []string{"g", "-Gwd"}},
		{args: []string{"g", "--undo", "--", "-Gwd", "--undo"}, pos: []string{"g", "-Gwd", "--undo"}, undo: true},
		{args: []string{"g", "-Gwd"}, wantErr: true},
	} {
		fs := flag.NewFlagSet("drain", flag.ContinueOnError)
		undo := fs.Bool("undo", false, "")
		pos, err := parseInterleaved(fs, tc.args)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v", tc.args, err)
			continue
		}
		if err == nil && (!slices.Equal(pos, tc.pos) || *undo != tc.undo) {
			t.Errorf("%q: positional %q undo %v, want %q %v", tc.args, pos, *undo, tc.pos, tc.undo)
		}
	}
}
