package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
)

// outputFormat is how a command prints its result: -o table (for people,
// the default) or -o json (for programs).
type outputFormat string

// The output formats.
const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (f *outputFormat) String() string { return string(*f) }

func (f *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case outputTable, outputJSON:
		*f = outputFormat(s)
		return nil
	}
	return fmt.Errorf("want table or json")
}

// addOutputFlag registers --output and its short form -o on fs.
func addOutputFlag(fs *flag.FlagSet) *outputFormat {
	f := new(outputFormat)
	*f = outputTable
	fs.Var(f, "output", "output `format`: table or json")
	fs.Var(aliasFlag{f, "output"}, "o", "short for --output")
	return f
}

// aliasFlag is the value of a flag that is another name of the flag
// target: both set the same value. It has no environment variable of its
// own (applyEnv), and giving it on the command line counts as giving the
// target, so that the environment does not override it.
type aliasFlag struct {
	flag.Value
	target string
}

func (a aliasFlag) aliasOf() string { return a.target }

// result is what a command prints: a value that encoding/json renders as
// the command's documented JSON shape (snake_case keys) and that renders
// itself as a table for people.
type result interface {
	// writeTable writes the result for people. w is a tabwriter: cells
	// end with a tab, and a line without a tab ends a block of aligned
	// columns.
	writeTable(w io.Writer)
}

// writeResult writes r to w in format f: one indented JSON document, or
// r's table aligned in columns two spaces apart.
func writeResult(w io.Writer, f outputFormat, r result) error {
	if f == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	r.writeTable(tw)
	return tw.Flush()
}
