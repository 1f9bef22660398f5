package server

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator/store"
)

// observed starts a server whose debug logs a test can read.
func observed(t testing.TB, mutate func(*Config)) (*testServer, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	return startServerLogger(t, zap.New(core), mutate), logs
}

// principals are the principals the server logged connections
// authenticating as, in order, on listener.
func principals(logs *observer.ObservedLogs, listener string) []string {
	var out []string
	for _, e := range logs.FilterMessage("authenticated").All() {
		if e.ContextMap()["listener"] == listener {
			out = append(out, e.ContextMap()["principal"].(string))
		}
	}
	return out
}

// TestListenersAdvertiseTheirOwn: a plaintext listener and a TLS one
// (mTLS) at once; Metadata and FindCoordinator answer each client with the
// address of the listener it came in on; the TLS client's principal is its
// certificate's subject in Kafka's form.
func TestListenersAdvertiseTheirOwn(t *testing.T) {
	tt := newTestTLS(t)
	clients := newTestCA(t, "clients")
	ts, logs := observed(t, func(c *Config) {
		c.Listeners = []Listener{
			{Name: "INTERNAL", Protocol: Plaintext},
			{Name: "EXTERNAL", Protocol: SSL, Advertise: "tenure.example:9094"},
		}
		c.TLS = tt.serverConfig(clients)
	})
	plain := dial(t, ts.addrs["INTERNAL"])
	alice := clients.Issue(pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}})
	secure, err := dialTLS(t, ts.addrs["EXTERNAL"], tt.clientConfig(alice.TLS))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    *rawClient
		host string
		port int32
	}{
		{plain, "127.0.0.1", portOf(t, ts.addrs["INTERNAL"])},
		{secure, "tenure.example", 9094},
	} {
		md := tc.c.roundTrip(metadataRequest(12)).(*kmsg.MetadataResponse)
		if len(md.Brokers) != 1 || md.Brokers[0].Host != tc.host || md.Brokers[0].Port != tc.port {
			t.Errorf("Metadata brokers %+v, want %s:%d", md.Brokers, tc.host, tc.port)
		}
		for _, v := range []int16{3, 4} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorKey, req.CoordinatorKeys = v, "g", []string{"g"}
			fc := tc.c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
			host, port := fc.Host, fc.Port
			if v == 4 {
				host, port = fc.Coordinators[0].Host, fc.Coordinators[0].Port
			}
			if host != tc.host || port != tc.port {
				t.Errorf("FindCoordinator v%d: %s:%d, want %s:%d", v, host, port, tc.host, tc.port)
			}
		}
	}
	if got := principals(logs, "EXTERNAL"); len(got) != 1 || got[0] != "User:CN=alice,OU=eng,O=acme" {
		t.Errorf("principals on the TLS listener: %q", got)
	}
	if got := principals(logs, "INTERNAL"); len(got) != 0 {
		t.Errorf("the plaintext listener authenticated %q; its clients are anonymous", got)
	}
}

func portOf(t testing.TB, addr string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var p int32
	for _, c := range port {
		p = p*10 + int32(c-'0')
	}
	return p
}

// TestNodeListeners: a node is listed to a client only if it has the
// client's listener, as Kafka does; a node without listeners (an older
// tenure) is listed at its address on every listener.
func TestNodeListeners(t *testing.T) {
	n := Node{ID: 1, Addr: "a:1", Listeners: map[string]string{"PLAINTEXT": "a:1", "SSL": "b:2"}}
	for _, tc := range []struct {
		node     Node
		listener string
		host     string
		port     int32
		ok       bool
	}{
		{n, "PLAINTEXT", "a", 1, true},
		{n, "SSL", "b", 2, true},
		{n, "OTHER", "", -1, false},
		{Node{ID: 2, Addr: "c:3"}, "SSL", "c", 3, true},
	} {
		host, port, ok := tc.node.hostPortOn(tc.listener)
		if host != tc.host || port != tc.port || ok != tc.ok {
			t.Errorf("%+v on %s: %s %d %v, want %s %d %v", tc.node, tc.listener, host, port, ok, tc.host, tc.port, tc.ok)
		}
	}
}

// TestCertPrincipal: subjects become principals as Kafka's default
// principal builder writes them (X500Principal.getName(), RFC 2253).
func TestCertPrincipal(t *testing.T) {
	oid := func(ids ...int) asn1.ObjectIdentifier { return ids }
	for _, tc := range []struct {
		name string
		rdns pkix.RDNSequence
		want string
	}{
		{"most specific first", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}, Country: []string{"US"}}.ToRDNSequence(),
			"CN=alice,OU=eng,O=acme,C=US"},
		{"escaped", pkix.Name{CommonName: `#a, "b"+c;<d>\ `}.ToRDNSequence(), `CN=\#a\, \"b\"\+c\;\<d\>\\\ `},
		{"multi-valued RDN", pkix.RDNSequence{{{Type: oid(2, 5, 4, 3), Value: "a"}, {Type: oid(0, 9, 2342, 19200300, 100, 1, 1), Value: "u1"}}},
			"CN=a+UID=u1"},
		{"domain components", pkix.RDNSequence{{{Type: oid(0, 9, 2342, 19200300, 100, 1, 25), Value: "com"}}, {{Type: oid(0, 9, 2342, 19200300, 100, 1, 25), Value: "example"}}, {{Type: oid(2, 5, 4, 3), Value: "svc"}}},
			"CN=svc,DC=example,DC=com"},
		{"other types by OID", pkix.RDNSequence{{{Type: oid(2, 5, 4, 5), Value: "42"}}},
			"2.5.4.5=#13023432"},
		{"empty", nil, ""},
	} {
		if got := rfc2253(tc.rdns); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCertReload: LoadTLS's files are replaced while the server runs; a
// new connection gets the new certificate, one already open stays open
// and served; files that do not load together (a certificate without its
// key yet) keep the previous certificate until they do.
func TestCertReload(t *testing.T) {
	tt := newTestTLS(t)
	dir := t.TempDir()
	first := tt.server
	certFile := writeFile(t, dir, "tls.crt", first.CertPEM)
	keyFile := writeFile(t, dir, "tls.key", first.KeyPEM)
	cfg, err := LoadTLS(TLSFiles{CertFile: certFile, KeyFile: keyFile}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "SSL", Protocol: SSL}}
		c.TLS = cfg
	})
	served := func() (*rawClient, int64) {
		t.Helper()
		c, err := dialTLS(t, ts.addr, tt.clientConfig())
		if err != nil {
			t.Fatal(err)
		}
		return c, c.nc.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	old, serial := served()
	if serial != first.Serial.Int64() {
		t.Fatalf("serial %d, want %d", serial, first.Serial.Int64())
	}

	second := tt.ca.Issue(pkix.Name{CommonName: "tenure"})
	writeFile(t, dir, "tls.crt", second.CertPEM) // the key is still the first's
	if _, serial := served(); serial != first.Serial.Int64() {
		t.Fatalf("a certificate without its key was taken: serial %d", serial)
	}
	writeFile(t, dir, "tls.key", second.KeyPEM)
	if _, serial := served(); serial != second.Serial.Int64() {
		t.Fatalf("after the rotation: serial %d, want %d", serial, second.Serial.Int64())
	}
	// The connection opened before is still served.
	if r := old.roundTrip(metadataRequest(12)).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatalf("the old connection's Metadata: %+v", r)
	}

	// Client CAs reload too: a file naming a CA makes client certificates
	// required from the next handshake on.
	clients := newTestCA(t, "clients")
	caFile := writeFile(t, dir, "ca.crt", clients.PEM())
	cfg2, err := LoadTLS(TLSFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	inner, err := cfg2.GetConfigForClient(nil)
	if err != nil || inner.ClientAuth != tls.RequireAndVerifyClientCert || inner.MinVersion != tls.VersionTLS12 {
		t.Fatalf("with a client CA: %+v %v", inner, err)
	}
	for _, files := range []TLSFiles{{CertFile: certFile}, {CertFile: keyFile, KeyFile: certFile}, {CertFile: certFile, KeyFile: keyFile, ClientCAFile: keyFile}} {
		if _, err := LoadTLS(files, nil); err == nil {
			t.Errorf("LoadTLS(%+v) loaded", files)
		}
	}
}

// TestKgoOverTLS: a stock kgo consumer group member with kgo.DialTLSConfig
// and a client certificate joins, is assigned every partition and commits,
// and kadm describes the group, all over mTLS.
func TestKgoOverTLS(t *testing.T) {
	tt := newTestTLS(t)
	clients := newTestCA(t, "clients")
	ts := startServer(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "SSL", Protocol: SSL}}
		c.TLS = tt.serverConfig(clients)
		c.DefaultPartitions = 4
		c.Core.InitialRebalanceDelay = 0
	})
	alice := clients.Issue(pkix.Name{CommonName: "alice"})
	kgoGroupRoundTrip(t, ts, kgo.DialTLSConfig(tt.clientConfig(alice.TLS)))
}

// kgoGroupRoundTrip creates topic "jobs" with kadm, joins a classic group
// with a stock kgo consumer, waits for all 4 partitions, commits one, and
// checks the commit and the group through kadm, every client made with
// opts.
func kgoGroupRoundTrip(t *testing.T, ts *testServer, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, ts, opts...))
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "jobs"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("CreateTopic: %v", err)
	}
	var mu sync.Mutex
	assigned := make(chan struct{})
	var once sync.Once
	cl := newKgo(t, ts, append([]kgo.Opt{
		kgo.ConsumerGroup("g"), kgo.ConsumeTopics("jobs"), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			if len(m["jobs"]) == 4 {
				once.Do(func() { close(assigned) })
			}
		}),
	}, opts...)...)
	go func() {
		for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
		}
	}()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("no assignment within 30 s")
	}
	if err := commitOne(ctx, cl, "jobs", 2, 7); err != nil {
		t.Fatalf("commit: %v", err)
	}
	offsets, err := adm.FetchOffsets(ctx, "g")
	if err != nil || offsets["jobs"][2].At != 7 {
		t.Fatalf("fetched offsets: %+v %v", offsets, err)
	}
	groups, err := adm.DescribeGroups(ctx, "g")
	if err != nil || len(groups["g"].Members) != 1 {
		t.Fatalf("described: %+v %v", groups, err)
	}
	cancel()
}

// TestSetListeners: in an HA set, a client is told of the nodes that have
// its listener, at their addresses on it, and is sent to the leader on it;
// a leader without the client's listener is no coordinator the client can
// reach (COORDINATOR_NOT_AVAILABLE), as in Kafka.
func TestSetListeners(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{
		{ID: 0, Addr: "a:1", Listeners: map[string]string{"INTERNAL": "a:1", "EXTERNAL": "a.example:9094"}},
		{ID: 1, Addr: "b:1", Listeners: map[string]string{"INTERNAL": "b:1"}},
		{ID: 2, Addr: "c:1", Listeners: map[string]string{"INTERNAL": "c:1", "EXTERNAL": "c.example:9094"}},
	}}
	na := set.node(0)
	a := startServer(t, func(c *Config) {
		c.Store, c.TopicStore, c.Cluster, c.TopicRefresh = nil, set.shared, na, 50*time.Millisecond
		c.Listeners = []Listener{{Name: "INTERNAL", Protocol: Plaintext}, {Name: "EXTERNAL", Protocol: Plaintext}}
	})
	internal, external := dial(t, a.addrs["INTERNAL"]), dial(t, a.addrs["EXTERNAL"])
	brokers := func(c *rawClient) string {
		var out []string
		for _, b := range c.roundTrip(metadataRequest(12)).(*kmsg.MetadataResponse).Brokers {
			out = append(out, fmt.Sprintf("%d=%s:%d", b.NodeID, b.Host, b.Port))
		}
		return strings.Join(out, " ")
	}
	coordinator := func(c *rawClient) string {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKeys = 4, []string{"g"}
		co := c.roundTrip(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
		return fmt.Sprintf("%s %d=%s:%d", errName(co.ErrorCode), co.NodeID, co.Host, co.Port)
	}
	if got := brokers(internal); got != "0=a:1 1=b:1 2=c:1" {
		t.Errorf("INTERNAL brokers: %s", got)
	}
	if got := brokers(external); got != "0=a.example:9094 2=c.example:9094" {
		t.Errorf("EXTERNAL brokers: %s", got)
	}
	set.setLeader(2)
	if got := coordinator(external); got != "NONE 2=c.example:9094" {
		t.Errorf("EXTERNAL coordinator, node 2 leading: %s", got)
	}
	set.setLeader(1)
	if got := coordinator(internal); got != "NONE 1=b:1" {
		t.Errorf("INTERNAL coordinator, node 1 leading: %s", got)
	}
	if got := coordinator(external); got != "COORDINATOR_NOT_AVAILABLE -1=:-1" {
		t.Errorf("EXTERNAL coordinator, node 1 (without EXTERNAL) leading: %s", got)
	}
}

// TestTLSProbeIsNoHandshakeFailure: a connection to a TLS listener closed
// before a byte (a peer's liveness probe, view.go) closes as an EOF, not
// as a failed handshake; one that sends garbage still fails its
// handshake.
func TestTLSProbeIsNoHandshakeFailure(t *testing.T) {
	tt := newTestTLS(t)
	ts := startServer(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "SSL", Protocol: SSL}}
		c.TLS = tt.serverConfig(nil)
	})
	if down, sure := probe(context.Background(), ts.addr, time.Second); down || !sure {
		t.Fatalf("probe of a live TLS listener: down %v, sure %v", down, sure)
	}
	eventually(t, 5*time.Second, "the probe's connection to close as an EOF", func() bool {
		return ts.metric(t, "tenure_connections_closed_total", "reason", closeEOF) == 1
	})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("not a client hello, not at all"))
	nc.Close()
	eventually(t, 5*time.Second, "garbage to fail the handshake", func() bool {
		return ts.metric(t, "tenure_connections_closed_total", "reason", closeTLS) == 1
	})
	if n := ts.metric(t, "tenure_connections_closed_total", "reason", closeEOF); n != 1 {
		t.Fatalf("%v connections closed as EOF, want the probe's only", n)
	}
}
