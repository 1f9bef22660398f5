package etcdfence_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// endpoints are the client URLs of the embedded etcd server that TestMain
// starts and every test and example in the package shares.
var endpoints []string

// TestMain runs the package's tests against a real, embedded, single-member
// etcd server, then checks that neither the tests nor the stopped server left
// goroutines behind.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	e, dir, err := startEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdfence: starting embedded etcd:", err)
		return 1
	}
	code := m.Run()
	e.Close()
	os.RemoveAll(dir)
	if code != 0 {
		return code
	}
	// The closed server and the tests' clients leave nothing running.
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdfence: leaked goroutines:", err)
		return 1
	}
	return 0
}

// startEtcd starts an etcd server on loopback ports chosen by the kernel, in
// a temporary directory, tuned for tests: short raft timings and no fsync
// (its data is thrown away).
func startEtcd() (*embed.Etcd, string, error) {
	dir, err := os.MkdirTemp("", "etcdfence-test-")
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "etcdfence-test"
	cfg.Dir = dir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		os.RemoveAll(dir)
		return nil, "", err
	case <-time.After(30 * time.Second):
		e.Close()
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("not ready after 30s")
	}
	endpoints = []string{"http://" + e.Clients[0].Addr().String()}
	return e, dir, nil
}

// newClient returns a client of the embedded server, closed when t ends.
func newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test in this run uses.
func uniquePrefix(name string) string {
	return "/test/" + name + "/" + strconv.FormatInt(prefixSeq.Add(1), 10)
}

// testContext returns a context that ends with the test, or after 20s so a
// wedged server fails the test instead of hanging it.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
