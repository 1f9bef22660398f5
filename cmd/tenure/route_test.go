package main

import (
	"context"
	"net"
	"strings"
	"testing"
)

func TestParseRoutes(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    routes
	}{
		{in: "", want: routes{}},
		{in: "127.0.0.1:9092=127.0.0.1:19092", want: routes{"127.0.0.1:9092": "127.0.0.1:19092"}},
		{in: "a:1=b:2, c:3=d:4", want: routes{"a:1": "b:2", "c:3": "d:4"}},
		{in: "a:1", err: "not host:port=host:port"},
		{in: "a:1=b", err: "not host:port=host:port"},
		{in: "=b:2", err: "not host:port=host:port"},
		{in: "a:1=b:2,a:1=c:3", err: "routed twice"},
	} {
		got, err := parseRoutes(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case len(got) != len(tc.want):
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		default:
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
				}
			}
		}
	}
}

// TestRouteDialer: an address with a route is dialed through it, any other
// directly.
func TestRouteDialer(t *testing.T) {
	listen := func() (net.Listener, chan struct{}) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		got := make(chan struct{}, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
				got <- struct{}{}
			}
		}()
		return ln, got
	}
	proxy, viaProxy := listen()
	direct, viaDirect := listen()
	dial := routes{"10.255.255.1:9092": proxy.Addr().String()}.dialer()
	for _, addr := range []string{"10.255.255.1:9092", direct.Addr().String()} {
		c, err := dial(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	<-viaProxy
	<-viaDirect
}
