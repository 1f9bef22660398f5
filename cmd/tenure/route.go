package main

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// routes rewrites the addresses a Kafka client dials: --route of `tenure
// worker`, which a fault-injection test (tenure chaos) uses to put a proxy
// of its own between one client and each broker. The brokers still
// advertise their real addresses in Metadata and FindCoordinator; only this
// client's connections go through the proxies.
type routes map[string]string

// parseRoutes parses "host:port=host:port,...".
func parseRoutes(s string) (routes, error) {
	out := routes{}
	for _, pair := range splitList(s) {
		from, to, ok := strings.Cut(pair, "=")
		if !ok || !validHostPort(from) || !validHostPort(to) {
			return nil, usagef("--route: %q is not host:port=host:port", pair)
		}
		if _, dup := out[from]; dup {
			return nil, usagef("--route: %s is routed twice", from)
		}
		out[from] = to
	}
	return out, nil
}

func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	return err == nil && host != "" && port != ""
}

// dialer returns a dial function (for kgo.Dialer) that dials the route of
// an address that has one, and the address itself otherwise.
func (r routes) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := r[addr]; ok {
			c, err := d.DialContext(ctx, network, to)
			if err != nil {
				return nil, fmt.Errorf("dial %s through %s: %w", addr, to, err)
			}
			return c, nil
		}
		return d.DialContext(ctx, network, addr)
	}
}
