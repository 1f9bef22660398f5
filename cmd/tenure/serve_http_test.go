package main

import (
	"net"
	"testing"
)

// TestHTTPAdvertise: the HTTP address a node registers in an HA set is
// the one it bound, unless that is every interface: then the host Kafka
// clients are told, with the HTTP port, if that host is any better.
func TestHTTPAdvertise(t *testing.T) {
	for _, tc := range []struct {
		bound, kafka, want string
	}{
		{"127.0.0.1:9644", "127.0.0.1:9092", "127.0.0.1:9644"},
		{"10.0.0.1:9644", "tenure-0.internal:9092", "10.0.0.1:9644"},
		{"0.0.0.0:9644", "tenure-0.internal:9092", "tenure-0.internal:9644"},
		{"[::]:9644", "10.0.0.1:9092", "10.0.0.1:9644"},
		{"[::]:9644", "[fd00::1]:9092", "[fd00::1]:9644"},
		{"0.0.0.0:9644", "0.0.0.0:9092", "0.0.0.0:9644"},
		{"0.0.0.0:9644", ":9092", "0.0.0.0:9644"},
	} {
		bound, err := net.ResolveTCPAddr("tcp", tc.bound)
		if err != nil {
			t.Fatal(err)
		}
		if got := httpAdvertise(bound, tc.kafka); got != tc.want {
			t.Errorf("bound %s, Kafka %s: %s, want %s", tc.bound, tc.kafka, got, tc.want)
		}
	}
}
