package main

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAnswers drives the server with a stock kgo client, as the
// benchmarks do: kgo negotiates versions (stepping ApiVersions down),
// finds the coordinator and gets a canned success for both heartbeats.
func TestAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(nc, host, int32(port))
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.Generation, hb.MemberID = "g", 3, "m"
	hr, err := hb.RequestWith(ctx, cl)
	if err != nil || hr.ErrorCode != 0 {
		t.Fatalf("Heartbeat: %v %+v", err, hr)
	}
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberID, cg.MemberEpoch = "g", "member-a", 7
	cr, err := cg.RequestWith(ctx, cl)
	if err != nil || cr.ErrorCode != 0 || cr.MemberID == nil || *cr.MemberID != "member-a" || cr.MemberEpoch != 7 {
		t.Fatalf("ConsumerGroupHeartbeat: %v %+v", err, cr)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(md.Brokers) != 1 || md.Brokers[0].Port != int32(port) {
		t.Fatalf("Metadata: %v %+v", err, md)
	}
}
