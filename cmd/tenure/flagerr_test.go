package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFlagErrors: a mistyped command line gets one line that says what is
// wrong and what was probably meant, last, with no usage dump above or
// below it.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--listn", "x"}, []string{"unknown flag --listn", "did you mean --listen?"}},
		{[]string{"serve", "--consumer-session-timeout", "5"}, []string{`invalid value "5" for --consumer-session-timeout`, "missing unit", "300ms, 5s, 1m"}},
		{[]string{"worker", "--group"}, []string{"flag --group needs a value"}},
		{[]string{"worker", "--brokers=x", "--zzzzzzzz"}, []string{"unknown flag --zzzzzzzz"}},
		{[]string{"groups", "list", "--brokr", "x"}, []string{"unknown flag --brokr", "did you mean --brokers?"}},
		{[]string{"topics", "list", "--bootstrap-server", "x"}, []string{"unknown flag --bootstrap-server", "tenure's name for it is --brokers"}},
		{[]string{"groups", "describe", "--bootstrap", "x"}, []string{"unknown flag --bootstrap", "tenure's name for it is --brokers"}},
		{[]string{"tune", "--seeds", "many"}, []string{`invalid value "many" for --seeds`}},
		{[]string{"serve", "--enable-pprof=on"}, []string{`invalid value "on" for --enable-pprof`, "--enable-pprof (true) or --enable-pprof=false"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2", tc.args, code)
		}
		out := stderr.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, out)
			}
		}
		if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 || strings.Contains(out, "Usage") {
			t.Errorf("%q: want one line and no usage, got:\n%s", tc.args, out)
		}
		if strings.Contains(out, "did you mean") && strings.Contains(tc.args[1], "zzzz") {
			t.Errorf("%q: a suggestion for a name near nothing: %s", tc.args, out)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"listen", "listn", 1}, {"brokers", "brokr", 2}, {"kitten", "sitting", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
