package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPAdvertise: the HTTP address a node registers in an HA set is
// the one it bound, unless that is every interface: then the host Kafka
// clients are told, with the HTTP port, if that host is any better.
func TestHTTPAdvertise(t *testing.T) {
	for _, tc := range []struct {
		bound, kafka, want string
	}{
		{"127.0.0.1:9644", "127.0.0.1:9092", "127.0.0.1:9644"},
		{"10.0.0.1:9644", "tenure-0.internal:9092", "10.0.0.1:9644"},
		{"0.0.0.0:9644", "tenure-0.internal:9092", "tenure-0.internal:9644"},
		{"[::]:9644", "10.0.0.1:9092", "10.0.0.1:9644"},
		{"[::]:9644", "[fd00::1]:9092", "[fd00::1]:9644"},
		{"0.0.0.0:9644", "0.0.0.0:9092", "0.0.0.0:9644"},
		{"0.0.0.0:9644", ":9092", "0.0.0.0:9644"},
	} {
		bound, err := net.ResolveTCPAddr("tcp", tc.bound)
		if err != nil {
			t.Fatal(err)
		}
		if got := httpAdvertise(bound, tc.kafka); got != tc.want {
			t.Errorf("bound %s, Kafka %s: %s, want %s", tc.bound, tc.kafka, got, tc.want)
		}
	}
}

// TestServePprof: the runtime profiles answer on the --http listener only
// with --enable-pprof; without it the listener knows no such path.
func TestServePprof(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			args := []string{"--store", "memory", "--http", "127.0.0.1:0"}
			if enabled {
				args = append(args, "--enable-pprof")
			}
			_, logs, stop := serveUntil(t, args...)
			var base string
			pollUntil(t, 10*time.Second, "serve reports its http address", func() string {
				if m := metricsRe.FindStringSubmatch(logs.String()); m != nil {
					base = strings.TrimSuffix(m[1], "/metrics")
					return ""
				}
				return "no http address logged yet"
			})
			if logged := strings.Contains(logs.String(), `"pprof": "`+base+`/debug/pprof/"`); logged != enabled {
				t.Errorf("the profiles' address logged: %v, want %v:\n%s", logged, enabled, logs.String())
			}
			for path, want := range map[string]string{
				"/debug/pprof/":                  "Types of profiles available",
				"/debug/pprof/goroutine?debug=1": "goroutine profile: total",
				"/debug/pprof/heap?debug=1":      "heap profile:",
				"/debug/pprof/cmdline":           "tenure",
				"/debug/pprof/profile?seconds=1": "", // gzipped protobuf
				"/debug/pprof/trace?seconds=0.1": "", // binary
				"/debug/pprof/symbol":            "num_symbols",
			} {
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case enabled && (resp.StatusCode != http.StatusOK || len(body) == 0 || !strings.Contains(string(body), want)):
					t.Errorf("GET %s: %s, %d bytes, want 200 and %q: %.200s", path, resp.Status, len(body), want, body)
				case !enabled && resp.StatusCode != http.StatusNotFound:
					t.Errorf("GET %s without --enable-pprof: %s, want 404: %.200s", path, resp.Status, body)
				}
			}
			if code := stop(); code != 0 {
				t.Fatalf("exit %d:\n%s", code, logs.String())
			}
		})
	}
}
