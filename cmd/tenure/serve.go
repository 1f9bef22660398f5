package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/coordinator/web"
	"github.com/tenure-dev/tenure/epoch"
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
		listen        = fs.String("listen", "127.0.0.1:9092", "`host:port` to accept Kafka clients on, in plaintext without authentication (for several listeners, TLS or SASL: --listeners)")
		advertise     = fs.String("advertise", "", "`host:port` clients are told to connect to, in Metadata and FindCoordinator (default: the address bound by --listen)")
		partitions    = fs.Int("partitions", int(def.DefaultPartitions), "partitions of a topic created by Metadata auto-creation or by CreateTopics with -1")
		autoCreate    = fs.Bool("auto-create-topics", def.AutoCreateTopics, "create an unknown topic when a client asks for it in Metadata")
		httpListen    = fs.String("http", defaultHTTP, "`host:port` to serve the status page on (groups, partition owners and tokens, members, live), Prometheus metrics at /metrics, and the admin API (generation log, drain: tenure groups explain | drain); \"\" turns it off. If the default address is taken, the node warns and serves without it. Unauthenticated, and drain changes groups: keep it on loopback or a private network, or turn drain off with --admin-api=false")
		adminAPI      = fs.Bool("admin-api", true, "serve the admin API's drain on --http (the generation log and the status page are read-only and always served)")
		enablePprof   = fs.Bool("enable-pprof", false, "serve Go's runtime profiles (net/http/pprof: CPU, heap, allocations, goroutines, mutex, execution trace) at /debug/pprof/ on --http, to see what a node spends a window of load on (go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=5); off by default: a profile costs the node CPU while it runs and shows its internals, on a listener without authentication")
		metricsListen = fs.String("metrics-listen", "", "deprecated: the old name of --http, which serves /metrics too")
		minSession    = fs.Duration("min-session-timeout", def.Core.MinSessionTimeout, "smallest session timeout a classic member may ask for (Kafka group.min.session.timeout.ms)")
		maxSession    = fs.Duration("max-session-timeout", def.Core.MaxSessionTimeout, "largest session timeout a classic member may ask for (Kafka group.max.session.timeout.ms)")
		cSession      = fs.Duration("consumer-session-timeout", def.Core.ConsumerSessionTimeout, "session timeout of KIP-848 members (Kafka group.consumer.session.timeout.ms)")
		cHeartbeat    = fs.Duration("consumer-heartbeat-interval", def.Core.ConsumerHeartbeatInterval, "heartbeat interval told to KIP-848 members (Kafka group.consumer.heartbeat.interval.ms)")
		joinCoalesce  = fs.Duration("consumer-join-coalesce", def.Core.ConsumerJoinCoalesce, "KIP-848 joins within this long of a join's epoch bump share one bump at the end of the window (0: one bump per join)")
		connLossGrace = fs.Duration("conn-loss-grace", def.Core.ConnLossGrace, "expel a member this long after the connection of its latest request closed, unless it is heard from meanwhile, instead of at its session timeout (a dead process's kernel closes its connections; a paused one's stay open); static members are exempt; 0 turns it off")
		initialDelay  = fs.Duration("initial-rebalance-delay", def.Core.InitialRebalanceDelay, "how long a new or empty classic group waits for more members before its first rebalance (Kafka group.initial.rebalance.delay.ms)")
		assignors     = fs.String("assignors", strings.Join(assignor.Names(), ","), "comma-separated `list` of server-side assignors KIP-848 members may name, default first")
		maxGroupSize  = fs.Int("max-group-size", def.Core.MaxGroupSize, "most members of one group; a join beyond it is GROUP_MAX_SIZE_REACHED")
		maxPartitions = fs.Int("max-partitions", int(def.MaxPartitions), "most partitions of one topic; CreateTopics beyond it is INVALID_PARTITIONS")
		maxTopics     = fs.Int("max-topics", def.MaxTopics, "most topics; a creation beyond it is POLICY_VIOLATION")
		maxGroups     = fs.Int("max-groups", def.MaxGroups, "most groups; a request creating one more is COORDINATOR_NOT_AVAILABLE")
		maxConns      = fs.Int("max-connections", def.MaxConnections, "most client connections; one beyond it is closed on accept")
		maxFrame      = fs.Int("max-frame-size", int(def.MaxFrameSize), "largest request in `bytes`; a larger one closes its connection")
		keepAlive     = fs.Duration("conn-keepalive", def.KeepAlive, "abort a connection whose peer's host answers nothing, not even TCP keepalive probes, for this long (a crashed host or a network cut; a paused process's kernel still answers), which then counts as a close for --conn-loss-grace; above the longest cut a live member should survive; 0: the platform's defaults (minutes)")
		idleTimeout   = fs.Duration("idle-timeout", def.IdleTimeout, "close a connection silent this long with nothing pending (Kafka connections.max.idle.ms)")
		writeTimeout  = fs.Duration("write-timeout", def.WriteTimeout, "close a connection whose client does not read its responses for this long")
		groupMetrics  = fs.Bool("per-group-metrics", def.PerGroupMetrics, "export generation, members and unowned partitions per group (three series per group)")
		authorizer    = fs.String("authorizer", "off", "Kafka ACL authorization: on (every request checked against the ACLs kept in the store, managed with kadm or kafka-acls; what no ACL allows is denied) or off (everything allowed; the ACL APIs answer SECURITY_DISABLED)")
		superUsers    = fs.String("super-users", "", "`principals` allowed everything while --authorizer is on, separated by semicolons, as Kafka's super.users: User:admin;User:ops")
		quotaRate     = fs.Float64("quota-request-rate", 0, "most requests per second of one principal over all its connections; a client over it is throttled as Kafka throttles (0: no quota)")
		quotaConnRate = fs.Float64("quota-connection-request-rate", 0, "most requests per second of one connection; a client over it is throttled as Kafka throttles (0: no quota)")
		maxPerIP      = fs.Int("max-connections-per-ip", def.MaxConnectionsPerIP, "most connections from one client IP address; one beyond it is closed on accept (0: no limit)")
		parkedConn    = fs.Int("max-parked-per-connection", def.MaxParkedPerConnection, "most requests one connection may have parked (JoinGroup, SyncGroup, Fetch held for MaxWait); beyond it a Fetch is answered at once and a group request COORDINATOR_LOAD_IN_PROGRESS")
		parkedGroup   = fs.Int("max-parked-per-group", def.MaxParkedPerGroup, "most requests one group may hold parked; beyond it a JoinGroup or SyncGroup is answered COORDINATOR_LOAD_IN_PROGRESS")
		signGrants    = fs.Bool("sign-grants", false, "sign every partition grant (Ed25519, over group, topic ID, partition, token and member) with a key kept in the store, so that fences with the published keys refuse tokens nobody issued; stock clients are unaffected (tenure keys --help)")
		keyRetention  = fs.Duration("key-retention", def.KeyRetention, "how long a key retired by a rotation goes on verifying before it is revoked")
		keyPublish    = fs.Duration("key-publish-delay", time.Minute, "how long a rotation publishes the next key (pending: it verifies) before it signs, so that resources that fetch the keys more often than that hold it before its first token (0: sign with it at once)")
		storeFlags    = addStoreFlags(fs)
		shards        = fs.Int("shards", 1, "with a shared etcd (an HA set): the number of coordinator shards the groups hash onto, each owned by one node at a time and spread evenly over the live nodes, like Kafka's __consumer_offsets partitions; 1 keeps one leader for every group. Fixed once the store's prefix is used: every node must give the same")
		standby       = fs.Bool("standby", true, "with a shared etcd (an HA set): keep this node a warm standby, following the store of the groups other nodes coordinate and keeping them rebuilt in memory, so that a node that takes over serves them at once instead of loading the store; costs about the groups' memory on their coordinator (false: load the store at each takeover, for small machines)")
		electionTTL   = fs.Duration("election-ttl", 5*time.Second, "with the etcd store: how long a leader that stops renewing its lease (crash, pause, partition) keeps the groups before another node may take over; whole seconds")
		peerProbe     = fs.Duration("peer-probe", def.PeerProbe, "in an HA set: how often each node probes the other nodes' Kafka listeners; a node whose listener refuses (or accepts and closes at once) leaves Metadata at once, its broker ID pointing at its successor, instead of up to an election TTL later (0: no probe)")
		coordWait     = fs.Duration("coordinator-wait", 0, "in an HA set: how long FindCoordinator is held while no live node coordinates the group (a fail-over under way), answered as soon as one does, before COORDINATOR_NOT_AVAILABLE (default: the election TTL and a second, at most 8s)")
		viewSettle    = fs.Duration("view-settle", def.ViewSettle, "in an HA set: how long after the set's view changes (a node left or came back, a departed node's broker ID points elsewhere) a closed client connection starts no --conn-loss-grace: clients then close connections of their own accord to dial the new addresses, and a member whose process dies in that window goes at its session timeout instead; a connection made in that window after a node left has its first Fetch answered \"moved\", so that a client the change sent there reloads metadata and finds its coordinator again (0: every close starts the grace)")
		takeoverGrace = fs.Duration("takeover-grace", 30*time.Second, "in an HA set: the least session a member gets from the node that takes its group over (a fail-over), plus up to an eighth more spread by member; its first heartbeat ends it. Stock clients need that long to find the new coordinator; a member that died with the old one keeps its partitions as long (0: the member's own session)")
		logLevel      = fs.String("log-level", "info", "log `level`: debug, info, warn or error")
		topics        = declaredTopics(fs)
		unsafeTiming  = fs.Bool("allow-unsafe-timing", false, "start with a KIP-848 heartbeat and session that epoch.Timing calls unsafe (a warning instead of a refusal)")
		listeners     = addListenerFlags(fs)
		cpuProfile    = fs.String("cpuprofile", "", "write a CPU profile of the node to `file` until it stops (for diagnosing what a load costs; go tool pprof reads it)")
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
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()

		cfg := def
		cfg.Logger = log
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		bound, err := listeners.resolve(&cfg, *listen, *advertise, given["listen"], given["advertise"], log)
		if err != nil {
			return err
		}
		cfg.DefaultPartitions = int32(*partitions)
		cfg.AutoCreateTopics = *autoCreate
		for _, t := range *topics {
			if t.Partitions == 0 {
				t.Partitions = cfg.DefaultPartitions
			}
			cfg.Topics = append(cfg.Topics, t)
		}
		cfg.MaxPartitions = int32(*maxPartitions)
		cfg.MaxTopics = *maxTopics
		cfg.MaxGroups = *maxGroups
		cfg.MaxConnections = *maxConns
		cfg.MaxFrameSize = int32(min(*maxFrame, 1<<31-1))
		cfg.IdleTimeout = *idleTimeout
		cfg.KeepAlive = *keepAlive
		cfg.WriteTimeout = *writeTimeout
		cfg.PerGroupMetrics = *groupMetrics
		switch *authorizer {
		case "on":
			cfg.Authorization = true
		case "off":
		default:
			return usagef("--authorizer %q: on or off", *authorizer)
		}
		for _, u := range strings.Split(*superUsers, ";") {
			if u = strings.TrimSpace(u); u != "" {
				cfg.SuperUsers = append(cfg.SuperUsers, u)
			}
		}
		if len(cfg.SuperUsers) > 0 && !cfg.Authorization {
			return usagef("--super-users is given but --authorizer is off")
		}
		cfg.QuotaRequestRate = *quotaRate
		cfg.QuotaConnectionRequestRate = *quotaConnRate
		cfg.MaxConnectionsPerIP = *maxPerIP
		cfg.MaxParkedPerConnection = *parkedConn
		cfg.MaxParkedPerGroup = *parkedGroup
		cfg.SignGrants, cfg.KeyRetention, cfg.KeyPublishDelay = *signGrants, *keyRetention, *keyPublish
		cfg.PeerProbe = *peerProbe
		cfg.ViewSettle = *viewSettle
		cfg.Core.TakeoverGrace = *takeoverGrace
		cfg.CoordinatorWait = min(*electionTTL+time.Second, 8*time.Second)
		if given["coordinator-wait"] {
			cfg.CoordinatorWait = *coordWait
		}
		cfg.Core.MinSessionTimeout = *minSession
		cfg.Core.MaxSessionTimeout = *maxSession
		cfg.Core.ConsumerSessionTimeout = *cSession
		cfg.Core.ConsumerHeartbeatInterval = *cHeartbeat
		cfg.Core.ConsumerJoinCoalesce = *joinCoalesce
		cfg.Core.ConnLossGrace = *connLossGrace
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
		if err := storeFlags.validate(); err != nil {
			return err
		}
		httpAddr := *httpListen
		// The default address is a convenience: a second node on the
		// same host finds it taken and runs without.
		httpOptional := !isSet(fs, "http")
		if *metricsListen != "" {
			if !httpOptional && httpAddr != *metricsListen {
				return usagef("--metrics-listen is the deprecated name of --http: give --http only")
			}
			httpAddr, httpOptional = *metricsListen, false
			log.Warn("--metrics-listen (TENURE_METRICS_LISTEN) is deprecated: use --http (TENURE_HTTP), which serves /metrics and the status page")
		}
		if *enablePprof && httpAddr == "" {
			return usagef("--enable-pprof serves the profiles on --http, which is off (--http \"\"): give --http an address")
		}
		// Everything but the store is checked before the store opens: an
		// embedded etcd takes a second to start and creates its data
		// directory.
		probe := cfg
		probe.Store = store.NewMemory()
		if err := probe.Validate(); err != nil {
			return usagef("%v", err)
		}

		// The timing members would be told, checked by the rules members
		// check it with (a worker refuses it at join time, too late).
		timing := epoch.DefaultTiming()
		timing.HeartbeatInterval, timing.SessionTimeout = *cHeartbeat, *cSession
		timing.RebalanceTimeout = max(timing.RebalanceTimeout, *cHeartbeat)
		if err := timing.Validate(); err != nil {
			if !*unsafeTiming {
				return usagef("--consumer-heartbeat-interval %v with --consumer-session-timeout %v: %v (--allow-unsafe-timing starts anyway)",
					*cHeartbeat, *cSession, strings.ReplaceAll(err.Error(), "\n", "; "))
			}
			log.Warn("unsafe KIP-848 timing: members may lose ownership on one lost heartbeat, or keep it past their session",
				zap.Duration("heartbeat", *cHeartbeat), zap.Duration("session", *cSession), zap.Error(err))
		}

		if *shards < 1 || *shards > ha.MaxShards {
			return usagef("--shards %d must be in [1, %d]", *shards, ha.MaxShards)
		}
		if *shards > 1 && !storeFlags.shared() {
			return usagef("--shards %d spreads groups over the nodes of an HA set: it needs a shared etcd (--etcd-endpoints, or an embedded etcd cluster with --etcd-initial-cluster)", *shards)
		}
		if storeFlags.kind == "etcd" && (*electionTTL < time.Second || *electionTTL%time.Second != 0) {
			return usagef("--election-ttl %v must be whole seconds, at least 1s", *electionTTL)
		}

		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Registerer = reg
		be, err := storeFlags.open(ctx, log, reg)
		if err != nil {
			return err
		}
		defer be.close()
		lns, err := listenAll(bound)
		if err != nil {
			return err
		}
		ln := multiCloser(lns)
		hln, err := listenHTTP(httpSpec{addr: httpAddr, optional: httpOptional}, log)
		if err != nil {
			ln.Close()
			return err
		}
		if hln != nil {
			defer hln.Close() // for the returns before serveHTTP, which closes it
		}
		var cluster *haCluster
		switch {
		case be.memory != nil:
			cfg.Store = be.memory
			log.Warn("group state is kept in memory only (--store memory): generations, assignments and offsets are lost when this process exits, " +
				"so after a restart fencing tokens start again from 1, below the tokens owners held before: fences downstream (sqlfence, etcdfence, " +
				"a worker's resources) refuse the new owners' writes until each group's generation passes its old one, while describe shows them owning " +
				"their partitions. For tokens that survive restarts, use --store etcd (the default)")
		case !storeFlags.shared():
			// The embedded etcd alone is this node's: no other node can
			// coordinate its groups, so there is nothing to elect, and a
			// restart after kill -9 serves at once instead of waiting for
			// the dead process's lease to expire.
			st, err := etcdstore.New(ctx, be.cli, be.storeOpts...)
			if err != nil {
				ln.Close()
				return err
			}
			defer st.Close()
			// No older node can share it: the groups write the newest
			// format at once (GroupTargets stays nil).
			if _, err := etcdstore.RaiseFormat(ctx, be.cli, etcdstore.FormatVersion, nil, be.storeOpts...); err != nil {
				ln.Close()
				return err
			}
			cfg.Store = st
		default:
			// On a shared etcd (--etcd-endpoints, or an embedded member
			// of a cluster) every node is part of an HA set: it
			// coordinates groups while it leads, under a store guarded by
			// its leadership.
			// One listener: its address is the node's; several: the
			// node's address is the first's, and each is registered.
			var advs map[string]string
			adv := cfg.Advertise
			switch {
			case len(cfg.Listeners) > 0:
				advs = advertisedListeners(cfg.Listeners, lns)
				adv = advs[cfg.Listeners[0].Name]
			case adv == "":
				adv = lns[0].Addr().String()
			}
			httpAdv := ""
			if hln != nil {
				httpAdv = httpAdvertise(hln.Addr(), adv)
			}
			cluster, err = joinCluster(ctx, be.cli, adv, advs, httpAdv, storeFlags.prefix, *electionTTL, *shards, storeFlags.nodeID(), be.storeOpts, log, reg)
			if err != nil {
				ln.Close()
				return fmt.Errorf("joining the HA set: %w", err)
			}
			defer cluster.close()
			cfg.Cluster = cluster
			cfg.GroupTargets = cluster.gate.groupTargets
			if *standby {
				mirror, err := etcdstore.NewMirror(ctx, be.cli, etcdstore.Prefix(storeFlags.prefix), etcdstore.Logger(log))
				if err != nil {
					ln.Close()
					return fmt.Errorf("starting the standby: %w", err)
				}
				defer mirror.Close()
				cfg.Standby = mirror
			}
			cfg.TopicStore = etcdstore.NewTopics(be.cli, etcdstore.Prefix(storeFlags.prefix))
			cfg.LogStore = etcdstore.NewLogs(be.cli, etcdstore.Prefix(storeFlags.prefix))
			cfg.Credentials = etcdstore.NewUsers(be.cli, etcdstore.Prefix(storeFlags.prefix))
			cfg.ACLStore = etcdstore.NewACLs(be.cli, etcdstore.Prefix(storeFlags.prefix))
			cfg.KeyStore = etcdstore.NewKeys(be.cli, etcdstore.Prefix(storeFlags.prefix))
		}
		if err := cfg.Validate(); err != nil {
			ln.Close()
			return usagef("%v", err)
		}
		srv, err := server.New(cfg)
		if err != nil {
			ln.Close()
			return err
		}
		adminOpts := []adminapi.Opt{adminapi.Store(adminapi.StoreInfo{Kind: storeFlags.kind, Listeners: clientAddrs(cfg, lns)})}
		if be.cli != nil {
			adminOpts = append(adminOpts, adminapi.Etcd(adminapi.EtcdInfo{Endpoints: be.cli.Endpoints(), Embedded: storeFlags.endpoints == ""}))
		}
		stopHTTP, err := serveHTTP(hln, httpServes{admin: *adminAPI, pprof: *enablePprof}, reg, be.metrics, web.ServerSource{Server: srv}, log, adminOpts...)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopHTTP()
		if cluster != nil {
			ctx = handOffFirst(ctx, cluster, *electionTTL, handOffGrace(*cHeartbeat), log)
		}
		return srv.Serve(ctx, lns...)
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

// storeFlags choose the store and how to reach it.
type storeFlags struct {
	kind        string
	dataDir     string
	endpoints   string
	caCert      string
	cert        string
	key         string
	username    string
	password    string
	prefix      string
	maxTxnOps   int
	dialTimeout time.Duration
	combine     time.Duration

	// The embedded etcd's member, alone or in a cluster of tenure nodes.
	name         string
	cluster      string
	token        string
	state        string
	peerListen   string
	clientListen string
}

func addStoreFlags(fs *flag.FlagSet) *storeFlags {
	f := &storeFlags{}
	fs.StringVar(&f.kind, "store", "etcd", "where group state is persisted: etcd (durable; an embedded etcd in --data-dir unless --etcd-endpoints is given) or memory (not durable: lost when the process exits)")
	fs.StringVar(&f.dataDir, "data-dir", "./tenure-data", "`directory` of the embedded etcd's data, created if missing")
	fs.StringVar(&f.endpoints, "etcd-endpoints", "", "comma-separated client `URLs` of an etcd cluster to use instead of the embedded one")
	fs.StringVar(&f.name, "etcd-name", embedetcd.DefaultMemberName, "`name` of the embedded etcd member; with --etcd-initial-cluster, its entry there")
	fs.StringVar(&f.cluster, "etcd-initial-cluster", "", "`members` of an etcd cluster whose members the tenure nodes embed, one each, in etcd's syntax: n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380,n3=http://10.0.0.3:2380, the same on every node (default: an etcd of this node alone). The first start on --data-dir bootstraps from it; later starts follow the data. Peer traffic is plain HTTP: keep it on a private network")
	fs.StringVar(&f.token, "etcd-initial-cluster-token", embedetcd.DefaultClusterToken, "`token` that makes the ID of a new --etcd-initial-cluster, the same on every node; another token makes another cluster on the same addresses")
	fs.StringVar(&f.state, "etcd-initial-cluster-state", "new", "`state` of --etcd-initial-cluster: new to bootstrap it with the other nodes, existing to join a running cluster on an empty --data-dir after etcdctl member add (to replace a node whose data is lost)")
	fs.StringVar(&f.peerListen, "etcd-peer-listen", "", "`host:port` the embedded member accepts its peers on (default: the host and port of its --etcd-initial-cluster entry; every interface when that host is a name)")
	fs.StringVar(&f.clientListen, "etcd-client-listen", "", "`host:port` the embedded etcd serves etcd clients on (default: 127.0.0.1 and a port the kernel chooses). In a cluster, the other nodes use it while their own member is down if they can reach it: 10.0.0.1:2379, or 0.0.0.0:2379 (published with the peer URL's host); it has no authentication")
	fs.StringVar(&f.caCert, "etcd-cacert", "", "CA certificates `file` to verify the etcd servers with (default with https endpoints: the system's roots)")
	fs.StringVar(&f.cert, "etcd-cert", "", "client certificate `file` for etcd (with --etcd-key)")
	fs.StringVar(&f.key, "etcd-key", "", "client key `file` for etcd (with --etcd-cert)")
	fs.StringVar(&f.username, "etcd-username", "", "etcd user `name`")
	fs.StringVar(&f.password, "etcd-password", "", "etcd user's `password` (prefer TENURE_ETCD_PASSWORD: a flag shows in the process list)")
	fs.StringVar(&f.prefix, "etcd-prefix", etcdstore.DefaultPrefix, "`prefix` of tenure's keys in etcd")
	fs.IntVar(&f.maxTxnOps, "max-txn-ops", 0, "most operations in one etcd transaction, at most the server's --max-txn-ops (default: 128, etcd's default, with --etcd-endpoints; 10000 with the embedded etcd, which is started with that limit)")
	fs.DurationVar(&f.combine, "store-combine-delay", etcdstore.DefaultCombineDelay, "with --shards above 1: how long a node's write to etcd that finds none of its others in flight waits for its other shards' writes to go in the same request (one request and one watch event a burst instead of several, for up to this much more latency); writes that come while one is in flight wait for it instead; 0 sends at once")
	fs.DurationVar(&f.dialTimeout, "etcd-dial-timeout", 5*time.Second, "how long to wait for a connection to --etcd-endpoints at start-up")
	return f
}

// nodeID is the node ID an embedded etcd member's name asks for: the
// number it ends in (n1 is node 1, tenure-12 node 12), so that the nodes
// of an HA set are numbered as their members are; -1 for a name without
// one, or without an embedded member.
func (f *storeFlags) nodeID() int32 {
	if f.endpoints != "" {
		return -1
	}
	i := len(f.name)
	for i > 0 && f.name[i-1] >= '0' && f.name[i-1] <= '9' {
		i--
	}
	id, err := strconv.ParseInt(f.name[i:], 10, 32)
	if err != nil || i == len(f.name) {
		return -1
	}
	return int32(id)
}

// etcdStartTimeout bounds starting an embedded etcd of this node alone,
// and opening the store.
const etcdStartTimeout = 30 * time.Second

func (f *storeFlags) validate() error {
	switch f.kind {
	case "memory", "etcd":
	default:
		return usagef("unknown store %q (known: etcd, memory)", f.kind)
	}
	if f.kind == "etcd" && f.endpoints == "" && f.dataDir == "" {
		return usagef("--data-dir is empty: the embedded etcd needs a directory")
	}
	type given struct {
		flag string
		set  bool
	}
	if f.endpoints != "" {
		for _, g := range []given{
			{"--etcd-initial-cluster", f.cluster != ""},
			{"--etcd-name", f.name != embedetcd.DefaultMemberName},
			{"--etcd-peer-listen", f.peerListen != ""},
			{"--etcd-client-listen", f.clientListen != ""},
		} {
			if g.set {
				return usagef("%s configures the embedded etcd, and --etcd-endpoints replaces it with a cluster of your own: give one of them", g.flag)
			}
		}
	}
	if f.cluster == "" {
		for _, g := range []given{
			{"--etcd-initial-cluster-token", f.token != embedetcd.DefaultClusterToken},
			{"--etcd-initial-cluster-state", f.state != "new"},
			{"--etcd-peer-listen", f.peerListen != ""},
		} {
			if g.set {
				return usagef("%s needs --etcd-initial-cluster: an etcd of this node alone has no peers", g.flag)
			}
		}
	}
	if (f.cert == "") != (f.key == "") {
		return usagef("--etcd-cert and --etcd-key go together")
	}
	if f.maxTxnOps != 0 && f.maxTxnOps < etcdstore.MinTxnOps {
		return usagef("--max-txn-ops %d is below %d", f.maxTxnOps, etcdstore.MinTxnOps)
	}
	if f.dialTimeout <= 0 {
		return usagef("--etcd-dial-timeout %v must be positive", f.dialTimeout)
	}
	if f.combine < 0 {
		return usagef("--store-combine-delay %v is negative", f.combine)
	}
	return nil
}

// open opens the chosen store; closeStore closes it and stops what it
// started.
// shared reports whether the etcd may be reached by other tenure nodes,
// which then form an HA set: an external cluster, or an embedded member of
// a cluster of embedded members.
func (f *storeFlags) shared() bool { return f.endpoints != "" || f.cluster != "" }

// backend is what the store flags chose: the memory store, or an etcd
// client (of the embedded etcd or of a cluster) with the options of the
// group stores that the node's terms open on it.
type backend struct {
	memory    *store.Memory
	cli       *clientv3.Client
	storeOpts []etcdstore.Opt
	// metrics are the embedded etcd's own (etcd_server_has_leader, ...),
	// served beside tenure's; an external etcd serves its own.
	metrics prometheus.Gatherers
	close   func()
}

// open starts or reaches what the flags chose. The etcd store's options
// are checked here, by opening the store once, so that a bad one is a
// usage error at start-up rather than a term that cannot open its store.
func (f *storeFlags) open(ctx context.Context, log *zap.Logger, reg prometheus.Registerer) (*backend, error) {
	if f.kind == "memory" {
		m := store.NewMemory()
		return &backend{memory: m, close: func() { m.Close() }}, nil
	}
	var closers []func()
	b := &backend{close: func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}}
	opts := []etcdstore.Opt{etcdstore.Prefix(f.prefix), etcdstore.Logger(log), etcdstore.Registerer(reg)}
	if f.endpoints == "" {
		e, err := f.startEmbedded(ctx, log)
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { e.Close() })
		b.cli = e.Client()
		b.metrics = prometheus.Gatherers{e.Metrics()}
		opts = append(opts, e.StoreOpts()...)
	} else {
		cli, err := f.client(log)
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { cli.Close() })
		b.cli = cli
	}
	if f.maxTxnOps > 0 {
		opts = append(opts, etcdstore.MaxTxnOps(f.maxTxnOps))
	}
	opts = append(opts, etcdstore.CombineDelay(f.combine))
	b.storeOpts = opts
	if err := etcdstore.CheckOptions(opts...); err != nil {
		b.close()
		return nil, usagef("%v", err)
	}
	return b, nil
}

// startEmbedded starts the embedded etcd. Alone it must serve within
// etcdStartTimeout; a member of a cluster waits for a quorum until ctx
// ends, as etcd does, since the other nodes may come up minutes later,
// and logs every few seconds which peers it reached.
func (f *storeFlags) startEmbedded(ctx context.Context, log *zap.Logger) (*embedetcd.Etcd, error) {
	opts := []embedetcd.Opt{embedetcd.MemberName(f.name)}
	if f.clientListen != "" {
		opts = append(opts, embedetcd.ClientListen(f.clientListen))
	}
	if f.cluster == "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, etcdStartTimeout)
		defer cancel()
	} else {
		opts = append(opts, embedetcd.InitialCluster(f.cluster), embedetcd.InitialClusterToken(f.token),
			embedetcd.InitialClusterState(f.state))
		if f.peerListen != "" {
			opts = append(opts, embedetcd.PeerListen(f.peerListen))
		}
	}
	e, err := embedetcd.Start(ctx, f.dataDir, log, opts...)
	if errors.Is(err, embedetcd.ErrInvalidOption) {
		return nil, usagef("%v", err)
	}
	return e, err
}

// client connects to the external etcd cluster.
func (f *storeFlags) client(log *zap.Logger) (*clientv3.Client, error) {
	endpoints := strings.Split(f.endpoints, ",")
	secure := f.caCert != "" || f.cert != ""
	for i, ep := range endpoints {
		endpoints[i] = strings.TrimSpace(ep)
		secure = secure || strings.HasPrefix(endpoints[i], "https://")
	}
	clog := log.Named("etcd-client")
	if clog.Core().Enabled(zapcore.InfoLevel) {
		// The client is chatty at info; zap complains if the level is
		// already above warn, hence the test.
		clog = clog.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: f.dialTimeout,
		Username:    f.username,
		Password:    f.password,
		Logger:      clog,
	}
	if secure {
		tc, err := f.tlsConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", f.endpoints, err)
	}
	return cli, nil
}

func (f *storeFlags) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caCert != "" {
		pem, err := os.ReadFile(f.caCert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert: no PEM certificate in %s", f.caCert)
		}
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// declaredTopics registers --topic, repeatable and comma-separated (so
// that TENURE_TOPIC can hold several): NAME or NAME:PARTITIONS.
func declaredTopics(fs *flag.FlagSet) *[]server.TopicSpec {
	var out []server.TopicSpec
	fs.Func("topic", "declare a topic `name[:partitions]`, created at start-up if missing (repeatable or comma-separated; partitions default to --partitions); clients that do not create topics, such as librdkafka's, need theirs declared", func(v string) error {
		for _, item := range splitList(v) {
			name, n, hasN := strings.Cut(item, ":")
			spec := server.TopicSpec{Name: name}
			if hasN {
				p, err := strconv.ParseInt(n, 10, 32)
				if err != nil || p <= 0 {
					return fmt.Errorf("%q: the partition count must be a positive integer", item)
				}
				spec.Partitions = int32(p)
			}
			out = append(out, spec)
		}
		return nil
	})
	return &out
}

// clientAddrs are the Kafka addresses clients are told to reach this node
// at: each listener's advertised address, --advertise, or else the bound
// ones.
func clientAddrs(cfg server.Config, lns []net.Listener) []string {
	var out []string
	switch {
	case len(cfg.Listeners) > 0:
		for _, a := range advertisedListeners(cfg.Listeners, lns) {
			out = append(out, a)
		}
		slices.Sort(out)
	case cfg.Advertise != "":
		out = append(out, cfg.Advertise)
	default:
		for _, ln := range lns {
			out = append(out, ln.Addr().String())
		}
	}
	return out
}
