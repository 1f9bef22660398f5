package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The embedded server's limits, raised from etcd's defaults (128 operations,
// 1.5 MiB) because nothing else shares it: a large Ready, or a batch of
// many groups' commits, fits in one transaction and one fsync.
const (
	embeddedMaxTxnOps       = 10000
	embeddedMaxRequestBytes = 8 << 20
	// embeddedMaxTxnBytes leaves room under the request limit for the
	// estimate's error.
	embeddedMaxTxnBytes = 6 << 20
	// grpcOverheadBytes is what etcd adds to MaxRequestBytes for its gRPC
	// server's receive limit (embed: grpcOverheadBytes); the client's send
	// limit matches it.
	grpcOverheadBytes = 512 * 1024

	// DefaultCompactionRetention is the embedded server's default
	// compaction retention.
	DefaultCompactionRetention = time.Minute
)

// EmbeddedOpt configures StartEmbedded.
type EmbeddedOpt interface{ applyEmbedded(*embeddedCfg) }

type embeddedOpt func(*embeddedCfg)

func (o embeddedOpt) applyEmbedded(c *embeddedCfg) { o(c) }

type embeddedCfg struct {
	retention time.Duration
}

// CompactionRetention sets how much history the embedded server keeps,
// overriding the default of one minute. The store overwrites its keys in
// place, and etcd keeps every old version until it compacts, so the
// history grows with the write rate: etcd's periodic compactor (v3compactor
// Periodic) compacts every retention period to the revision of one
// retention ago, so between one and two retentions of writes are kept. A
// minute is far more than a Load needs (it reads at one revision, and
// starts again if that revision is compacted under it).
func CompactionRetention(d time.Duration) EmbeddedOpt {
	return embeddedOpt(func(c *embeddedCfg) { c.retention = d })
}

// Embedded is a single-member etcd server in this process, with its data
// in a directory: the store of a tenure that runs alone.
type Embedded struct {
	e   *embed.Etcd
	cli *clientv3.Client
	dir string
	log *zap.Logger
	// closing quiets the shutdown noise of etcd's listeners.
	closing *atomic.Bool

	closeOnce sync.Once
}

// StartEmbedded starts an etcd server with its data in dir (created if
// missing; an existing one is reopened with its data) and returns once it
// serves. It listens for clients and peers on loopback ports the kernel
// chooses, so several run side by side; the peer URL recorded in the
// member list is the stable "http://127.0.0.1:0", because a single member
// never dials it and etcd ignores the configured one on a restart anyway.
// Every write is fsynced before it is acknowledged. etcd's own logs go to
// log, named "etcd", from warn level up. Use Client for a client and
// StoreOpts with New; Close stops it.
func StartEmbedded(ctx context.Context, dir string, log *zap.Logger, opts ...EmbeddedOpt) (*Embedded, error) {
	ec := embeddedCfg{retention: DefaultCompactionRetention}
	for _, o := range opts {
		o.applyEmbedded(&ec)
	}
	if ec.retention <= 0 {
		return nil, fmt.Errorf("%w: compaction retention %v must be positive", ErrInvalidOption, ec.retention)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: data dir: %w", err)
	}
	_, statErr := os.Stat(filepath.Join(abs, "member"))
	existing := statErr == nil
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("etcdstore: data dir: %w", err)
	}

	closing := new(atomic.Bool)
	elog := log.Named("etcd").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &quietCore{Core: c, closing: closing}
	}))
	cfg := embed.NewConfig()
	cfg.Name = "tenure"
	cfg.Dir = abs
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(elog)
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.MaxTxnOps = embeddedMaxTxnOps
	cfg.MaxRequestBytes = embeddedMaxRequestBytes
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = ec.retention.String()
	cfg.UnsafeNoFsync = false // durability is the point

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: starting embedded etcd in %s: %w", abs, err)
	}
	m := &Embedded{e: e, dir: abs, log: log, closing: closing}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		m.stop()
		return nil, fmt.Errorf("etcdstore: embedded etcd in %s: %w", abs, err)
	case <-ctx.Done():
		m.stop()
		return nil, fmt.Errorf("etcdstore: embedded etcd in %s not ready: %w", abs, context.Cause(ctx))
	}
	endpoint := e.Clients[0].Addr().String()
	m.cli, err = clientv3.New(clientv3.Config{
		Endpoints:          []string{endpoint},
		DialTimeout:        5 * time.Second,
		MaxCallSendMsgSize: embeddedMaxRequestBytes + grpcOverheadBytes,
		Logger: log.Named("etcd-client").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return &quietCore{Core: c, closing: closing}
		})),
		Context: context.WithoutCancel(ctx),
	})
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("etcdstore: client of embedded etcd: %w", err)
	}
	log.Info("embedded etcd started", zap.String("data_dir", abs), zap.Bool("existing_data", existing),
		zap.String("endpoint", "http://"+endpoint), zap.Bool("fsync", true),
		zap.Duration("compaction_retention", ec.retention))
	return m, nil
}

// Client returns a client of the server; it is the Embedded's, closed by
// Close.
func (m *Embedded) Client() *clientv3.Client { return m.cli }

// Endpoint returns the server's client URL, for etcdctl.
func (m *Embedded) Endpoint() string { return "http://" + m.e.Clients[0].Addr().String() }

// Dir returns the absolute path of the data directory.
func (m *Embedded) Dir() string { return m.dir }

// StoreOpts returns the options that match the server's raised limits, for
// New.
func (m *Embedded) StoreOpts() []Opt {
	return []Opt{MaxTxnOps(embeddedMaxTxnOps), MaxTxnBytes(embeddedMaxTxnBytes)}
}

// Close closes the client and stops the server, waiting for it. Calls
// after the first do nothing.
func (m *Embedded) Close() error {
	var err error
	m.closeOnce.Do(func() {
		if m.cli != nil {
			err = m.cli.Close()
			if errors.Is(err, context.Canceled) {
				err = nil
			}
		}
		m.stop()
		m.log.Info("embedded etcd stopped", zap.String("data_dir", m.dir))
	})
	return err
}

func (m *Embedded) stop() {
	m.closing.Store(true)
	m.e.Close()
}

// quietCore passes on etcd's warnings and errors, but not those that say
// nothing to a tenure operator: advice for a standalone production etcd at
// start, and the listeners' "errors" of a normal shutdown. It cuts long
// strings: etcd's slow-request warnings quote the whole request, 70 KB
// for a transaction of a thousand puts. (zap's IncreaseLevel would
// complain to stderr when the logger is already above warn.)
type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c *quietCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel && c.Core.Enabled(l) }

func (c *quietCore) With(fields []zapcore.Field) zapcore.Core {
	return &quietCore{Core: c.Core.With(fields), closing: c.closing}
}

func (c *quietCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	switch {
	case strings.HasPrefix(ent.Message, "Running http and grpc server on single port"),
		strings.HasPrefix(ent.Message, "simple token is not cryptographically signed"):
		return ce
	case c.closing.Load() && (strings.HasPrefix(ent.Message, "setting up serving from embedded etcd failed") ||
		strings.Contains(ent.Message, "grpc server due to error")):
		return ce
	}
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

// maxLogString is the longest string field of etcd's logs passed on whole.
const maxLogString = 1024

func (c *quietCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	cut := fields
	for i, f := range fields {
		if f.Type != zapcore.StringType || len(f.String) <= maxLogString {
			continue
		}
		if &cut[0] == &fields[0] {
			cut = slices.Clone(fields) // the caller's slice
		}
		cut[i].String = f.String[:maxLogString] + "... (" + strconv.Itoa(len(f.String)) + " bytes)"
	}
	return c.Core.Write(ent, cut)
}
