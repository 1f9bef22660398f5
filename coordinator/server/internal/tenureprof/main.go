// Command tenureprof is `tenure serve` with a CPU profile, for the
// heartbeat benchmarks' -tenure.profiledir: the same server, built the
// same way (defaults, memory store, a Prometheus registry with the Go and
// process collectors), with only the flags the benchmarks set. It exists
// so that profiling needs no flag in the product's command line.
//
//	tenureprof --listen 127.0.0.1:9092 --cpuprofile tenure.pprof \
//	    [--consumer-session-timeout 60s] [--consumer-heartbeat-interval 5s]
//
// It stops, writing the profile, on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/server/internal/cpuprof"
	"github.com/tenure-dev/tenure/coordinator/store"
)

func main() {
	def := server.DefaultConfig()
	listen := flag.String("listen", "127.0.0.1:9092", "`host:port` to accept clients on")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to `file` until stopped")
	cSession := flag.Duration("consumer-session-timeout", def.Core.ConsumerSessionTimeout, "session timeout of KIP-848 members")
	cHeartbeat := flag.Duration("consumer-heartbeat-interval", def.Core.ConsumerHeartbeatInterval, "heartbeat interval told to KIP-848 members")
	flag.Parse()
	if err := run(def, *listen, *cpuprofile, *cSession, *cHeartbeat); err != nil {
		fmt.Fprintln(os.Stderr, "tenureprof:", err)
		os.Exit(1)
	}
}

func run(cfg server.Config, listen, cpuprofile string, cSession, cHeartbeat time.Duration) error {
	cfg.Core.ConsumerSessionTimeout = cSession
	cfg.Core.ConsumerHeartbeatInterval = cHeartbeat
	cfg.Store = store.NewMemory()
	defer cfg.Store.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registerer = reg
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	stopProfile, err := cpuprof.Start(cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return srv.Serve(ctx, ln)
}
