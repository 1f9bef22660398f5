//go:build unix

package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// etcdServer is the one etcd process every run of the matrix shares, each
// run under a prefix of its own.
type etcdServer struct {
	proc     *proctest.Process
	endpoint string // host:port
}

func startEtcd(t *testing.T, bin string) *etcdServer {
	// etcd is told both its ports, picked ahead with FreeAddr; either
	// may be taken before it binds it. Then it exits, or (its client
	// port taken by a listener) never answers: start it again on
	// fresh ports.
	var err error
	for range 3 {
		var e *etcdServer
		if e, err = tryEtcd(t, bin); err == nil {
			return e
		}
		t.Logf("etcd: %v; again on other ports", err)
	}
	t.Fatalf("etcd does not serve: %v", err)
	return nil
}

func tryEtcd(t *testing.T, bin string) (*etcdServer, error) {
	peer, err := proctest.FreeAddr()
	if err != nil {
		return nil, err
	}
	client, err := proctest.FreeAddr()
	if err != nil {
		return nil, err
	}
	p, err := proctest.StartOn("etcd", client, bin,
		"--name", "e0", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", "http://{addr}", "--advertise-client-urls", "http://{addr}",
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "e0=http://"+peer, "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + p.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		p.Stop()
		return nil, err
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Put(ctx, "/interop/ready", "1")
		cancel()
		if err == nil {
			break
		}
		if p.Exited() || time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%v\n%s", err, p.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("output of etcd:\n%s", p.Output())
		}
	})
	return &etcdServer{proc: p, endpoint: p.Addr}, nil
}

// node is one `tenure serve` of a set. Clients reach it through its
// client proxy, whose address it advertises; it reaches etcd through its
// etcd proxy, so that isolating it cuts both.
type node struct {
	name   string
	proc   *proctest.Process
	adv    string // the client proxy's address: what clients dial
	http   string
	client *toxiproxy.Proxy
	etcd   *toxiproxy.Proxy
	// relay is the client proxy's upstream, pointed at the node once it
	// has bound its port (proctest.Relay says why not Proxy.Update).
	relay *proctest.Relay
}

// set is a tenure HA set of three nodes on the shared etcd.
type set struct {
	t     *testing.T
	nodes []*node
	proxy *toxiproxy.ApiServer
}

// setConfig shapes a set.
type setConfig struct {
	tenure    string
	etcd      *etcdServer
	prefix    string
	shards    int
	ttl       time.Duration
	session   time.Duration
	heartbeat time.Duration
	topic     string
	parts     int32
	logDir    string
	debug     bool // nodes log at debug level
}

func newProxy(srv *toxiproxy.ApiServer, name, upstream string) (*toxiproxy.Proxy, error) {
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// What `tenure serve` logs once its listeners are bound: the Kafka
// listener's address and the HTTP status page's.
var (
	servingRE = regexp.MustCompile(`\tserving\t\{[^\n]*"listen": "([^"]+)"`)
	httpRE    = regexp.MustCompile(`\tserving http\t\{"status": "http://([^/"]+)/"`)
)

func startSet(t *testing.T, cfg setConfig) *set {
	s := &set{t: t, proxy: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())}
	t.Cleanup(func() {
		for _, n := range s.nodes {
			n.client.Stop()
			n.etcd.Stop()
			if n.relay != nil {
				n.relay.Close()
			}
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		// The proxies and the relay bind port 0 and hold their ports;
		// the node binds port 0 too and logs what it bound, and only
		// then is the relay behind its client proxy pointed at it.
		// Ports picked ahead (FreeAddr) and bound later by the child
		// were free only when picked: a set once failed with "bind:
		// address already in use", and parallel sessions churn loopback
		// ports all along. The proxy is never rebound: Proxy.Update
		// closes and binds its port again, and lost it so once.
		n := &node{name: fmt.Sprintf("n%d", i)}
		var err error
		if n.relay, err = proctest.NewRelay(); err != nil {
			t.Fatal(err)
		}
		if n.client, err = newProxy(s.proxy, n.name+"-client", n.relay.Addr()); err != nil {
			t.Fatal(err)
		}
		if n.etcd, err = newProxy(s.proxy, n.name+"-etcd", cfg.etcd.endpoint); err != nil {
			t.Fatal(err)
		}
		n.adv = n.client.Listen
		s.nodes = append(s.nodes, n)
		args := []string{"serve", "--listen", "127.0.0.1:0", "--advertise", n.adv, "--http", "127.0.0.1:0",
			"--etcd-endpoints", "http://" + n.etcd.Listen, "--etcd-prefix", cfg.prefix,
			"--election-ttl", cfg.ttl.String(), "--shards", strconv.Itoa(cfg.shards),
			"--consumer-session-timeout", cfg.session.String(), "--consumer-heartbeat-interval", cfg.heartbeat.String(),
			"--initial-rebalance-delay", "500ms", "--topic", fmt.Sprintf("%s:%d", cfg.topic, cfg.parts),
			"--log-level", nodeLogLevel(cfg.debug)}
		wg.Go(func() {
			p, err := proctest.StartUntil(n.name, cfg.tenure, func(out string) bool {
				return servingRE.MatchString(out) && httpRE.MatchString(out)
			}, args...)
			if err != nil {
				errs[i] = err
				return
			}
			n.proc = p
			out := p.Output()
			listen := servingRE.FindStringSubmatch(out)[1]
			n.http = httpRE.FindStringSubmatch(out)[1]
			n.relay.Point(listen)
		})
	}
	wg.Wait()
	for _, n := range s.nodes {
		if n.proc != nil {
			t.Cleanup(func() {
				n.proc.Stop()
				os.WriteFile(filepath.Join(cfg.logDir, n.name+".log"), []byte(n.proc.Output()), 0o644)
			})
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// seeds are the addresses every client is seeded with: every node's.
func (s *set) seeds() []string {
	var out []string
	for _, n := range s.nodes {
		out = append(out, n.adv)
	}
	return out
}

// byAdv returns the node that advertises addr.
func (s *set) byAdv(addr string) *node {
	for _, n := range s.nodes {
		if n.adv == addr {
			return n
		}
	}
	return nil
}

// findCoordinator asks node n, and only n, which node coordinates group.
func findCoordinator(ctx context.Context, n *node, group string) (*kmsg.FindCoordinatorResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.adv), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return req.RequestWith(cctx, cl.SeedBrokers()[0])
}

// coordinator is the node the live nodes name for group, once they agree.
func (s *set) coordinator(ctx context.Context, group string, timeout time.Duration) (*node, error) {
	deadline := time.Now().Add(timeout)
	for {
		var named string
		agree := true
		for _, n := range s.nodes {
			resp, err := findCoordinator(ctx, n, group)
			if err != nil {
				agree = false
				break
			}
			host, port := resp.Host, resp.Port
			code := resp.ErrorCode
			if len(resp.Coordinators) > 0 {
				host, port, code = resp.Coordinators[0].Host, resp.Coordinators[0].Port, resp.Coordinators[0].ErrorCode
			}
			a := fmt.Sprintf("%s:%d", host, port)
			if code != 0 || named != "" && a != named {
				agree = false
				break
			}
			named = a
		}
		if agree {
			if n := s.byAdv(named); n != nil {
				return n, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("the nodes agree on no coordinator of %s within %v", group, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fault is what happens to the group's coordinator; it is never undone.
type fault string

const (
	faultKill    fault = "kill9"   // SIGKILL
	faultStop    fault = "sigstop" // SIGSTOP, never resumed
	faultIsolate fault = "isolate" // every link to and from the node blackholed
	faultTerm    fault = "sigterm" // graceful stop
)

var allFaults = []fault{faultKill, faultStop, faultIsolate, faultTerm}

// inflict applies f to n. A dead node's address refuses connections
// afterwards, as a host whose process is gone does.
func (s *set) inflict(n *node, f fault) error {
	switch f {
	case faultKill:
		n.proc.Kill()
		n.client.Stop()
	case faultStop:
		return n.proc.Signal(syscall.SIGSTOP)
	case faultIsolate:
		for _, p := range []*toxiproxy.Proxy{n.client, n.etcd} {
			for _, stream := range []string{"upstream", "downstream"} {
				body := fmt.Sprintf(`{"name":"isolate-%s","type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, stream, stream)
				if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
					return err
				}
			}
		}
	case faultTerm:
		if err := n.proc.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		go func() {
			for !n.proc.Exited() {
				time.Sleep(20 * time.Millisecond)
			}
			n.client.Stop()
		}()
	default:
		return fmt.Errorf("unknown fault %q", f)
	}
	return nil
}
