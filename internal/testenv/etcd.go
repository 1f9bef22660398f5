package testenv

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdReadyTimeout bounds how long a starting server may take to elect
// itself leader and serve.
const etcdReadyTimeout = 30 * time.Second

// Etcd is a running single-member etcd server, embedded in the test
// process.
type Etcd struct {
	// Endpoints are the server's client URLs, for clientv3.Config.
	Endpoints []string

	e        *embed.Etcd
	dir      string
	stopOnce sync.Once
}

// StartEtcd starts an etcd server on loopback ports chosen by the kernel,
// with its data in a new temporary directory, tuned for tests: short raft
// timings, no fsync (the data is thrown away), and only errors logged. It
// returns once the server serves; the caller must call [Etcd.Stop].
func StartEtcd() (*Etcd, error) {
	dir, err := os.MkdirTemp("", "tenure-etcd-test-")
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "tenure-test"
	cfg.Dir = dir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	// No gRPC gateway: the tests speak gRPC. Its mux, set up by a goroutine
	// of the server's, reads os.Stderr, which a TestMain's m.Run, after
	// the shared server started, replaces under go test -json: a data race.
	cfg.EnableGRPCGateway = false
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Etcd{e: e, dir: dir}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		s.Stop()
		return nil, err
	case <-time.After(etcdReadyTimeout):
		s.Stop()
		return nil, fmt.Errorf("etcd not ready after %v", etcdReadyTimeout)
	}
	s.Endpoints = []string{"http://" + e.Clients[0].Addr().String()}
	return s, nil
}

// EtcdForTest starts an etcd server as [StartEtcd] does, for t alone: it
// fails t if the server does not start, and stops it when t ends.
func EtcdForTest(t testing.TB) *Etcd {
	t.Helper()
	s, err := StartEtcd()
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Stop stops the server, waiting for it, and removes its data. Calls
// after the first do nothing.
func (s *Etcd) Stop() {
	s.stopOnce.Do(func() {
		s.e.Close()
		os.RemoveAll(s.dir)
	})
}

// Client returns a client of the server, closed when t ends. It fails t
// if the client cannot be made.
func (s *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
