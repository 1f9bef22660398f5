package server

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics are the server's Prometheus metrics (listed in the package doc).
type metrics struct {
	requests         *prometheus.CounterVec
	heartbeat        *prometheus.HistogramVec
	rebalances       *prometheus.CounterVec
	handoff          prometheus.Histogram
	generation       *prometheus.GaugeVec
	members          *prometheus.GaugeVec
	unowned          *prometheus.GaugeVec
	commitsRejected  prometheus.Counter
	expiredVec       *prometheus.CounterVec
	connections      prometheus.Gauge
	connClosed       *prometheus.CounterVec
	limits           *prometheus.CounterVec
	groups           prometheus.Gauge
	topics           prometheus.Gauge
	storeFailures    prometheus.Counter
	persistSeconds   prometheus.Histogram
	batchRecords     prometheus.Histogram
	batchWrites      prometheus.Histogram
	groupsOffline    *prometheus.CounterVec
	groupLoads       *prometheus.CounterVec
	takeovers        *prometheus.CounterVec
	standbyShards    prometheus.Gauge
	corePanics       prometheus.Counter
	leading          prometheus.Gauge
	terms            prometheus.Counter
	authentications  *prometheus.CounterVec
	deniedVec        *prometheus.CounterVec
	acls             prometheus.Gauge
	throttled        *prometheus.CounterVec
	throttleSeconds  prometheus.Counter
	peersDown        prometheus.Gauge
	viewChanges      prometheus.Counter
	findHeld         prometheus.Counter
	connLossSettling prometheus.Counter
	takeoverWaits    *prometheus.CounterVec

	// okRequests caches the error="NONE" child of every served key, so
	// the common path is one atomic add.
	okRequests [maxKey + 1]prometheus.Counter
	// errRequests caches the other children by key<<16 | code.
	errRequests sync.Map
	// hbClassic and hbConsumer are the heartbeat histogram's children.
	hbClassic, hbConsumer prometheus.Observer
	// deniedByKey caches deniedVec's child of every served key.
	deniedByKey [maxKey + 1]prometheus.Counter
}

// heartbeatBuckets are the heartbeat histogram's bounds: 18 from 1µs,
// where a heartbeat that changes nothing is answered, to 10s, past the
// longest takeover wait an operator would configure, each 2.6 times the
// last. An etcd write (milliseconds) and a takeover wait (up to
// Config.TakeoverWait) fall within them, not in +Inf.
var heartbeatBuckets = prometheus.ExponentialBucketsRange(1e-6, 10, 18)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_requests_total",
			Help: "Requests answered, by API and the response's error code (NONE for success; for per-partition responses, the first error).",
		}, []string{"api", "error"}),
		heartbeat: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tenure_heartbeat_duration_seconds",
			Help:    "Server-side time of Heartbeat and ConsumerGroupHeartbeat, from the frame read to the response queued, including any wait for the group's takeover or for the store write its answer depends on.",
			Buckets: heartbeatBuckets,
		}, []string{"api"}),
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_rebalances_total",
			Help: "New generations (classic) and group epochs (KIP-848), by group type and reason (member-joined, member-left, member-expired, drain, ...; several joined by commas), as the generation log records them.",
		}, []string{"type", "reason"}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tenure_handoff_unowned_seconds",
			Help:    "For each partition a rebalance moved, how long it had no owner: from its release by the old owner (or the rebalance, if it had none) to its grant to the new owner.",
			Buckets: []float64{0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 45, 90},
		}),
		generation: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tenure_group_generation",
			Help: "Current generation (classic) or group epoch (KIP-848) per group; only with per-group metrics on.",
		}, []string{"group"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tenure_group_members",
			Help: "Members per group; only with per-group metrics on.",
		}, []string{"group"}),
		unowned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tenure_group_unowned_partitions",
			Help: "Partitions of the group's subscribed topics with no current owner; only with per-group metrics on and a core that reports it.",
		}, []string{"group"}),
		commitsRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_commits_rejected_total",
			Help: "Offset commits rejected because the committer did not own the partition at a current token.",
		}),
		expiredVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_members_expired_total",
			Help: "Members expelled without leaving, by reason: session-timeout (silent for a session), connection-closed (the connection of their latest request closed and they were not heard from within the connection-loss grace).",
		}, []string{"reason"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_connections",
			Help: "Open client connections.",
		}),
		connClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_connections_closed_total",
			Help: "Client connections closed, by reason.",
		}, []string{"reason"}),
		limits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_limit_rejections_total",
			Help: "Requests or connections refused because a configured limit was reached, by limit.",
		}, []string{"limit"}),
		groups: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_groups",
			Help: "Groups held by the server.",
		}),
		topics: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_topics",
			Help: "Virtual topics held by the server.",
		}),
		storeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_store_failures_total",
			Help: "Store writes (batches) that failed; each takes the groups it held offline until they are reloaded.",
		}),
		persistSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tenure_store_persist_seconds",
			Help:    "Duration of one batched store write (Store.Persist) as the server's writer sees it.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tenure_store_batch_records",
			Help:    "Records per batched store write.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15),
		}),
		batchWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tenure_store_batch_readies",
			Help:    "Group Readies (and topic creations) per batched store write: how many writes one fsync serves.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15),
		}),
		groupsOffline: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_groups_offline_total",
			Help: "Groups taken offline, by reason: store (a write failed) or panic (the group core panicked on a broken invariant; a bug).",
		}, []string{"reason"}),
		groupLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_group_reloads_total",
			Help: "Groups rebuilt from the store after going offline (reloaded), or that failed to load (error).",
		}, []string{"result"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_takeover_groups_total",
			Help: "Groups a term started with, by where they came from: standby (rebuilt ahead of the takeover, resumed at once), mirror (restored at the takeover from the standby's copy of the store, which had changed since the rebuild) or store (loaded from the store: no standby, or it could not catch up).",
		}, []string{"from"}),
		standbyShards: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_standby_shards",
			Help: "Shards whose writes this node's warm standby follows (with shards: those it may take next; the others' takeovers load the store).",
		}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_coordinating",
			Help: "1 while this node coordinates groups (the leader of its HA set, a single node, or with shards the owner of at least one), else 0.",
		}),
		terms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_coordinator_terms_total",
			Help: "Leadership terms this node served (each loads every group from the store): 1 for a single node, one per fail-over to this node in an HA set; with shards, one per shard term (each loads the shard's groups).",
		}),
		corePanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_group_panics_total",
			Help: "Panics of a group core, each contained to its group. Any is a bug: the log has the stack and the request.",
		}),
		authentications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_authentications_total",
			Help: "SASL authentications by mechanism and result (ok, failed); mechanism none, result refused counts requests sent before authenticating, which close their connection.",
		}, []string{"mechanism", "result"}),
		deniedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_authorization_denied_total",
			Help: "Authorization refusals, by API: requests, or resources within one (a topic of a commit, a group of a describe), answered with an *_AUTHORIZATION_FAILED code. Resources left out of listings are not counted.",
		}, []string{"api"}),
		acls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_acls",
			Help: "ACL bindings the authorizer holds.",
		}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_throttled_requests_total",
			Help: "Requests answered with a throttle time because their client was over a request-rate quota, by quota: principal or connection (the larger throttle's).",
		}, []string{"quota"}),
		throttleSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_throttle_seconds_total",
			Help: "Throttle time given to clients over a request-rate quota, summed: how long their connections were not read.",
		}),
		peersDown: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_peers_down",
			Help: "Registered nodes of the HA set whose Kafka listener this node's probe finds down (refused, or closed at once): left out of Metadata and aliased before their registration expires.",
		}),
		viewChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_view_changes_total",
			Help: "Changes of the HA set that this node tells clients of (live nodes, departed nodes' aliases): each answers parked Fetches, and each connection's next Fetch, NOT_LEADER_OR_FOLLOWER once, so that clients reload metadata.",
		}),
		connLossSettling: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_connection_loss_settling_total",
			Help: "Members whose latest request's connection closed while the set's view settled (Config.ViewSettle), so that no connection-loss grace started: clients moving to the addresses a view change gave their brokers' IDs.",
		}),
		takeoverWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_takeover_waits_total",
			Help: "Group requests that arrived while this node loaded their group's term, or another installed their group at a takeover, and waited for that to end (up to Config.TakeoverWait), by outcome: served (handled as if they had arrived after), timeout (answered COORDINATOR_LOAD_IN_PROGRESS).",
		}, []string{"outcome"}),
		findHeld: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_find_coordinator_held_total",
			Help: "FindCoordinator requests held because no live node coordinated their group (up to Config.CoordinatorWait), rather than answered COORDINATOR_NOT_AVAILABLE at once.",
		}),
	}
	for a := range served {
		m.okRequests[a.key] = m.requests.WithLabelValues(kmsg.NameForKey(a.key), "NONE")
	}
	for a := range served {
		m.deniedByKey[a.key] = m.deniedVec.WithLabelValues(kmsg.NameForKey(a.key))
	}
	for _, o := range []string{"served", "timeout"} {
		m.takeoverWaits.WithLabelValues(o)
	}
	m.hbClassic = m.heartbeat.WithLabelValues(kmsg.NameForKey(12))
	m.hbConsumer = m.heartbeat.WithLabelValues(kmsg.NameForKey(68))
	if reg != nil {
		for _, c := range []prometheus.Collector{
			m.requests, m.heartbeat, m.rebalances, m.handoff, m.generation, m.members, m.unowned,
			m.commitsRejected, m.expiredVec, m.connections, m.connClosed, m.limits, m.groups, m.topics,
			m.storeFailures, m.persistSeconds, m.batchRecords, m.batchWrites, m.groupsOffline,
			m.groupLoads, m.takeovers, m.standbyShards, m.corePanics, m.leading, m.terms, m.authentications,
			m.deniedVec, m.acls, m.throttled, m.throttleSeconds,
			m.peersDown, m.viewChanges, m.findHeld, m.connLossSettling, m.takeoverWaits,
		} {
			reg.MustRegister(c)
		}
	}
	return m
}

// expired returns the expiry counter of reason (a classic session expiry
// has none).
func (m *metrics) expired(reason string) prometheus.Counter {
	if reason == "" {
		reason = "session-timeout"
	}
	return m.expiredVec.WithLabelValues(reason)
}

// denied returns the authorization refusal counter of the API of key.
func (m *metrics) denied(key int16) prometheus.Counter {
	if key >= 0 && int(key) <= maxKey && m.deniedByKey[key] != nil {
		return m.deniedByKey[key]
	}
	return m.deniedVec.WithLabelValues(kmsg.NameForKey(key))
}

// countResponse counts one answered request.
func (m *metrics) countResponse(resp kmsg.Response) {
	if raw, ok := resp.(*rawSASLResponse); ok {
		resp = &raw.SASLAuthenticateResponse
	}
	key := resp.Key()
	var code int16
	if key >= 0 && int(key) <= maxKey && apis[key].responseCode != nil {
		if code = apis[key].responseCode(resp); code == 0 {
			m.okRequests[key].Inc()
			return
		}
	}
	id := uint32(uint16(key))<<16 | uint32(uint16(code))
	if c, ok := m.errRequests.Load(id); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	name := "NONE"
	if code != 0 {
		name = "UNKNOWN_CODE_" + strconv.Itoa(int(code))
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			name = e.Message
		}
	}
	c := m.requests.WithLabelValues(kmsg.NameForKey(key), name)
	m.errRequests.Store(id, c)
	c.Inc()
}

// observeHeartbeat records in the heartbeat histogram a response of key
// queued now for a request whose frame was read at start; responses of
// other keys are not its.
func (m *metrics) observeHeartbeat(key int16, start time.Time) {
	switch key {
	case 12:
		m.hbClassic.Observe(time.Since(start).Seconds())
	case 68:
		m.hbConsumer.Observe(time.Since(start).Seconds())
	}
}
