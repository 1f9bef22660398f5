package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// sampleRequest returns a request of key at version with a little content,
// for fuzz seeds.
func sampleRequest(key, version int16) kmsg.Request {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	topic := "jobs"
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		r.Topics = append(r.Topics, rt)
		r.AllowAutoTopicCreation = true
	case *kmsg.FetchRequest:
		r.MaxWaitMillis = 5
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
		r.Topics = append(r.Topics, rt)
	case *kmsg.ListOffsetsRequest:
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rt.Partitions = append(rt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
		r.Topics = append(r.Topics, rt)
	case *kmsg.JoinGroupRequest:
		r.Group, r.ProtocolType = "g", "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 1, 0, 0, 0, 1, 0, 4, 'j', 'o', 'b', 's'}
		r.Protocols = append(r.Protocols, p)
	case *kmsg.SyncGroupRequest:
		r.Group, r.MemberID = "g", "m"
	case *kmsg.HeartbeatRequest:
		r.Group, r.MemberID = "g", "m"
	case *kmsg.LeaveGroupRequest:
		r.Group, r.MemberID = "g", "m"
	case *kmsg.OffsetCommitRequest:
		r.Group, r.Generation = "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 7
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
	case *kmsg.OffsetFetchRequest:
		r.Group = "g"
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		r.Groups = append(r.Groups, rg)
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey = "g"
		r.CoordinatorKeys = []string{"g"}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		r.Group, r.MemberID, r.RebalanceTimeoutMillis = "g", "m", 10000
		r.SubscribedTopicNames = []string{topic}
	case *kmsg.CreateTopicsRequest:
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "created", 4, 1
		r.Topics = append(r.Topics, rt)
	case *kmsg.DeleteTopicsRequest:
		r.TopicNames = []string{topic}
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		r.Topics = append(r.Topics, rt)
	case *kmsg.DescribeGroupsRequest:
		r.Groups = []string{"g"}
	case *kmsg.DeleteGroupsRequest:
		r.Groups = []string{"g"}
	case *kmsg.ConsumerGroupDescribeRequest:
		r.Groups = []string{"g"}
	case *kmsg.OffsetDeleteRequest:
		r.Group = "g"
	case *kmsg.DescribeACLsRequest:
		r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.StringPtr("g"), kmsg.ACLResourcePatternTypeLiteral
		r.Principal, r.Operation, r.PermissionType = kmsg.StringPtr("User:a"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	case *kmsg.CreateACLsRequest:
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.Principal, cr.Host = kmsg.ACLResourceTypeTopic, topic, "User:a", "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		r.Creations = append(r.Creations, cr)
	case *kmsg.DeleteACLsRequest:
		df := kmsg.NewDeleteACLsRequestFilter()
		df.ResourceType, df.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeMatch
		df.Operation, df.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		r.Filters = append(r.Filters, df)
	case *kmsg.ApiVersionsRequest:
		r.ClientSoftwareName, r.ClientSoftwareVersion = "kgo", "1"
	}
	return req
}

// seedFrames is one encoded request frame body (no size prefix) for every
// served key and version.
func seedFrames() [][]byte {
	var out [][]byte
	id := "seed"
	for a := range served {
		for ver := a.min; ver <= a.max; ver++ {
			f := appendRequest(nil, 1, &id, sampleRequest(a.key, ver))
			out = append(out, f[4:])
		}
	}
	return out
}

// FuzzDecodeFrame: decoding never panics, and whatever decodes re-encodes
// to bytes that decode to the same encoding.
func FuzzDecodeFrame(f *testing.F) {
	for _, b := range seedFrames() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h, req, err := decodeFrame(body)
		if err != nil {
			return
		}
		if req.Key() != h.Key || req.GetVersion() != h.Version || !supported(h.Key, h.Version) {
			t.Fatalf("decoded %s v%d from header key %d v%d", kmsg.NameForKey(req.Key()), req.GetVersion(), h.Key, h.Version)
		}
		enc := appendRequest(nil, h.Corr, nil, req)[4:]
		_, req2, err := decodeFrame(enc)
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		enc2 := appendRequest(nil, h.Corr, nil, req2)[4:]
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzDecodeBody drives each request decoder directly: the key and version
// pick the decoder (served ones only), the fuzzer writes the body.
func FuzzDecodeBody(f *testing.F) {
	for a := range served {
		for ver := a.min; ver <= a.max; ver++ {
			req := sampleRequest(a.key, ver)
			body := req.AppendTo(nil)
			if req.IsFlexible() {
				body = append([]byte{0}, body...) // the header's tag section
			}
			f.Add(a.key, ver, body)
		}
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		if !supported(key, version) {
			return
		}
		req := kmsg.RequestForKey(key)
		if err := decodeBody(req, version, body); err != nil {
			return
		}
		// Whatever decodes can be answered: build the server's empty
		// answer and encode it.
		resp := req.ResponseKind()
		_ = appendResponse(nil, 1, resp)
	})
}

// FuzzConn sends arbitrary bytes down a real connection of a running
// server. The server must not panic, must stay up, and must keep serving a
// connection opened before the fuzz input and kept across inputs.
func FuzzConn(f *testing.F) {
	for _, b := range seedFrames() {
		f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	}
	// Pipelined: a held fetch, then an ApiVersions.
	var pipe []byte
	pipe = appendRequest(pipe, 1, nil, sampleRequest(1, 12))
	pipe = appendRequest(pipe, 2, nil, sampleRequest(18, 3))
	f.Add(pipe)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 20, 0, 3})

	ts := startServerLogger(f, zap.NewNop(), func(c *Config) {
		c.MaxFetchWait = 5 * time.Millisecond
		c.MaxFrameSize = 64 << 10
		c.WriteTimeout = time.Second
		c.Core.InitialRebalanceDelay = 0
	})
	control := dial(f, ts.addr)
	control.roundTrip(metadataRequest(12, "jobs"))

	f.Fuzz(func(t *testing.T, in []byte) {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(in); err != nil {
			return // the server may close before reading everything
		}
		nc.(*net.TCPConn).CloseWrite()
		// The server answers what it can and closes on EOF; drain until
		// then. A connection open after 5s means the server hung.
		if _, err := io.Copy(io.Discard, nc); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("server kept the connection open after the client's EOF")
			}
		}
		// The long-lived connection is unaffected.
		cc := *control
		cc.t = t
		resp := cc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("control connection: error %d", resp.ErrorCode)
		}
	})
}

// TestSeedFramesDecode: every served key and version decodes from its
// seed, so the fuzz corpora start from valid input.
func TestSeedFramesDecode(t *testing.T) {
	for _, b := range seedFrames() {
		if _, _, err := decodeFrame(b); err != nil {
			t.Fatalf("seed %x: %v", b[:4], err)
		}
	}
}
