// Command nologic is the benchmark baseline for tenure's Kafka-protocol
// server: a server with no group logic at all. It decodes every request
// with kmsg as tenure does and answers the few a heartbeating client needs
// (ApiVersions, Metadata, FindCoordinator, Heartbeat and
// ConsumerGroupHeartbeat) with canned successes; anything else closes the
// connection. It is what a Go server built on kmsg costs before it does
// any work, so the heartbeat benchmarks report tenure's cost against it.
//
// Each connection is served by one goroutine that reads, decodes, answers
// into a buffer and writes once per batch of pipelined requests.
//
//	nologic --listen 127.0.0.1:9092 [--cpuprofile file]
//
// It prints "listening on host:port" once it accepts connections and
// stops on SIGINT or SIGTERM.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/server/internal/cpuprof"
)

// partitions is the partition count of every topic Metadata names.
const partitions = 64

// served lists the APIs answered, with the version ranges tenure serves.
var served = map[int16][2]int16{
	3:  {0, 12}, // Metadata
	10: {0, 4},  // FindCoordinator
	12: {0, 4},  // Heartbeat
	18: {0, 3},  // ApiVersions
	68: {0, 1},  // ConsumerGroupHeartbeat
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9092", "`host:port` to accept clients on")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to `file` until stopped")
	flag.Parse()
	if err := run(*listen, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "nologic:", err)
		os.Exit(1)
	}
}

func run(listen, cpuprofile string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	stopProfile, err := cpuprof.Start(cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(nc, host, int32(port))
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	ln.Close()
	return nil
}

// conn holds one connection's reused request and response objects.
type conn struct {
	host string
	port int32

	hb       kmsg.HeartbeatRequest
	hbResp   kmsg.HeartbeatResponse
	cghb     kmsg.ConsumerGroupHeartbeatRequest
	cghbResp kmsg.ConsumerGroupHeartbeatResponse
}

func serve(nc net.Conn, host string, port int32) {
	defer nc.Close()
	c := &conn{host: host, port: port}
	br := bufio.NewReaderSize(nc, 64<<10)
	var wbuf []byte
	var body []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 10 || n > 1<<20 {
			return
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		var err error
		if wbuf, err = c.handle(wbuf, body); err != nil {
			return
		}
		if br.Buffered() == 0 {
			if _, err := nc.Write(wbuf); err != nil {
				return
			}
			wbuf = wbuf[:0]
		}
	}
}

var errBadRequest = errors.New("bad request")

// handle decodes one request frame and appends its response frame.
func (c *conn) handle(dst, body []byte) ([]byte, error) {
	key := int16(binary.BigEndian.Uint16(body[0:]))
	version := int16(binary.BigEndian.Uint16(body[2:]))
	corr := binary.BigEndian.Uint32(body[4:])
	idLen := int16(binary.BigEndian.Uint16(body[8:]))
	rest := body[10:]
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return dst, errBadRequest
		}
		rest = rest[idLen:]
	}
	r, ok := served[key]
	if key == 18 && version > r[1] {
		// KIP-511: a v0 UNSUPPORTED_VERSION answer with our range lets
		// the client step down.
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ErrorCode = 35 // UNSUPPORTED_VERSION
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = 18, r[0], r[1]
		resp.ApiKeys = append(resp.ApiKeys, ak)
		return appendResponse(dst, corr, key, resp), nil
	}
	if !ok || version < r[0] || version > r[1] {
		return dst, errBadRequest
	}
	var req kmsg.Request
	switch key {
	case 12:
		c.hb = kmsg.HeartbeatRequest{}
		req = &c.hb
	case 68:
		c.cghb = kmsg.ConsumerGroupHeartbeatRequest{}
		req = &c.cghb
	default:
		req = kmsg.RequestForKey(key)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		rd := kbin.Reader{Src: rest}
		kmsg.SkipTags(&rd)
		if !rd.Ok() {
			return dst, errBadRequest
		}
		rest = rd.Src
	}
	if err := req.ReadFrom(rest); err != nil {
		return dst, err
	}
	return appendResponse(dst, corr, key, c.answer(req)), nil
}

// appendResponse appends a response frame: size, correlation ID, the
// response header's tags (flexible versions, except ApiVersions, whose
// response header is always v0) and the body.
func appendResponse(dst []byte, corr uint32, key int16, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, corr)
	if resp.IsFlexible() && key != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// topicID is the ID of every topic.
var topicID = [16]byte{0x74, 0x65, 0x6e, 0x75, 0x72, 0x65, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

func (c *conn) answer(req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.HeartbeatRequest:
		c.hbResp = kmsg.HeartbeatResponse{Version: r.Version}
		return &c.hbResp
	case *kmsg.ConsumerGroupHeartbeatRequest:
		c.cghbResp = kmsg.ConsumerGroupHeartbeatResponse{Version: r.Version}
		c.cghbResp.MemberID = &r.MemberID
		c.cghbResp.MemberEpoch = max(r.MemberEpoch, 1)
		c.cghbResp.HeartbeatIntervalMillis = 5000
		return &c.cghbResp
	case *kmsg.ApiVersionsRequest:
		resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range []int16{3, 10, 12, 18, 68} {
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, served[k][0], served[k][1]
			resp.ApiKeys = append(resp.ApiKeys, ak)
		}
		return resp
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, c.host, c.port
		resp.Brokers = append(resp.Brokers, b)
		resp.ClusterID = kmsg.StringPtr("nologic")
		for _, rt := range r.Topics {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.TopicID = rt.Topic, topicID
			for p := range int32(partitions) {
				mp := kmsg.NewMetadataResponseTopicPartition()
				mp.Partition, mp.Leader, mp.Replicas, mp.ISR = p, 0, []int32{0}, []int32{0}
				t.Partitions = append(t.Partitions, mp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.NodeID, resp.Host, resp.Port = 0, c.host, c.port
		keys := r.CoordinatorKeys
		if r.Version < 4 {
			return resp
		}
		for _, k := range keys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.NodeID, rc.Host, rc.Port = k, 0, c.host, c.port
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		return resp
	}
	panic(fmt.Sprintf("nologic: no answer for %T", req))
}
