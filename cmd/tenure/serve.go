package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// serveCommand is `tenure serve`: the coordinator on the network.
func serveCommand() *command {
	return &command{
		name:    "serve",
		summary: "run the coordinator: a Kafka-protocol group coordinator",
		help: `Stock Kafka clients (franz-go kgo, librdkafka, Java) join its groups with the
classic protocol or KIP-848 (kgo.ServerSideBalancer). Topics are virtual work
shards that hold no records, so a consumer's autocommit never fires: members
commit offsets explicitly (kgo Client.CommitOffsetsSync), and every commit is
fenced by the partition's token.`,
		setup: setupServe,
	}
}

func setupServe(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	def := server.DefaultConfig()
	var (
		listen        = fs.String("listen", "127.0.0.1:9092", "`host:port` to accept Kafka clients on")
		advertise     = fs.String("advertise", "", "`host:port` clients are told to connect to, in Metadata and FindCoordinator (default: the address bound by --listen)")
		partitions    = fs.Int("partitions", int(def.DefaultPartitions), "partitions of a topic created by Metadata auto-creation or by CreateTopics with -1")
		autoCreate    = fs.Bool("auto-create-topics", def.AutoCreateTopics, "create an unknown topic when a client asks for it in Metadata")
		metricsListen = fs.String("metrics-listen", "", "`host:port` to serve Prometheus metrics on at /metrics, e.g. 127.0.0.1:9644 (default: off)")
		minSession    = fs.Duration("min-session-timeout", def.Core.MinSessionTimeout, "smallest session timeout a classic member may ask for (Kafka group.min.session.timeout.ms)")
		maxSession    = fs.Duration("max-session-timeout", def.Core.MaxSessionTimeout, "largest session timeout a classic member may ask for (Kafka group.max.session.timeout.ms)")
		cSession      = fs.Duration("consumer-session-timeout", def.Core.ConsumerSessionTimeout, "session timeout of KIP-848 members (Kafka group.consumer.session.timeout.ms)")
		cHeartbeat    = fs.Duration("consumer-heartbeat-interval", def.Core.ConsumerHeartbeatInterval, "heartbeat interval told to KIP-848 members (Kafka group.consumer.heartbeat.interval.ms)")
		initialDelay  = fs.Duration("initial-rebalance-delay", def.Core.InitialRebalanceDelay, "how long a new or empty classic group waits for more members before its first rebalance (Kafka group.initial.rebalance.delay.ms)")
		assignors     = fs.String("assignors", strings.Join(assignor.Names(), ","), "comma-separated `list` of server-side assignors KIP-848 members may name, default first")
		maxGroupSize  = fs.Int("max-group-size", def.Core.MaxGroupSize, "most members of one group; a join beyond it is GROUP_MAX_SIZE_REACHED")
		maxPartitions = fs.Int("max-partitions", int(def.MaxPartitions), "most partitions of one topic; CreateTopics beyond it is INVALID_PARTITIONS")
		maxTopics     = fs.Int("max-topics", def.MaxTopics, "most topics; a creation beyond it is POLICY_VIOLATION")
		maxGroups     = fs.Int("max-groups", def.MaxGroups, "most groups; a request creating one more is COORDINATOR_NOT_AVAILABLE")
		maxConns      = fs.Int("max-connections", def.MaxConnections, "most client connections; one beyond it is closed on accept")
		maxFrame      = fs.Int("max-frame-size", int(def.MaxFrameSize), "largest request in `bytes`; a larger one closes its connection")
		idleTimeout   = fs.Duration("idle-timeout", def.IdleTimeout, "close a connection silent this long with nothing pending (Kafka connections.max.idle.ms)")
		writeTimeout  = fs.Duration("write-timeout", def.WriteTimeout, "close a connection whose client does not read its responses for this long")
		groupMetrics  = fs.Bool("per-group-metrics", def.PerGroupMetrics, "export generation, members and unowned partitions per group (three series per group)")
		storeKind     = fs.String("store", "memory", "where group state is persisted: memory (not durable: lost when the process exits)")
		logLevel      = fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	)
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		log, err := newLogger(fs.Output(), *logLevel)
		if err != nil {
			return err
		}
		defer log.Sync()

		cfg := def
		cfg.Logger = log
		cfg.Advertise = *advertise
		cfg.DefaultPartitions = int32(*partitions)
		cfg.AutoCreateTopics = *autoCreate
		cfg.MaxPartitions = int32(*maxPartitions)
		cfg.MaxTopics = *maxTopics
		cfg.MaxGroups = *maxGroups
		cfg.MaxConnections = *maxConns
		cfg.MaxFrameSize = int32(min(*maxFrame, 1<<31-1))
		cfg.IdleTimeout = *idleTimeout
		cfg.WriteTimeout = *writeTimeout
		cfg.PerGroupMetrics = *groupMetrics
		cfg.Core.MinSessionTimeout = *minSession
		cfg.Core.MaxSessionTimeout = *maxSession
		cfg.Core.ConsumerSessionTimeout = *cSession
		cfg.Core.ConsumerHeartbeatInterval = *cHeartbeat
		cfg.Core.InitialRebalanceDelay = *initialDelay
		cfg.Core.MaxGroupSize = *maxGroupSize
		cfg.Core.Assignors = nil
		for _, name := range strings.Split(*assignors, ",") {
			a, ok := assignor.ByName(strings.TrimSpace(name))
			if !ok {
				return usagef("unknown assignor %q (known: %s)", name, strings.Join(assignor.Names(), ", "))
			}
			cfg.Core.Assignors = append(cfg.Core.Assignors, a)
		}
		switch *storeKind {
		case "memory":
			cfg.Store = store.NewMemory()
		default:
			return usagef("unknown store %q (known: memory)", *storeKind)
		}
		defer cfg.Store.Close()

		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Registerer = reg
		if err := cfg.Validate(); err != nil {
			return usagef("%v", err)
		}
		srv, err := server.New(cfg)
		if err != nil {
			return err
		}
		if *storeKind == "memory" {
			log.Warn("group state is kept in memory only: generations, assignments and offsets are lost when this process exits, so fencing tokens restart from zero")
		}

		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		stopMetrics, err := serveMetrics(*metricsListen, reg, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopMetrics()
		return srv.Serve(ctx, ln)
	}
}

// newLogger logs to w in zap's console format at level.
func newLogger(w io.Writer, level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("invalid log level %q (debug, info, warn or error)", level)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeDuration = zapcore.StringDurationEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core), nil
}

// serveMetrics serves /metrics on addr until the returned function is
// called; an empty addr serves nothing.
func serveMetrics(addr string, reg *prometheus.Registry, log *zap.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", zap.Error(err))
		}
	}()
	log.Info("serving metrics", zap.String("metrics", "http://"+ln.Addr().String()+"/metrics"))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}
