package server

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame wraps body in a size prefix.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// rawHeader is a request header for key and version with client ID "x".
func rawHeader(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	return append(b, 'x')
}

func TestBadInput(t *testing.T) {
	const maxFrame = 64 << 10
	ts := startServer(t, func(c *Config) { c.MaxFrameSize = maxFrame })

	valid := func() []byte {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		return appendRequest(nil, 1, nil, req)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		// halfClose: the client stops sending after in (EOF mid-frame).
		halfClose bool
		// answers: valid responses that come before the close.
		answers int
	}{
		{name: "truncated frame", in: append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...), halfClose: true},
		{name: "truncated size", in: []byte{0, 0}, halfClose: true},
		{name: "size above the limit", in: binary.BigEndian.AppendUint32(nil, maxFrame+1)},
		{name: "size far above the limit", in: binary.BigEndian.AppendUint32(nil, 1<<31-1)},
		{name: "negative size", in: binary.BigEndian.AppendUint32(nil, 0xffffffff)},
		{name: "empty frame", in: frame(nil)},
		{name: "header shorter than its fixed part", in: frame([]byte{0, 18, 0, 0, 0})},
		{name: "client ID longer than the frame", in: frame(append(rawHeader(18, 0, 1)[:8], 0, 50, 'a'))},
		{name: "unknown API key", in: frame(rawHeader(9999, 0, 1))},
		{name: "negative API key", in: frame(rawHeader(-1, 0, 1))},
		{name: "API kmsg knows but tenure does not serve", in: frame(rawHeader(0, 9, 1))},
		{name: "unsupported version", in: frame(rawHeader(3, 13, 1))},
		{name: "version beyond kmsg", in: frame(rawHeader(12, 99, 1))},
		{name: "negative version", in: frame(rawHeader(12, -1, 1))},
		{name: "garbage after a valid header", in: frame(append(rawHeader(3, 12, 1), 0, 0xff, 0xff, 0xff, 0xff, 0xff))},
		{name: "garbage in flexible header tags", in: frame(append(rawHeader(12, 4, 1), 0xff, 0xff, 0xff, 0xff, 0x0f))},
		{name: "array length beyond the frame", in: frame(append(rawHeader(3, 4, 1), 0x7f, 0xff, 0xff, 0xff))},
		{name: "valid request then garbage", in: append(valid(), frame([]byte{1, 2, 3})...), answers: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts.addr)
			c.sent[1] = kmsg.NewPtrApiVersionsRequest()
			c.sent[1].SetVersion(0)
			c.write(tc.in)
			if tc.halfClose {
				c.nc.(*net.TCPConn).CloseWrite()
			}
			for range tc.answers {
				if _, resp := c.recv(); resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
					t.Fatalf("valid request answered with an error")
				}
			}
			c.expectClosed(5 * time.Second)
			checkAlive(t, ts.addr)
		})
	}
	if n := ts.metric(t, "tenure_limit_rejections_total", "limit", "frame_size"); n != 2 {
		t.Errorf("frame size rejections %v, want 2", n)
	}
	eventually(t, 5*time.Second, "all connections closed", func() bool { return ts.metric(t, "tenure_connections") == 0 })
}

// TestClientNeverReads: a client that pipelines requests and never reads
// the responses is cut off by the write timeout, without holding up
// anyone else.
func TestClientNeverReads(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	c := dial(t, ts.addr)
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "wide", 10000, 1
	create.Topics = append(create.Topics, rt)
	c.roundTrip(create)

	// Each answer is about 260 KB; 100 of them overflow any socket buffer.
	var batch []byte
	for i := range 100 {
		batch = appendRequest(batch, int32(100+i), nil, metadataRequest(12, "wide"))
	}
	go func() {
		// The server stops reading once it cannot write, so this write
		// may block until the server closes the connection.
		c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		c.nc.Write(batch)
	}()

	other := dial(t, ts.addr)
	for range 20 {
		start := time.Now()
		other.roundTrip(kmsg.NewPtrApiVersionsRequest())
		if d := time.Since(start); d > time.Second {
			t.Fatalf("another connection waited %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The cut comes once the server's answers fill both sockets' buffers
	// (several MB on loopback), which takes a while under -race.
	eventually(t, 30*time.Second, "the non-reading client to be cut off", func() bool {
		return ts.metric(t, "tenure_connections_closed_total", "reason", closeWrite) == 1
	})
	other.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

func TestLargeFrameWithinLimit(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)
	var names []string
	for i := range 400 {
		names = append(names, "topic-"+strings.Repeat("x", 20)+"-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	req := metadataRequest(12, names...)
	if n := len(appendRequest(nil, 1, nil, req)); n <= readBufferSize {
		t.Fatalf("request of %d bytes fits the read buffer; the test needs a larger one", n)
	}
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 400 || resp.Topics[399].ErrorCode != 0 {
		t.Fatalf("%d topics", len(resp.Topics))
	}
	// The connection is still in step afterwards.
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

func TestReadGrowing(t *testing.T) {
	src := strings.Repeat("0123456789", 30000)
	got, err := readGrowing(strings.NewReader(src), len(src))
	if err != nil || string(got) != src {
		t.Fatalf("read %d bytes, err %v", len(got), err)
	}
	if _, err := readGrowing(strings.NewReader(src[:100]), len(src)); err == nil {
		t.Fatal("short input read without error")
	}
}
