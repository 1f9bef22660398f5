package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/coordinator/web"
)

// httpServes is what the --http listener serves beyond the metrics and
// the status page, which it always serves.
type httpServes struct {
	admin bool // the admin API's drain (--admin-api)
	pprof bool // Go's runtime profiles at /debug/pprof/ (--enable-pprof)
}

// httpMux routes the --http listener: /metrics, reg's then more's; the
// admin API's drain, which logs its forwards to log, with adminOpts; the
// runtime profiles; and the status page (with the generation log).
func httpMux(reg *prometheus.Registry, more prometheus.Gatherers, src web.ServerSource, page http.Handler, serves httpServes, log *zap.Logger, adminOpts ...adminapi.Opt) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(append(prometheus.Gatherers{reg}, more...), promhttp.HandlerOpts{Registry: reg}))
	if serves.admin {
		adminapi.Register(mux, src.Server, append([]adminapi.Opt{adminapi.Logger(log)}, adminOpts...)...)
	}
	if serves.pprof {
		// On this mux, not http.DefaultServeMux (where importing the
		// package registers them too): only --enable-pprof serves them.
		mux.HandleFunc("/debug/pprof/", pprof.Index) // and the named profiles: heap, allocs, goroutine, mutex, block
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/", page)
	return mux
}

// defaultHTTP is --http's default: loopback, the port Redpanda's admin API
// uses too.
const defaultHTTP = "127.0.0.1:9644"

// httpSpec is what --http asks for.
type httpSpec struct {
	addr string
	// optional: the address is the default, and a node that finds it
	// taken serves without it.
	optional bool
}

// listenHTTP binds the --http listener; an empty address binds nothing
// (nil), and so does an optional one that is taken, with a warning. It is
// bound before the node joins an HA set, which registers the address,
// port 0 resolved.
func listenHTTP(spec httpSpec, log *zap.Logger) (net.Listener, error) {
	if spec.addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", spec.addr)
	if err != nil && spec.optional {
		log.Warn("no status page, metrics or admin API: the default --http address is taken (another node on this host?); give --http another address", zap.String("http", spec.addr), zap.Error(err))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	return ln, nil
}

// httpAdvertise is the address the other nodes of an HA set reach the
// HTTP listener bound at bound on: bound itself, or, when it is bound to
// every interface (0.0.0.0, [::]), the host of kafka (the host:port Kafka
// clients are told) with the HTTP port, since a node reachable there for
// Kafka is reachable there for HTTP too.
func httpAdvertise(bound net.Addr, kafka string) string {
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return bound.String()
	}
	khost, _, err := net.SplitHostPort(kafka)
	if ip := net.ParseIP(khost); err != nil || khost == "" || ip != nil && ip.IsUnspecified() {
		return bound.String()
	}
	return net.JoinHostPort(khost, port)
}

// serveHTTP serves the status page (package web), the admin API's drain
// (package adminapi, if serves.admin), the runtime profiles (if
// serves.pprof) and the Prometheus metrics at /metrics, reg's then
// more's, on ln until the returned function is called; a nil ln serves
// nothing. adminOpts configure the admin API.
func serveHTTP(ln net.Listener, serves httpServes, reg *prometheus.Registry, more prometheus.Gatherers, src web.ServerSource, log *zap.Logger, adminOpts ...adminapi.Opt) (stop func(), err error) {
	if ln == nil {
		return func() {}, nil
	}
	hlog := log.Named("http")
	// The http package logs what a client got wrong (a bad TLS hello, a
	// malformed request): worth a warning, not more.
	errLog, err := zap.NewStdLogAt(hlog, zap.WarnLevel)
	if err != nil {
		ln.Close()
		return nil, err
	}
	page := web.New(src, web.Logger(hlog))
	srv := &http.Server{
		Handler:           httpMux(reg, more, src, page, serves, hlog, adminOpts...),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// No WriteTimeout: event streams are long; each write of one
		// has its own deadline (package web).
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       errLog,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server failed", zap.Error(err))
		}
	}()
	base := "http://" + ln.Addr().String()
	fields := []zap.Field{zap.String("status", base+"/"), zap.String("metrics", base+"/metrics")}
	if serves.pprof {
		fields = append(fields, zap.String("pprof", base+"/debug/pprof/"))
	}
	log.Info("serving http", fields...)
	return func() {
		// Event streams never go idle: end them, or Shutdown would wait
		// out its timeout.
		page.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		<-done
	}, nil
}
