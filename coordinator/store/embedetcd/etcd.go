package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
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
	// DefaultMemberName is the embedded member's name unless MemberName
	// sets another: the name every data dir made before clusters has.
	DefaultMemberName = "tenure"
	// DefaultClusterToken is the initial cluster token of a cluster of
	// embedded members unless InitialClusterToken sets another.
	DefaultClusterToken = "tenure"

	// endpointSyncInterval is how often the client of a cluster member
	// rereads the member list once every member has published its client
	// URL; until then it rereads sooner, from a second up.
	endpointSyncInterval = 30 * time.Second
	// quorumWaitInterval is how often a member waiting for a quorum says
	// so and asks its peers which cluster they serve.
	quorumWaitInterval = 3 * time.Second
	// peerProbeTimeout bounds one question to a peer.
	peerProbeTimeout = time.Second
)

// ErrInvalidOption is wrapped by Start's errors for bad options.
var ErrInvalidOption = errors.New("embedetcd: invalid option")

// Errors of Start for a member that cannot join the cluster it is
// given.
var (
	// ErrForeignDataDir is returned when the data dir holds another
	// member, or a cluster of its own where a member of the initial
	// cluster was asked for. etcd reads its membership from an existing
	// data dir and ignores the initial cluster, so starting anyway would
	// run the wrong member, or a second cluster beside the first.
	ErrForeignDataDir = errors.New("embedetcd: the data dir belongs to another etcd member or cluster")
	// ErrClusterMismatch is returned when so many peers serve another
	// cluster than this member's that it can never reach a quorum: the
	// members were bootstrapped with different initial clusters or tokens,
	// or some run on data dirs left from another cluster.
	ErrClusterMismatch = errors.New("embedetcd: the peers serve another etcd cluster")
)

// Opt configures Start.
type Opt interface{ apply(*startCfg) }

type optFunc func(*startCfg)

func (o optFunc) apply(c *startCfg) { o(c) }

type startCfg struct {
	retention    time.Duration
	name         string
	cluster      string // etcd's --initial-cluster; "" for a member on its own
	token        string // "" for DefaultClusterToken
	state        string // "" for "new"
	peerListen   string
	clientListen string
}

// CompactionRetention sets how much history the embedded server keeps,
// overriding the default of one minute. The store overwrites its keys in
// place, and etcd keeps every old version until it compacts, so the
// history grows with the write rate: etcd's periodic compactor (v3compactor
// Periodic) compacts every retention period to the revision of one
// retention ago, so between one and two retentions of writes are kept. A
// minute is far more than a Load needs (it reads at one revision, and
// starts again if that revision is compacted under it).
func CompactionRetention(d time.Duration) Opt {
	return optFunc(func(c *startCfg) { c.retention = d })
}

// MemberName names the embedded member, overriding "tenure"
// (DefaultMemberName). In a cluster it picks this member's entry of
// InitialCluster. A data dir keeps the name its member first started
// with; another name is ErrForeignDataDir.
func MemberName(name string) Opt {
	return optFunc(func(c *startCfg) { c.name = name })
}

// InitialCluster makes the embedded server one member of a cluster, in
// etcd's --initial-cluster syntax with one peer URL per member:
// "n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380,n3=http://10.0.0.3:2380".
// This member's entry, under MemberName, is the peer URL it advertises.
// The default is a cluster of this member alone, whose peer URL is a
// placeholder nobody dials. Like etcd, only the first start on a data dir
// uses it: later starts follow the membership in the data (etcdctl member
// add and remove change it), except that a data dir holding a cluster of
// one is refused for a cluster of several (ErrForeignDataDir). Every
// member must be given the same list and token. Peer traffic is plain
// HTTP without authentication: keep it on a private network.
func InitialCluster(spec string) Opt {
	return optFunc(func(c *startCfg) { c.cluster = spec })
}

// InitialClusterToken sets the token that, with the initial cluster, makes
// the IDs of a new cluster and its members, overriding "tenure"
// (DefaultClusterToken), so that two clusters bootstrapped on the same
// addresses refuse each other's traffic. It needs InitialCluster.
func InitialClusterToken(token string) Opt {
	return optFunc(func(c *startCfg) { c.token = token })
}

// InitialClusterState is "new" (the default) to bootstrap the initial
// cluster with its other members, or "existing" for a member on an empty
// data dir joining a running cluster it was added to with etcdctl member
// add: the way to replace a member whose data is lost. The initial
// cluster then lists every current member. It needs InitialCluster, and a
// data dir with data ignores it.
func InitialClusterState(state string) Opt {
	return optFunc(func(c *startCfg) { c.state = state })
}

// PeerListen sets the host:port on which the member accepts its peers,
// overriding the host and port of its entry in the initial cluster (or,
// when that host is a name, every interface on its port). The host is an
// IP address or localhost, as etcd binds nothing else. It needs
// InitialCluster.
func PeerListen(hostport string) Opt {
	return optFunc(func(c *startCfg) { c.peerListen = hostport })
}

// ClientListen sets the host:port on which the member serves etcd clients,
// overriding 127.0.0.1 with a port the kernel chooses. The member
// publishes it as its client URL (an unspecified host, 0.0.0.0 or ::,
// is published as its peer URL's host), and the clients of the other
// members use it while this one is down: a loopback client URL serves only
// the members on the same host, those whose peer URLs are loopback too.
// The client port is open like the peer port, without authentication.
func ClientListen(hostport string) Opt {
	return optFunc(func(c *startCfg) { c.clientListen = hostport })
}

// initialPeer is one member of an initial cluster.
type initialPeer struct {
	name string
	url  url.URL
}

// parseInitialCluster parses etcd's --initial-cluster syntax with one
// http peer URL per member; etcd's own parser takes more (several URLs a
// member, https) than an embedded member can serve.
func parseInitialCluster(spec string) ([]initialPeer, error) {
	var peers []initialPeer
	byURL := make(map[string]string)
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		name, raw, ok := strings.Cut(entry, "=")
		name, raw = strings.TrimSpace(name), strings.TrimSpace(raw)
		if !ok || name == "" || raw == "" {
			return nil, fmt.Errorf("initial cluster %q: entry %q is not name=http://host:port", spec, entry)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("initial cluster: member %s: peer URL %q is not http://host:port", name, raw)
		}
		host, port := u.Hostname(), u.Port()
		switch {
		case u.Scheme == "https":
			return nil, fmt.Errorf("initial cluster: member %s: %s: https needs peer TLS, which the embedded etcd does not set up; use http on a private network", name, raw)
		case u.Scheme != "http" || host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
			return nil, fmt.Errorf("initial cluster: member %s: peer URL %q is not http://host:port", name, raw)
		case !validPort(port, false):
			return nil, fmt.Errorf("initial cluster: member %s: peer URL %q needs a port (etcd's is 2380)", name, raw)
		case isUnspecified(host):
			return nil, fmt.Errorf("initial cluster: member %s: peer URL %q: %s is where to listen, not an address the others can reach", name, raw, host)
		}
		if slices.ContainsFunc(peers, func(p initialPeer) bool { return p.name == name }) {
			return nil, fmt.Errorf("initial cluster: member %s is listed twice (one peer URL a member)", name)
		}
		pu := url.URL{Scheme: "http", Host: u.Host}
		if other, dup := byURL[pu.String()]; dup {
			return nil, fmt.Errorf("initial cluster: members %s and %s have the same peer URL %s", other, name, pu.String())
		}
		byURL[pu.String()] = name
		peers = append(peers, initialPeer{name: name, url: pu})
	}
	return peers, nil
}

func renderInitialCluster(peers []initialPeer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.name + "=" + p.url.String()
	}
	return strings.Join(parts, ",")
}

func validPort(port string, zeroOK bool) bool {
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && (n > 0 || zeroOK)
}

func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// isLoopback reports whether host is this machine's alone.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseListen checks a host:port to bind, as etcd binds it: the host an
// IP address or localhost.
func parseListen(what, hostport string, zeroPortOK bool) (host, port string, err error) {
	host, port, err = net.SplitHostPort(hostport)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%s %q is not host:port: %w", what, hostport, err)
	case host == "":
		return "", "", fmt.Errorf("%s %q needs a host (0.0.0.0 for every interface)", what, hostport)
	case host != "localhost" && net.ParseIP(host) == nil:
		return "", "", fmt.Errorf("%s %q: the host must be an IP address or localhost", what, hostport)
	case !validPort(port, zeroPortOK):
		return "", "", fmt.Errorf("%s %q: bad port", what, hostport)
	}
	return host, port, nil
}

// layout is where an embedded member listens and what it publishes.
type layout struct {
	name string
	// peers is the initial cluster, nil for a member on its own.
	peers      []initialPeer
	token      string
	state      string
	peerListen url.URL
	peerURL    url.URL
	// clientHost and clientPort are where to serve clients; port "0" in
	// a cluster is replaced by a free one before the start, because the
	// published client URL must be the real one.
	clientHost, clientPort string
	// clientPublicHost replaces an unspecified clientHost in the
	// published URL.
	clientPublicHost string
}

func (c *startCfg) layout() (*layout, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if c.retention <= 0 {
		bad("compaction retention %v must be positive", c.retention)
	}
	if c.name == "" || strings.ContainsAny(c.name, "=,") {
		bad("member name %q must be non-empty, without '=' or ','", c.name)
	}
	l := &layout{name: c.name, token: DefaultClusterToken, state: embed.ClusterStateFlagNew,
		clientHost: "127.0.0.1", clientPort: "0", clientPublicHost: "127.0.0.1"}
	if c.clientListen != "" {
		host, port, err := parseListen("client listen address", c.clientListen, true)
		if err != nil {
			bad("%v", err)
		}
		l.clientHost, l.clientPort = host, port
	}
	if c.cluster == "" {
		for _, o := range []struct{ what, v string }{
			{"initial cluster token", c.token}, {"initial cluster state", c.state}, {"peer listen address", c.peerListen},
		} {
			if o.v != "" {
				bad("a %s needs an initial cluster: a member on its own has no peers", o.what)
			}
		}
		// The stable placeholder of a member on its own: it never dials
		// itself, and etcd ignores the configured peer URL of an existing
		// member on a restart anyway.
		l.peerURL = url.URL{Scheme: "http", Host: "127.0.0.1:0"}
		l.peerListen = l.peerURL
		return l, errors.Join(errs...)
	}

	peers, err := parseInitialCluster(c.cluster)
	if err != nil {
		bad("%v", err)
		return nil, errors.Join(errs...)
	}
	l.peers = peers
	i := slices.IndexFunc(peers, func(p initialPeer) bool { return p.name == c.name })
	if i < 0 {
		names := make([]string, len(peers))
		for i, p := range peers {
			names[i] = p.name
		}
		bad("member name %q is not in the initial cluster (members: %s)", c.name, strings.Join(names, ", "))
		return nil, errors.Join(errs...)
	}
	l.peerURL = peers[i].url
	if c.token != "" {
		l.token = c.token
	}
	switch c.state {
	case "", embed.ClusterStateFlagNew:
	case embed.ClusterStateFlagExisting:
		l.state = c.state
	default:
		bad("initial cluster state %q is neither new nor existing", c.state)
	}
	l.clientPublicHost = l.peerURL.Hostname()
	l.peerListen = url.URL{Scheme: "http", Host: l.peerURL.Host}
	if host := l.peerURL.Hostname(); host != "localhost" && net.ParseIP(host) == nil {
		// etcd binds IP addresses only; a name is resolved by the others.
		l.peerListen.Host = net.JoinHostPort("0.0.0.0", l.peerURL.Port())
	}
	if c.peerListen != "" {
		if _, _, err := parseListen("peer listen address", c.peerListen, false); err != nil {
			bad("%v", err)
		}
		l.peerListen.Host = c.peerListen
	}
	return l, errors.Join(errs...)
}

// config is the etcd configuration of the layout with its logger; in a
// cluster a client port of 0 is chosen here.
func (l *layout) config(dir string, retention time.Duration, elog *zap.Logger) (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = l.name
	cfg.Dir = dir
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(elog)
	port := l.clientPort
	if l.peers != nil && port == "0" {
		var err error
		if port, err = freePort(l.clientHost); err != nil {
			return nil, fmt.Errorf("embedetcd: a client port: %w", err)
		}
	}
	listen := url.URL{Scheme: "http", Host: net.JoinHostPort(l.clientHost, port)}
	public := listen
	if isUnspecified(l.clientHost) {
		public.Host = net.JoinHostPort(l.clientPublicHost, port)
	}
	cfg.ListenClientUrls = []url.URL{listen}
	cfg.AdvertiseClientUrls = []url.URL{public}
	cfg.ListenPeerUrls = []url.URL{l.peerListen}
	cfg.AdvertisePeerUrls = []url.URL{l.peerURL}
	if l.peers == nil {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	} else {
		cfg.InitialCluster = renderInitialCluster(l.peers)
		cfg.InitialClusterToken = l.token
		cfg.ClusterState = l.state
	}
	cfg.MaxTxnOps = embeddedMaxTxnOps
	cfg.MaxRequestBytes = embeddedMaxRequestBytes
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = retention.String()
	cfg.UnsafeNoFsync = false // durability is the point
	return cfg, nil
}

// freePort returns a port on host that nobody listens on now; the caller
// retries if it is taken before etcd binds it.
func freePort(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// Etcd is an etcd server in this process, with its data in a
// directory: the store of a tenure that runs alone, or one member of a
// cluster of tenure nodes that each embed one (InitialCluster).
type Etcd struct {
	e   *embed.Etcd
	cli *clientv3.Client
	dir string
	// endpoint is the local member's client URL.
	endpoint string
	name     string
	cluster  bool
	log      *zap.Logger
	// closing quiets the shutdown noise of etcd's listeners and peers.
	closing *atomic.Bool
	// lock is held on the data dir until the server has stopped.
	lock *fileutil.LockedFile
	// grpcs are the etcd's gRPC servers, which stop bounds.
	grpcs *grpcServers

	stopSync  context.CancelFunc
	syncDone  chan struct{}
	closeOnce sync.Once
	stopOnce  sync.Once
}

// Start starts an etcd server with its data in dir (created if
// missing; an existing one is reopened with its data) and returns once it
// serves. On its own, it listens for clients and peers on loopback ports
// the kernel chooses, so several run side by side; the peer URL recorded
// in the member list is the stable "http://127.0.0.1:0", because a single
// member never dials it. As a member of a cluster (InitialCluster) it
// returns once the cluster has a quorum and has taken this member in,
// waiting as long as ctx allows and saying every few seconds which peers
// it reached. Every write is fsynced before it is acknowledged. etcd's own
// logs go to log, named "etcd", from warn level up. Use Client for a
// client and StoreOpts with New; Close stops it.
func Start(ctx context.Context, dir string, log *zap.Logger, opts ...Opt) (*Etcd, error) {
	ec := startCfg{retention: DefaultCompactionRetention, name: DefaultMemberName}
	for _, o := range opts {
		o.apply(&ec)
	}
	l, err := ec.layout()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: data dir: %w", err)
	}
	// As etcd decides (wal.Exist): a start that failed before its first
	// WAL leaves a member directory behind, and bootstraps again.
	wals, _ := filepath.Glob(filepath.Join(abs, "member", "wal", "*.wal"))
	existing := len(wals) > 0
	if err := checkDataDirEntries(abs); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("embedetcd: data dir: %w", err)
	}
	lock, err := lockDataDir(abs)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			unlockDataDir(lock)
		}
	}()
	if err := checkDatabase(abs); err != nil {
		return nil, err
	}

	closing := new(atomic.Bool)
	grpcs := &grpcServers{}
	quiet := zap.WrapCore(func(c zapcore.Core) zapcore.Core { return &quietCore{Core: c, closing: closing} })
	var e *embed.Etcd
	for attempt := 1; ; attempt++ {
		cfg, err := l.config(abs, ec.retention, log.Named("etcd").WithOptions(quiet))
		if err != nil {
			return nil, err
		}
		grpcs.servers = nil
		cfg.ServiceRegister = grpcs.add
		e, err = embed.StartEtcd(cfg)
		if err == nil {
			break
		}
		// The client port chosen for a cluster member can be taken
		// before etcd binds it; the peer port is the user's.
		if l.peers != nil && l.clientPort == "0" && errors.Is(err, syscall.EADDRINUSE) && attempt < 3 &&
			strings.Contains(err.Error(), cfg.ListenClientUrls[0].Host) {
			continue
		}
		return nil, l.startError(abs, err)
	}
	m := &Etcd{e: e, dir: abs, name: l.name, cluster: l.peers != nil, log: log, closing: closing, lock: lock, grpcs: grpcs}
	m.endpoint = localEndpoint(e.Clients[0].Addr())
	if existing {
		if err := m.checkDataDir(l); err != nil {
			m.stop()
			return nil, err
		}
	}
	if err := m.waitReady(ctx, existing); err != nil {
		m.stop()
		return nil, err
	}
	ccfg := clientv3.Config{
		Endpoints:          []string{m.endpoint},
		DialTimeout:        5 * time.Second,
		MaxCallSendMsgSize: embeddedMaxRequestBytes + grpcOverheadBytes,
		Logger:             log.Named("etcd-client").WithOptions(quiet),
		Context:            context.WithoutCancel(ctx),
	}
	if m.cluster {
		// A member on another host can vanish without closing its
		// connections; keepalives let the balancer see it and send
		// requests to the others.
		ccfg.DialKeepAliveTime = 10 * time.Second
		ccfg.DialKeepAliveTimeout = 5 * time.Second
	}
	m.cli, err = clientv3.New(ccfg)
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("embedetcd: client of embedded etcd: %w", err)
	}
	if !m.cluster {
		// Alone, every read and write goes to this process's server:
		// calling it directly spares each transaction its gRPC encoding,
		// the loopback socket both ways and the decoding (about a tenth
		// of a durable commit's CPU, BenchmarkCommits1000). Watches and
		// leases keep the gRPC client, which their streams need.
		m.cli.KV = clientv3.NewKVFromKVClient(adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(e.Server)), m.cli)
	}
	fields := []zap.Field{zap.String("data_dir", abs), zap.Bool("existing_data", existing),
		zap.String("endpoint", m.endpoint), zap.Bool("fsync", true),
		zap.Duration("compaction_retention", ec.retention)}
	if m.cluster {
		m.syncEndpoints(ctx)
		members := e.Server.Cluster().Members()
		fields = append(fields, zap.String("member", m.name), zap.String("peer_url", l.peerURL.String()),
			zap.String("peer_listen", l.peerListen.Host), zap.String("cluster_id", e.Server.Cluster().ID().String()),
			zap.Int("members", len(members)), zap.Strings("client_endpoints", m.cli.Endpoints()))
		syncCtx, cancel := context.WithCancel(context.Background())
		m.stopSync, m.syncDone = cancel, make(chan struct{})
		go m.syncLoop(syncCtx)
	}
	log.Info("embedded etcd started", fields...)
	started = true
	return m, nil
}

// localEndpoint is the URL this process dials its member at: an
// unspecified listen address is dialled on loopback.
func localEndpoint(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err == nil && isUnspecified(host) {
		if net.ParseIP(host).To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
		return "http://" + net.JoinHostPort(host, port)
	}
	return "http://" + addr.String()
}

// startError makes etcd's refusals to bootstrap say what to do.
func (l *layout) startError(dir string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "has already been bootstrapped"):
		return fmt.Errorf("embedetcd: member %s is already in the running etcd cluster, but its data dir %s is new: "+
			"its data was lost or lives in another directory. Start it on its old data dir, or replace it: "+
			"etcdctl member remove <its ID>, etcdctl member add %s --peer-urls=%s, then start it on an empty data dir "+
			"with the initial cluster state \"existing\" (etcd: %w)", l.name, dir, l.name, l.peerURL.String(), err)
	case l.state == embed.ClusterStateFlagExisting &&
		(strings.Contains(msg, "cannot fetch cluster info") || strings.Contains(msg, "error validating peerURLs")):
		return fmt.Errorf("embedetcd: member %s cannot join the running etcd cluster: it must have been added first "+
			"(etcdctl member add %s --peer-urls=%s), a member of the cluster must be reachable, and the initial cluster "+
			"must list every current member with its peer URL (etcd: %w)", l.name, l.name, l.peerURL.String(), err)
	}
	return fmt.Errorf("embedetcd: starting embedded etcd in %s: %w", dir, err)
}

// checkDataDir refuses a data dir whose membership would run the wrong
// member, or a second cluster beside the one asked for: etcd itself
// follows an existing data dir whatever it is told.
func (m *Etcd) checkDataDir(l *layout) error {
	cl := m.e.Server.Cluster()
	members := cl.Members()
	if self := cl.Member(m.e.Server.MemberID()); self != nil && self.Name != "" && self.Name != l.name {
		return fmt.Errorf("%w: %s holds etcd member %q, not %q", ErrForeignDataDir, m.dir, self.Name, l.name)
	}
	switch {
	case l.peers == nil && len(members) > 1:
		return fmt.Errorf("%w: %s holds member %q of an etcd cluster of %d (%s); start it with its name and the initial cluster",
			ErrForeignDataDir, m.dir, l.name, len(members), describeMembers(members))
	case l.peers != nil && len(members) == 1 && len(l.peers) > 1:
		return fmt.Errorf("%w: %s holds an etcd cluster of its own (%s), not a member of the initial cluster (%s): "+
			"etcd follows the data dir, so it would run alone beside the others. Start this member on a new data dir "+
			"(the data in this one is not carried over)", ErrForeignDataDir, m.dir, describeMembers(members), renderInitialCluster(l.peers))
	case l.peers != nil && describeMembers(members) != describePeers(l.peers):
		m.log.Warn("the etcd members in the data dir differ from the initial cluster; etcd follows the data dir",
			zap.String("data_dir", m.dir), zap.String("data_members", describeMembers(members)),
			zap.String("initial_cluster", describePeers(l.peers)))
	}
	return nil
}

// describeMembers renders a member list as an initial cluster, sorted, to
// compare and to show (a member that never started shows its ID).
func describeMembers(members []*membership.Member) string {
	parts := make([]string, len(members))
	for i, mb := range members {
		name := mb.Name
		if name == "" {
			name = mb.ID.String()
		}
		parts[i] = name + "=" + strings.Join(mb.PeerURLs, "|")
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func describePeers(peers []initialPeer) string {
	parts := strings.Split(renderInitialCluster(peers), ",")
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// waitReady waits until the server serves: at once on its own, once the
// cluster has a quorum that took this member in otherwise.
func (m *Etcd) waitReady(ctx context.Context, existing bool) error {
	var tick <-chan time.Time
	if m.cluster {
		t := time.NewTicker(quorumWaitInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-m.e.Server.ReadyNotify():
			return nil
		case err := <-m.e.Err():
			return fmt.Errorf("embedetcd: embedded etcd in %s: %w", m.dir, err)
		case <-ctx.Done():
			return fmt.Errorf("embedetcd: embedded etcd in %s not ready: %w", m.dir, context.Cause(ctx))
		case <-tick:
			if err := m.checkPeers(ctx, existing); err != nil {
				return err
			}
		}
	}
}

// checkPeers asks the other members which cluster they serve, logs
// whom this member waits for, and fails when too many serve another
// cluster for a quorum ever to form. etcd only logs warnings for that
// (its peers drop the messages of another cluster), and would wait
// forever.
func (m *Etcd) checkPeers(ctx context.Context, existing bool) error {
	cl := m.e.Server.Cluster()
	ours := cl.ID().String()
	members := cl.Members()
	var reached, unreached, foreign []string
	var foreignID string
	for _, mb := range members {
		if mb.ID == m.e.Server.MemberID() || len(mb.PeerURLs) == 0 {
			continue
		}
		name := mb.Name
		if name == "" {
			name = mb.ID.String()
		}
		id, err := peerClusterID(ctx, mb.PeerURLs[0])
		switch {
		case err != nil:
			unreached = append(unreached, name)
		case id == ours:
			reached = append(reached, name)
		default:
			foreign = append(foreign, name+" ("+mb.PeerURLs[0]+")")
			foreignID = id
		}
	}
	if len(foreign) > 0 {
		from := "the initial cluster and token"
		if existing {
			from = "its data dir " + m.dir
		}
		err := fmt.Errorf("%w: member %s is in etcd cluster %s (from %s), but %s serve cluster %s: "+
			"the members were bootstrapped with different initial clusters or tokens, or some run on a data dir left from another cluster",
			ErrClusterMismatch, m.name, ours, from, strings.Join(foreign, ", "), foreignID)
		if len(members)-len(foreign) < len(members)/2+1 {
			return err
		}
		m.log.Warn("etcd peers serve another cluster", zap.Error(err))
	}
	m.log.Info("embedded etcd waiting for a quorum of its cluster", zap.String("member", m.name),
		zap.Int("members", len(members)), zap.Strings("reached", reached), zap.Strings("unreached", unreached))
	return nil
}

// probeClient asks peers which cluster they serve. No proxy: peer
// addresses are on the cluster's network. No keep-alive: a probe is rare,
// and an idle connection would outlive the member.
var probeClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true},
	Timeout:   peerProbeTimeout,
}

// peerClusterID returns the ID of the cluster the member at peerURL
// serves: etcd's peer handler puts it on every answer.
func peerClusterID(ctx context.Context, peerURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(peerURL, "/")+"/members", nil)
	if err != nil {
		return "", err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	id := resp.Header.Get("X-Etcd-Cluster-ID")
	if id == "" {
		return "", fmt.Errorf("%s is not an etcd peer", peerURL)
	}
	return id, nil
}

// syncLoop keeps the client's endpoints on the cluster's members: soon
// while some member has not published its client URL yet, every
// endpointSyncInterval after.
func (m *Etcd) syncLoop(ctx context.Context) {
	defer close(m.syncDone)
	interval := time.Second
	for {
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if m.syncEndpoints(ctx) {
			interval = endpointSyncInterval
		} else {
			interval = min(2*interval, endpointSyncInterval)
		}
	}
}

// syncEndpoints sets the client's endpoints to the client URLs of the
// members this process can reach, so it keeps working while its own
// member is down or cut off from the quorum. It reports whether every
// member has published its client URL. clientv3's AutoSyncInterval is not
// used because it takes every URL in the member list: another host's
// loopback URL would dial whatever listens on that port here.
func (m *Etcd) syncEndpoints(ctx context.Context) (complete bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := m.cli.MemberList(ctx)
	if err != nil {
		m.log.Debug("etcd member list for the client's endpoints failed", zap.Error(err))
		return false
	}
	eps, complete := reachableEndpoints(resp.Members, uint64(m.e.Server.MemberID()))
	if len(eps) > 0 && !slices.Equal(eps, m.cli.Endpoints()) {
		m.cli.SetEndpoints(eps...)
		m.log.Info("etcd client endpoints", zap.Strings("endpoints", eps))
	}
	return complete
}

// reachableEndpoints returns the sorted client URLs of the voting members
// that a process on self's host can dial: a loopback URL is only
// reachable from its own host, which is this one for self and for members
// whose peer URLs are loopback too. complete is whether every member has
// published its client URLs (one that never started has no name yet).
func reachableEndpoints(members []*pb.Member, self uint64) (eps []string, complete bool) {
	complete = true
	for _, mb := range members {
		if mb.Name == "" || len(mb.ClientURLs) == 0 {
			complete = false
			continue
		}
		if mb.IsLearner {
			continue
		}
		local := mb.ID == self || !slices.ContainsFunc(mb.PeerURLs, func(u string) bool { return !loopbackURL(u) })
		for _, u := range mb.ClientURLs {
			if local || !loopbackURL(u) {
				eps = append(eps, u)
			}
		}
	}
	slices.Sort(eps)
	return slices.Compact(eps), complete
}

func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && isLoopback(u.Hostname())
}

// Client returns a client of the server; it is the Etcd's, closed by
// Close. In a cluster it knows every member's client URL that it can
// reach, following the member list.
func (m *Etcd) Client() *clientv3.Client { return m.cli }

// Endpoint returns the server's client URL, for etcdctl.
func (m *Etcd) Endpoint() string { return m.endpoint }

// Dir returns the absolute path of the data directory.
func (m *Etcd) Dir() string { return m.dir }

// StoreOpts returns the options that match the server's raised limits, for
// New.
func (m *Etcd) StoreOpts() []etcdstore.Opt {
	return []etcdstore.Opt{etcdstore.MaxTxnOps(embeddedMaxTxnOps), etcdstore.MaxTxnBytes(embeddedMaxTxnBytes)}
}

// Close closes the client and stops the server, waiting for it. Calls
// after the first do nothing.
func (m *Etcd) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.closing.Store(true)
		if m.stopSync != nil {
			m.stopSync()
			<-m.syncDone
		}
		if m.cli != nil {
			err = m.cli.Close()
			if errors.Is(err, context.Canceled) {
				err = nil
			}
		}
		m.stop()
		unlockDataDir(m.lock)
		m.log.Info("embedded etcd stopped", zap.String("data_dir", m.dir))
	})
	return err
}

func (m *Etcd) stop() {
	m.stopOnce.Do(func() {
		m.closing.Store(true)
		select {
		case <-m.e.Server.ReadyNotify():
		default:
			// embed.Etcd.Close waits for the client servers, which start
			// only once the member is ready, or once the server stops:
			// stop it first, or Close hangs (etcd issue 9533).
			m.e.Server.HardStop()
		}
		start := time.Now()
		// embed.Etcd.Close lets the clients' requests finish for up
		// to its request timeout, 7 s; the other nodes of a cluster
		// hold watch and lease streams open on this member for as long
		// as it lets them, and move to another member once cut off.
		if n := m.grpcs.stop(clientDrainTimeout); n > 0 {
			m.log.Info("embedded etcd: cut the etcd clients' streams still open after the drain",
				zap.Int("servers", n), zap.Duration("drain", clientDrainTimeout))
		}
		drained := time.Since(start)
		m.e.Close()
		if took := time.Since(start); took > time.Second {
			// The rest of Close: handing raft leadership to a peer
			// (up to etcd's request timeout) and closing the peers'
			// connections (up to 1 s).
			m.log.Info("embedded etcd: slow stop", zap.Duration("took", took),
				zap.Duration("client_drain", drained), zap.Duration("raft_stop", took-drained))
		}
	})
}

// clientDrainTimeout is how long a stopping embedded etcd lets its
// clients' requests finish before it closes their connections.
const clientDrainTimeout = time.Second

// grpcServers collects the gRPC servers an embedded etcd creates
// (embed.Config.ServiceRegister), to stop them within a bound of ours.
type grpcServers struct {
	mu      sync.Mutex
	servers []*grpc.Server
}

func (g *grpcServers) add(s *grpc.Server) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.servers = append(g.servers, s)
}

// stop stops every server gracefully, waiting up to timeout for the
// requests under way, and then at once; it returns how many needed the
// cut.
func (g *grpcServers) stop(timeout time.Duration) int {
	g.mu.Lock()
	servers := g.servers
	g.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for _, s := range servers {
			wg.Go(s.GracefulStop)
		}
		wg.Wait()
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return 0
	case <-t.C:
	}
	for _, s := range servers {
		s.Stop()
	}
	<-done
	return len(servers)
}

// quietCore passes on etcd's warnings and errors, but not those that say
// nothing to a tenure operator: advice for a standalone production etcd at
// start, and the listeners' "errors" and the warnings of a normal
// shutdown (a member of a cluster warns about every peer stream it
// drops). It cuts long
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
	case c.closing.Load() && (ent.Level == zapcore.WarnLevel ||
		strings.HasPrefix(ent.Message, "setting up serving from embedded etcd failed") ||
		strings.Contains(ent.Message, "grpc server due to error")):
		return ce
	}
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

// storageVersionTooEarly reports etcd's complaint, often at error level,
// that a member of a new cluster could not yet record the storage version
// because no raft term is stored yet: its monitor tries again every few
// seconds and succeeds (etcdserver/version.Monitor).
func storageVersionTooEarly(ent zapcore.Entry, fields []zapcore.Field) bool {
	if ent.Message != "failed to update storage version" && ent.Message != "Failed to detect schema version" {
		return false
	}
	return slices.ContainsFunc(fields, func(f zapcore.Field) bool {
		err, ok := f.Interface.(error)
		return f.Type == zapcore.ErrorType && ok && strings.Contains(err.Error(), "missing term information")
	})
}

// maxLogString is the longest string field of etcd's logs passed on whole.
const maxLogString = 1024

func (c *quietCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if storageVersionTooEarly(ent, fields) {
		return nil
	}
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
