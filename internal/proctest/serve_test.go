package proctest

import (
	"slices"
	"testing"
)

func TestServeListeners(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		names []string
		first string
	}{
		{[]string{"serve", "--listen", "{addr}", "--http", "{http}"}, []string{"PLAINTEXT"}, "PLAINTEXT"},
		{[]string{"serve", "--listen={addr}"}, []string{"PLAINTEXT"}, "PLAINTEXT"},
		{[]string{"serve", "--listeners", "INTERNAL://{addr},SASL://{addr}"}, []string{"INTERNAL", "SASL"}, "INTERNAL"},
		{[]string{"serve", "--listeners=PLAINTEXT://127.0.0.1:9092,SSL://{addr}"}, []string{"PLAINTEXT", "SSL"}, "SSL"},
		{[]string{"serve", "--listen", "127.0.0.1:9092"}, []string{"PLAINTEXT"}, ""},
	} {
		names, first := serveListeners(tc.args)
		if !slices.Equal(names, tc.names) || first != tc.first {
			t.Errorf("serveListeners(%q) = %v, %q; want %v, %q", tc.args, names, first, tc.names, tc.first)
		}
	}
}

// TestServingLines reads the addresses from `tenure serve`'s own log lines,
// as its console encoder writes them (server.go, "serving"; the status
// page's "serving http").
func TestServingLines(t *testing.T) {
	out := "2026-12-03T05:32:14.277Z\tinfo\tserving http\t{\"status\": \"http://127.0.0.1:45131/\", \"metrics\": \"http://127.0.0.1:45131/metrics\"}\n" +
		"2026-12-03T05:32:14.278Z\tinfo\tserving\t{\"listener\": \"SASL\", \"protocol\": \"SASL_PLAINTEXT\", \"listen\": \"127.0.0.1:38343\", \"advertise\": \"127.0.0.1:38343\", \"node\": 1}\n"
	m := servingRE.FindStringSubmatch(out)
	if m == nil || m[1] != "SASL" || m[2] != "127.0.0.1:38343" {
		t.Errorf("serving line: %q", m)
	}
	if h := servingHTTPRE.FindStringSubmatch(out); h == nil || h[1] != "127.0.0.1:45131" {
		t.Errorf("serving http line: %q", h)
	}
}
