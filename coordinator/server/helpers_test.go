package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a running server on a loopback port.
type testServer struct {
	*Server
	addr  string            // the first listener's
	addrs map[string]string // every listener's, by name
	reg   *prometheus.Registry
	stop  func() // cancels Serve and waits for it to return
}

// startServer starts a server with test-friendly defaults, modified by
// mutate, and stops it when the test ends.
func startServer(t testing.TB, mutate func(*Config)) *testServer {
	t.Helper()
	return startServerLogger(t, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), mutate)
}

func startServerLogger(t testing.TB, log *zap.Logger, mutate func(*Config)) *testServer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Store = store.NewMemory()
	cfg.Logger = log
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.ShutdownTimeout = 2 * time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, reg: reg, addrs: make(map[string]string)}
	var lns []net.Listener
	for _, l := range cfg.listeners() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ts.addrs[l.Name] = ln.Addr().String()
	}
	ts.addr = lns[0].Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lns...) }()
	var once sync.Once
	ts.stop = func() {
		// Concurrent callers all wait for the first to finish.
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Serve did not return within 10s of cancellation")
			}
		})
	}
	t.Cleanup(ts.stop)
	return ts
}

// rawClient speaks the Kafka protocol by hand, so tests control every byte.
type rawClient struct {
	t    testing.TB
	nc   net.Conn
	br   *bufio.Reader
	corr int32
	// sent remembers the request of each correlation ID, to decode its
	// response.
	sent map[int32]kmsg.Request
}

func dial(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc), sent: make(map[int32]kmsg.Request)}
}

// send writes req at its set version and returns its correlation ID.
func (c *rawClient) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	id := "test"
	c.sent[c.corr] = req
	c.write(appendRequest(nil, c.corr, &id, req))
	return c.corr
}

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// recv reads one response and decodes it as the answer to the request
// sent under its correlation ID.
func (c *rawClient) recv() (int32, kmsg.Response) {
	c.t.Helper()
	corr, resp, err := c.tryRecv(5 * time.Second)
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return corr, resp
}

func (c *rawClient) tryRecv(timeout time.Duration) (int32, kmsg.Response, error) {
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, body); err != nil {
		return 0, nil, err
	}
	if len(body) < 4 {
		return 0, nil, errors.New("short response")
	}
	corr := int32(binary.BigEndian.Uint32(body))
	req, ok := c.sent[corr]
	if !ok {
		return corr, nil, errors.New("response to an unknown correlation ID")
	}
	delete(c.sent, corr)
	resp := req.ResponseKind()
	body = body[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	if r, ok := resp.(*kmsg.ApiVersionsResponse); ok && len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code {
		r.Version = 0 // KIP-511: the step-down answer is always v0
	}
	if err := resp.ReadFrom(body); err != nil {
		return corr, nil, err
	}
	return corr, resp, nil
}

// roundTrip sends req and returns its response.
func (c *rawClient) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	want := c.send(req)
	corr, resp := c.recv()
	if corr != want {
		c.t.Fatalf("got correlation ID %d, want %d", corr, want)
	}
	return resp
}

// expectClosed asserts that the server closes the connection (after
// possibly some responses) within timeout.
func (c *rawClient) expectClosed(timeout time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	_, err := io.Copy(io.Discard, c.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after %v", timeout)
	}
}

// checkAlive asserts that the server answers a new connection.
func checkAlive(t testing.TB, addr string) {
	t.Helper()
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apiVersionsKeys()) {
		t.Fatalf("ApiVersions: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	c.nc.Close()
}

func metadataRequest(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	req.AllowAutoTopicCreation = true
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func fetchRequest(version int16, wait time.Duration, topic string, partitions ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// metric reads a counter or gauge of the test registry; labels are
// name/value pairs.
func (ts *testServer) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	if m := ts.find(t, name, labels...); m != nil {
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// histSum is a histogram's sample count and sum.
type histSum struct{ count, sum float64 }

// histogram returns the count and sum of the named histogram.
func (ts *testServer) histogram(t testing.TB, name string, labels ...string) histSum {
	t.Helper()
	if m := ts.find(t, name, labels...); m != nil && m.Histogram != nil {
		return histSum{float64(m.Histogram.GetSampleCount()), m.Histogram.GetSampleSum()}
	}
	return histSum{}
}

// find returns the series of name with the given label pairs, or nil.
func (ts *testServer) find(t testing.TB, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// term returns the term the server coordinates groups in, waiting for
// Serve to load it.
func (ts *testServer) term(t testing.TB) *term {
	t.Helper()
	eventually(t, 10*time.Second, "the server to load its groups", func() bool { return ts.lead.Load() != nil })
	return ts.lead.Load()
}

// eventually polls cond until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
