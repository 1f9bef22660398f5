package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// TestClusterErrors points the commands that speak the Kafka protocol at
// addresses where no coordinator answers: each says what is there, in
// words a person can act on, and nothing of the client library's.
func TestClusterErrors(t *testing.T) {
	dead, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"groups list, nothing there", []string{"groups", "list", "--brokers", dead}, "nothing listens at " + dead},
		{"groups describe, nothing there", []string{"groups", "describe", "g", "--brokers", dead}, "nothing listens at " + dead},
		{"topics list, nothing there", []string{"topics", "list", "--brokers", dead}, "nothing listens at " + dead},
		{"users list, nothing there", []string{"users", "list", "--brokers", dead}, "nothing listens at " + dead},
		{"groups describe, an HTTP port", []string{"groups", "describe", "g", "--brokers", web.Listener.Addr().String(), "--timeout", "2s"},
			"speaks HTTP, not the Kafka protocol"},
		{"groups list, a silent port", []string{"groups", "list", "--brokers", silent.Addr().String(), "--timeout", "2s"},
			"accepts connections but did not answer within --timeout 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
			for _, internal := range []string{"shard errors", "context deadline exceeded", "unable to dial"} {
				if strings.Contains(stderr.String(), internal) {
					t.Errorf("stderr says %q:\n%s", internal, stderr.String())
				}
			}
		})
	}
}
