//go:build unix

package interop

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// TestSetPortsUnderChurn starts the matrix's sets back to back and two at
// a time while another goroutine keeps binding and releasing loopback
// ports on port 0, as the other runs and sessions on a shared machine
// do. Every set must start and every node answer on its advertised
// (proxy) address and its HTTP address. Nodes told a port picked ahead
// (FreeAddr) failed here with "bind: address already in use": the churn
// took the port between the pick and the child's bind.
func TestSetPortsUnderChurn(t *testing.T) {
	if !*enabled {
		t.Skip("needs etcd and tenure built: runs with -interop or TENURE_INTEROP=1 (make interop)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the matrix's sets run on Linux")
	}
	bins := proctest.Build(t, "go.etcd.io/etcd/server/v3")
	tenure := *tenureBin
	if tenure == "" {
		tenure = proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure")[0]
	}
	etcd := startEtcd(t, bins[0])

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() { churnPorts(stop) })
	defer func() { close(stop); churn.Wait() }()

	cfg := func(name string) setConfig {
		return setConfig{tenure: tenure, etcd: etcd, prefix: "/interop/ports-" + name + "/", shards: 1,
			ttl: ttl, session: session, heartbeat: heartbeat, topic: topic, parts: partitions, logDir: t.TempDir()}
	}
	for round := range 3 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			for i := range 2 {
				t.Run(fmt.Sprint("set", i), func(t *testing.T) {
					t.Parallel()
					s := startSet(t, cfg(fmt.Sprintf("r%d-s%d", round, i)))
					for _, n := range s.nodes {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						_, err := findCoordinator(ctx, n, "g")
						cancel()
						if err != nil {
							t.Errorf("%s at %s (its proxy): %v", n.name, n.adv, err)
						}
						if err := getOK("http://" + n.http + "/metrics"); err != nil {
							t.Errorf("%s at %s (http): %v", n.name, n.http, err)
						}
					}
				})
			}
		})
	}
}

// churnPorts binds loopback listeners on port 0 and holds each for a
// while (the newest 2,000), releasing the oldest, until stop is closed.
func churnPorts(stop chan struct{}) {
	const held = 2000
	var ring [held]net.Listener
	defer func() {
		for _, ln := range ring {
			if ln != nil {
				ln.Close()
			}
		}
	}()
	for i := 0; ; i = (i + 1) % held {
		select {
		case <-stop:
			return
		default:
		}
		if ring[i] != nil {
			ring[i].Close()
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ring[i] = nil
			continue
		}
		ring[i] = ln
	}
}

// getOK GETs url and wants 200.
func getOK(url string) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
