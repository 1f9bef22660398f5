package adminapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/server"
)

// ForwardedHeader marks a request one node forwarded to the leader; its
// value is the host the client reached the forwarding node at. A node
// never forwards a request that carries it, so a request crosses at most
// one hop however leadership moves meanwhile; a client may set it to get
// the node's own answer.
const ForwardedHeader = "Tenure-Forwarded-By"

// ForwardedToHeader, on an answer, names the admin API (host:port) of the
// leader that the node forwarded the request to and that gave the answer.
const ForwardedToHeader = "Tenure-Forwarded-To"

func forwarded(r *http.Request) bool { return r.Header.Get(ForwardedHeader) != "" }

// forwarder passes a request on to the leader's admin API: a reverse proxy
// of that one request, bounded by the timeout from the dial to the end of
// the answer.
type forwarder struct {
	log     *zap.Logger
	timeout time.Duration
	// transport ignores HTTP_PROXY (the nodes talk on their own network)
	// and keeps no idle connection: forwards are rare.
	transport http.RoundTripper
}

func newForwarder(c cfg) *forwarder {
	return &forwarder{log: c.log, timeout: c.timeout, transport: &http.Transport{
		DialContext:       (&net.Dialer{}).DialContext,
		DisableKeepAlives: true,
	}}
}

// forward sends r to leader's HTTP listener and copies its answer to w; a
// leader that cannot be reached or does not answer in time is a 502.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, leader server.Node) {
	target := &url.URL{Scheme: "http", Host: leader.HTTP}
	log := f.log.With(zap.String("path", r.URL.Path), zap.Int32("leader", leader.ID), zap.String("leader_http", leader.HTTP))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, r.Host)
		},
		Transport: f.transport,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(ForwardedToHeader, leader.HTTP)
			log.Info("forwarded an admin request to the leader", zap.Int("status", resp.StatusCode))
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %v", f.timeout)
			}
			log.Warn("cannot forward an admin request to the leader", zap.Error(err))
			writeError(w, http.StatusBadGateway, "unavailable",
				fmt.Sprintf("this node does not coordinate the group now; node %d at %s does, and forwarding the request to its admin API at %s failed: %v",
					leader.ID, leader.Addr, leader.HTTP, err), leader.Addr)
		},
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.timeout)
	defer cancel()
	proxy.ServeHTTP(w, r.WithContext(ctx))
}
