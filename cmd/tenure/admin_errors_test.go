package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

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

// TestGuardStopsOnHTTP: a command aimed at an HTTP port whose server waits
// for the end of a request line (as Go's does, so a Kafka request never
// gets an answer) is ended by guard's probe, long before a --timeout of
// ten minutes, and says what the port speaks.
func TestGuardStopsOnHTTP(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	a := addAdminFlags(fs)
	if err := fs.Parse([]string{"--brokers", web.Listener.Addr().String(), "--timeout", "10m"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cause error
	err := a.guard(ctx, func(ctx context.Context) error {
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	})
	var wrong *wrongProtocolError
	if !errors.As(cause, &wrong) {
		t.Fatalf("the exchange ended by %v, not by the probe", cause)
	}
	if err == nil || !strings.Contains(err.Error(), "speaks HTTP, not the Kafka protocol") {
		t.Fatalf("error %v does not say the port speaks HTTP", err)
	}
}

// TestProbeKafka: the probe is a Kafka request a Kafka listener answers, so
// a slow coordinator is never taken for another protocol's port.
func TestProbeKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	why, wrong := probeSeed(context.Background(), c.ListenAddrs()[0], time.Second)
	if wrong || !strings.Contains(why, "answers Kafka requests") {
		t.Fatalf("probe of a Kafka listener: %q, wrong protocol %v", why, wrong)
	}
}
