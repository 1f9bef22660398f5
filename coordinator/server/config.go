package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// Config configures a Server. Start from DefaultConfig and override
// fields; New validates it.
type Config struct {
	// Core shapes every group (timeouts, group size, assignors). The
	// server replaces Core.Topics with its own topic registry.
	Core coordinator.Config

	// Store persists group records before replies are sent. Required,
	// unless Cluster is set: each of its terms brings the store to write
	// through while it lasts.
	Store store.Store

	// TopicStore keeps the topics. Default: Store, which must then
	// implement store.TopicStore. Every node of an HA set shares one.
	TopicStore store.TopicStore

	// LogStore reads the groups' generation logs (which the group store
	// writes). Default: Store, if it implements store.LogStore. Every
	// node of an HA set may read it.
	LogStore store.LogStore

	// Cluster, if set, makes the server a node of an HA set: it
	// coordinates groups only during the terms it wins, and otherwise
	// answers group requests NOT_COORDINATOR and names the leader in
	// FindCoordinator. Its node ID and address replace NodeID and
	// Advertise.
	Cluster Cluster

	// Standby, with Cluster, keeps this node a warm standby: it follows
	// the store of the groups it does not coordinate (every group while
	// it follows a leader; with shards, those of the shards it may take
	// next, when the Cluster is a ShardSuccession and Standby a
	// ShardFollower, else of every shard others own)
	// and keeps them rebuilt, so that a term it wins serves at once,
	// without loading the store (etcdstore.Mirror). Nil: each term loads
	// the store when it starts.
	Standby Standby

	// GroupTargets, if set, says before every step of a group whether its
	// GroupRecords may carry the KIP-848 targets of its epoch bumps
	// (coordinator.Group.SetGroupTargets): false while the store must
	// stay readable by tenures from before them, the nodes of an older
	// build in an HA set being upgraded one at a time (the etcd store's
	// format 6; docs/STORE.md). It is called often and must be cheap,
	// and once true stay true. Nil: always.
	GroupTargets func() bool

	// TakeoverWait is how long a group request that arrives while this
	// node loads its group's term, or while another installs its group
	// at a takeover from the standby, waits for that to end before it is
	// answered COORDINATOR_LOAD_IN_PROGRESS (takeoverwait.go). The wait
	// holds the request, not its connection's reader, except for reads
	// (withgroup.go), which hold the reader until their answer is
	// durable anyway. Default 250 ms; 0 answers at once.
	TakeoverWait time.Duration

	// PeerProbe is how often a node of an HA set probes the Kafka
	// listener of every other registered node (view.go): a refused
	// connection, or one closed within probeClosedWithin, marks the node
	// down at once, without waiting up to an election TTL for its
	// registration to expire; a connection that stays open is held for
	// probeHold intervals (its closing ends the hold) before the next
	// dial. Default 250 ms; 0 turns probing off.
	PeerProbe time.Duration

	// CoordinatorWait is how long a node of an HA set holds a
	// FindCoordinator while no live node coordinates the group (an
	// election or a shard's move is under way), answering as soon as one
	// does, before it answers COORDINATOR_NOT_AVAILABLE: some clients back
	// off for long after that answer, or give up. Default 6 s (tenure
	// serve: the election TTL and a second, at most 8 s); 0 answers at
	// once.
	CoordinatorWait time.Duration

	// ViewSettle is how long after the set's view changes (a node left
	// or came back, or a departed node's broker ID points elsewhere) a
	// closed connection starts no connection-loss grace
	// (Core.ConnLossGrace) for the members whose latest request it
	// carried. Clients close connections themselves when Metadata moves
	// a broker ID to another address (kgo stops the broker and dials the
	// new one), and a member whose heartbeat connection so closed may not
	// be heard again within the grace: a kgo classic member heartbeats
	// every 3 s, and its next heartbeat may first go to a node that is
	// not the coordinator. Such a member keeps its session timeout (or
	// its takeover grace). Default 10 s: kgo reloads metadata at most
	// every 5 s (MetadataMinAge), then needs a heartbeat interval and a
	// coordinator lookup. A member whose process dies within that window
	// goes at its session timeout instead of the grace. A connection
	// accepted within it after a change that departed a node has its
	// first Fetch told "moved" (view.go, connGen): its client may be one
	// the change sent here, still holding its old coordinator.
	ViewSettle time.Duration

	// TopicRefresh is how often a node of an HA set reloads the topics,
	// which any node may create. Default 1 s.
	TopicRefresh time.Duration

	// Logger receives the server's logs; nil means zap.NewNop().
	Logger *zap.Logger

	// Registerer, if not nil, gets the server's Prometheus metrics (see
	// the package doc for the list). Nil keeps them unregistered.
	Registerer prometheus.Registerer

	// PerGroupMetrics exports one series per group for its generation,
	// member count and unowned partitions. Each group adds three series,
	// so turn it off when a server holds more than a few thousand groups.
	// Default true.
	PerGroupMetrics bool

	// NodeID is this coordinator's broker ID in Metadata and
	// FindCoordinator. Default 0.
	NodeID int32

	// Advertise is the host:port clients are told to connect to, in
	// Metadata and FindCoordinator. Empty means the listener's address.
	// Only without Listeners, which advertise their own.
	Advertise string

	// Listeners are the listeners Serve serves, in the order of its
	// net.Listeners, each with its name, security protocol and
	// advertised address. Empty means one PLAINTEXT listener named
	// PLAINTEXT, advertised at Advertise: no TLS, no authentication.
	Listeners []Listener

	// TLS is the server side of the SSL and SASL_SSL listeners (required
	// with them): its certificate, and with ClientAuth
	// RequireAndVerifyClientCert, the client certificates it requires
	// (mTLS). A MinVersion below TLS 1.2 is raised to 1.2. LoadTLS builds
	// one from PEM files that is reloaded when the files change.
	TLS *tls.Config

	// SASLMechanisms are the mechanisms the SASL listeners offer, among
	// PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. Default SCRAM-SHA-256 and
	// SCRAM-SHA-512. PLAIN sends the password itself: offer it over TLS
	// only (SASL_SSL).
	SASLMechanisms []string

	// Credentials keeps the SASL users' SCRAM credentials, which the
	// SASL listeners check and DescribeUserScramCredentials and
	// AlterUserScramCredentials manage. Default: Store, if it implements
	// store.CredentialStore. Every node of an HA set shares one
	// (etcdstore.Users).
	Credentials store.CredentialStore

	// AuthTimeout closes a connection that has not finished its TLS
	// handshake and its SASL authentication this long after it was
	// accepted. Default 10 s.
	AuthTimeout time.Duration

	// AuthFailureDelay delays the answer to a failed SASL authentication,
	// and the close that follows it, to slow down password guessing
	// (Kafka: connection.failed.authentication.delay.ms). Default 100 ms.
	AuthFailureDelay time.Duration

	// MaxAuthFrameSize is the largest request a SASL client may send
	// before it has authenticated (Kafka: sasl.server.max.receive.size);
	// a larger one closes its connection before anything is allocated for
	// it. Default 64 KiB: a SCRAM message is a few hundred bytes.
	MaxAuthFrameSize int32

	// ClusterID is reported in Metadata. Default "tenure".
	ClusterID string

	// DefaultPartitions is the partition count of a topic created by
	// Metadata auto-creation or by CreateTopics with -1. Default 64.
	DefaultPartitions int32

	// Topics are created at start-up if missing, on every node of an HA
	// set (the first creator's ID wins). A declared topic that exists with
	// another partition count keeps it, with a warning: partitions are
	// never added or removed. Clients that do not auto-create topics
	// (librdkafka) need their topics declared or created.
	Topics []TopicSpec

	// AutoCreateTopics creates an unknown topic with DefaultPartitions
	// when a client asks for it in Metadata with AllowAutoTopicCreation.
	// Default true.
	AutoCreateTopics bool

	// MaxPartitions is the most partitions one topic may have; a larger
	// CreateTopics is answered INVALID_PARTITIONS. Default 10,000.
	MaxPartitions int32

	// MaxTopics is the most topics the server holds; a creation beyond it
	// is answered POLICY_VIOLATION. Default 10,000.
	MaxTopics int

	// MaxGroups is the most groups the server holds; a request that would
	// create one more is answered COORDINATOR_NOT_AVAILABLE (retriable:
	// clients back off and retry, and succeed once a group is deleted).
	// Default 100,000.
	MaxGroups int

	// MaxConnections is the most client connections open at once; a
	// connection beyond it is closed as soon as it is accepted. Default
	// 10,000.
	MaxConnections int

	// MaxFrameSize is the largest request accepted, in bytes (the 4-byte
	// size prefix excluded). A larger request closes its connection
	// before anything is allocated for it. Default 4 MiB: the largest
	// request tenure expects is the SyncGroup of the leader of a full
	// classic group, which carries every member's assignment (about 90
	// bytes per member plus 4 per partition: under 1 MiB for 10,000
	// members), and memory is only allocated as the bytes arrive.
	MaxFrameSize int32

	// IdleTimeout closes a connection that has sent nothing for this long
	// while no request of it is pending (Kafka:
	// connections.max.idle.ms). Default 10 minutes.
	IdleTimeout time.Duration

	// KeepAlive, when positive, has the kernel abort a connection whose
	// peer has answered nothing for this long, not even TCP keepalive
	// probes (sent after a second of silence, once a second): a crashed
	// host or a network cut, not a paused process, whose kernel still
	// answers. The connection's end then counts as a close for the
	// connection-loss grace (Core.ConnLossGrace), so such a member goes
	// after KeepAlive plus the grace rather than its session timeout. Zero
	// keeps the platform's defaults (Go's listener probes after 15 s of
	// idleness, and a dead peer takes minutes to notice). Pick it above
	// the longest network cut a live member should survive.
	KeepAlive time.Duration

	// WriteTimeout closes a connection whose client does not read its
	// responses for this long. Default 30 s.
	WriteTimeout time.Duration

	// MaxInFlight is the most requests one connection may have waiting
	// for their responses; the server stops reading from the connection
	// until earlier responses are written. Default 128.
	MaxInFlight int

	// MaxFetchWait caps how long a Fetch is held before its empty answer
	// (it is held for its MaxWaitMillis otherwise). Default 30 s.
	MaxFetchWait time.Duration

	// ShutdownTimeout bounds how long Serve spends answering in-flight
	// requests once its context is cancelled. Default 5 s.
	ShutdownTimeout time.Duration

	// StoreTimeout bounds one store write or load. A write that takes
	// longer fails, which takes its groups offline until they are
	// reloaded. Default 10 s. The load at the start of an HA term is
	// bounded by the term instead, and tried again until it succeeds:
	// a large store can take longer, and the term serves nothing without
	// it.
	StoreTimeout time.Duration

	// Authorization turns on Kafka's ACL authorization (authz.go): every
	// request is checked as Kafka checks it against the bindings in
	// ACLStore, and what no binding allows is denied. Off (the default),
	// every request is allowed and the ACL APIs answer SECURITY_DISABLED,
	// as a Kafka broker without an authorizer does.
	Authorization bool

	// SuperUsers may do anything while Authorization is on, whatever the
	// ACLs say (Kafka's super.users): principals such as "User:admin".
	SuperUsers []string

	// ACLStore keeps the ACLs. Default: Store, if it implements
	// store.ACLStore. Every node of an HA set shares one.
	ACLStore store.ACLStore

	// ACLRefresh is how often the ACLs are reloaded from ACLStore as a
	// fallback: they are reloaded at once after every change made through
	// this node, and, with a store that watches (etcd), after every
	// change made through another. Default 30 s.
	ACLRefresh time.Duration

	// QuotaRequestRate is the most requests per second one principal may
	// send, over all its connections; 0 (the default) is no quota.
	// QuotaConnectionRequestRate is the same for one connection. A
	// client over either is throttled as Kafka throttles (quota.go): its
	// responses carry throttle_time_ms and the server reads nothing more
	// from the connection until the throttle time has passed.
	QuotaRequestRate           float64
	QuotaConnectionRequestRate float64

	// MaxParkedPerConnection is the most requests one connection may have
	// parked at once: JoinGroups and SyncGroups waiting in their group,
	// Fetches held for MaxWait. Beyond it a Fetch is answered at once and
	// a JoinGroup or SyncGroup COORDINATOR_LOAD_IN_PROGRESS, which
	// clients retry. Default 16: a consumer parks one of each.
	MaxParkedPerConnection int

	// MaxParkedPerGroup is the most requests one group may hold parked,
	// from all its members' connections; beyond it a JoinGroup or
	// SyncGroup is answered COORDINATOR_LOAD_IN_PROGRESS. Each parked
	// request keeps its frame, so this bounds a group's memory apart
	// from its member count. Default 20,000: two per member of a full
	// group of the default size.
	MaxParkedPerGroup int

	// MaxConnectionsPerIP is the most connections open at once from one
	// client IP address; one beyond it is closed on accept. 0 (the
	// default) is no limit.
	MaxConnectionsPerIP int

	// SignGrants signs every ownership the coordinator grants with the
	// active key of KeyStore's ring (Ed25519, over group, topic ID,
	// partition, token and member) and sends the signatures to the member
	// in a tagged field stock clients skip (signing.go): fences with an
	// epoch.Verifier then refuse tokens nobody issued. Off by default.
	SignGrants bool

	// KeyStore keeps the signing keys. Default: Store, if it implements
	// store.KeyStore. Every node of an HA set shares one.
	KeyStore store.KeyStore

	// KeyRefresh is how often the signing keys are reloaded as a
	// fallback to the store's watch, and how often retired keys past
	// KeyRetention are revoked. Default 30 s.
	KeyRefresh time.Duration

	// KeyRetention is how long a retired key goes on verifying before a
	// node revokes it: it must outlast the re-granting of every live
	// ownership under the new key (a heartbeat interval after the nodes
	// see the rotation) and the writes in flight with the old signature.
	// Default 24 h.
	KeyRetention time.Duration

	// KeyPublishDelay is how long RotateKey publishes the next key (as
	// pending: it verifies, it does not sign) before the nodes sign with
	// it, so that resources that fetch the keys now and then (tenure
	// worker: every 30 s) hold it before the first token it signs reaches
	// them, and refuse no honest write. A node promotes a pending key at
	// its first key refresh (KeyRefresh) after the delay. 0, the default
	// here (tenure serve's is 1 m), signs with the new key at once.
	KeyPublishDelay time.Duration
}

// TopicSpec names a topic and its partition count.
type TopicSpec struct {
	Name       string
	Partitions int32
}

// DefaultConfig returns the defaults documented on each field, with
// coordinator.DefaultConfig as Core and no Store.
func DefaultConfig() Config {
	return Config{
		Core:              coordinator.DefaultConfig(),
		PerGroupMetrics:   true,
		ClusterID:         "tenure",
		DefaultPartitions: 64,
		AutoCreateTopics:  true,
		MaxPartitions:     10000,
		MaxTopics:         10000,
		MaxGroups:         100000,
		MaxConnections:    10000,
		MaxFrameSize:      4 << 20,
		IdleTimeout:       10 * time.Minute,
		WriteTimeout:      30 * time.Second,
		MaxInFlight:       128,
		MaxFetchWait:      30 * time.Second,
		ShutdownTimeout:   5 * time.Second,
		StoreTimeout:      10 * time.Second,
		TopicRefresh:      time.Second,
		PeerProbe:         250 * time.Millisecond,
		CoordinatorWait:   6 * time.Second,
		TakeoverWait:      250 * time.Millisecond,
		ViewSettle:        coordinator.DefaultViewSettle,
		SASLMechanisms:    []string{ScramSHA256, ScramSHA512},
		AuthTimeout:       10 * time.Second,
		AuthFailureDelay:  100 * time.Millisecond,
		MaxAuthFrameSize:  64 << 10,

		ACLRefresh:             30 * time.Second,
		KeyRefresh:             30 * time.Second,
		KeyRetention:           24 * time.Hour,
		MaxParkedPerConnection: 16,
		MaxParkedPerGroup:      20000,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("server: invalid config")

// Validate reports every setting that is out of range, including those of
// Core (whose Topics resolver the server supplies itself).
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Store == nil && c.Cluster == nil {
		bad("no store")
	}
	if c.TopicStore == nil {
		if _, ok := c.Store.(store.TopicStore); !ok {
			bad("no topic store: Store does not keep topics")
		}
	}
	if c.PeerProbe < 0 {
		bad("peer probe interval %v is negative", c.PeerProbe)
	}
	if c.CoordinatorWait < 0 {
		bad("coordinator wait %v is negative", c.CoordinatorWait)
	}
	if c.ViewSettle < 0 {
		bad("view settle %v is negative", c.ViewSettle)
	}
	if c.TakeoverWait < 0 {
		bad("takeover wait %v is negative", c.TakeoverWait)
	}
	if c.Cluster != nil && c.TopicRefresh <= 0 {
		bad("topic refresh %v must be positive", c.TopicRefresh)
	}
	if c.NodeID < 0 {
		bad("node ID %d is negative", c.NodeID)
	}
	errs = append(errs, c.validateSecurity()...)
	if c.Advertise != "" {
		host, port, err := net.SplitHostPort(c.Advertise)
		if err != nil || host == "" {
			bad("advertised address %q is not host:port", c.Advertise)
		} else if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			bad("advertised port %q is not in 1..65535", port)
		}
	}
	if c.MaxPartitions <= 0 {
		bad("max partitions %d must be positive", c.MaxPartitions)
	}
	if c.DefaultPartitions <= 0 || c.DefaultPartitions > c.MaxPartitions {
		bad("default partitions %d must be in 1..%d (max partitions)", c.DefaultPartitions, c.MaxPartitions)
	}
	if c.MaxTopics <= 0 {
		bad("max topics %d must be positive", c.MaxTopics)
	}
	declared := make(map[string]bool, len(c.Topics))
	for _, t := range c.Topics {
		switch {
		case !validTopicName(t.Name):
			bad("declared topic %q: not a valid topic name (1 to 249 of a-z A-Z 0-9 . _ -)", t.Name)
		case t.Partitions <= 0 || t.Partitions > c.MaxPartitions:
			bad("declared topic %q: %d partitions, not in 1..%d (max partitions)", t.Name, t.Partitions, c.MaxPartitions)
		case declared[t.Name]:
			bad("topic %q is declared twice", t.Name)
		}
		declared[t.Name] = true
	}
	if c.MaxGroups <= 0 {
		bad("max groups %d must be positive", c.MaxGroups)
	}
	if c.MaxConnections <= 0 {
		bad("max connections %d must be positive", c.MaxConnections)
	}
	if c.MaxFrameSize < minFrameSize {
		bad("max frame size %d is below %d bytes", c.MaxFrameSize, minFrameSize)
	}
	if c.IdleTimeout <= 0 {
		bad("idle timeout %v must be positive", c.IdleTimeout)
	}
	if c.KeepAlive != 0 && c.KeepAlive < 2*keepAliveProbe {
		bad("keepalive %v must be 0 (off) or at least %v (a probe after a second, then one more)", c.KeepAlive, 2*keepAliveProbe)
	}
	if c.WriteTimeout <= 0 {
		bad("write timeout %v must be positive", c.WriteTimeout)
	}
	if c.MaxInFlight <= 0 {
		bad("max in-flight %d must be positive", c.MaxInFlight)
	}
	if c.MaxFetchWait < 0 {
		bad("max fetch wait %v is negative", c.MaxFetchWait)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown timeout %v must be positive", c.ShutdownTimeout)
	}
	if c.StoreTimeout <= 0 {
		bad("store timeout %v must be positive", c.StoreTimeout)
	}
	if c.Authorization && c.ACLStore == nil {
		if _, ok := c.Store.(store.ACLStore); !ok {
			bad("authorization needs an ACL store: Store does not keep ACLs")
		}
	}
	for _, u := range c.SuperUsers {
		if i := strings.IndexByte(u, ':'); i <= 0 || i == len(u)-1 {
			bad("super user %q is not a principal of the form User:name", u)
		}
	}
	if c.ACLRefresh <= 0 {
		bad("ACL refresh %v must be positive", c.ACLRefresh)
	}
	if c.SignGrants && c.KeyStore == nil {
		if _, ok := c.Store.(store.KeyStore); !ok {
			bad("signing grants needs a key store: Store does not keep signing keys")
		}
	}
	if c.KeyRefresh <= 0 {
		bad("key refresh %v must be positive", c.KeyRefresh)
	}
	if c.KeyPublishDelay < 0 {
		bad("key publish delay %v must not be negative", c.KeyPublishDelay)
	}
	if c.KeyRetention <= 0 {
		bad("key retention %v must be positive", c.KeyRetention)
	}
	if c.QuotaRequestRate < 0 || c.QuotaConnectionRequestRate < 0 {
		bad("request quotas %v (principal) and %v (connection) must not be negative", c.QuotaRequestRate, c.QuotaConnectionRequestRate)
	}
	if c.MaxParkedPerConnection <= 0 {
		bad("max parked per connection %d must be positive", c.MaxParkedPerConnection)
	}
	if c.MaxParkedPerGroup <= 0 {
		bad("max parked per group %d must be positive", c.MaxParkedPerGroup)
	}
	if c.MaxConnectionsPerIP < 0 {
		bad("max connections per IP %d is negative", c.MaxConnectionsPerIP)
	}
	core := c.Core
	if core.Topics == nil {
		core.Topics = coordinator.NewStaticTopics() // the server supplies its own
	}
	if err := core.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: core: %w", ErrInvalidConfig, err))
	}
	return errors.Join(errs...)
}

// minFrameSize is the smallest MaxFrameSize that still admits the request
// header of every API with a reasonable client ID.
const minFrameSize = 1024
