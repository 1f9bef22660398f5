package testenv

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// TenureConfig returns the configuration of a test coordinator (what
// `tenure serve` runs) with an in-memory store, its warnings and errors
// logged to t under the name "tenure", a 2 s shutdown timeout, the given
// KIP-848 session timeout and heartbeat interval, and topics created on
// first use with the given partition count. Change it before passing it to
// [StartTenure].
func TenureConfig(t testing.TB, session, interval time.Duration, partitions int32) server.Config {
	cfg := server.DefaultConfig()
	cfg.Store = store.NewMemory()
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("tenure")
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.DefaultPartitions = partitions
	cfg.Core.ConsumerSessionTimeout = session
	cfg.Core.ConsumerHeartbeatInterval = interval
	return cfg
}

// StartTenure runs a coordinator with cfg in-process on a loopback port
// chosen by the kernel, and returns the address to dial. The coordinator
// stops when t ends; t fails if it does not stop within 10 s or its Serve
// returns an error.
func StartTenure(t testing.TB, cfg server.Config) string {
	t.Helper()
	_, addr := StartTenureServer(t, cfg)
	return addr
}

// StartTenureServer is StartTenure, returning the server too, for tests
// that use its admin methods.
func StartTenureServer(t testing.TB, cfg server.Config) (*server.Server, string) {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("tenure: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tenure: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("tenure did not stop")
		}
	})
	return s, ln.Addr().String()
}
