package ha

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
)

// Opt configures a Node; see Join.
type Opt interface{ apply(*cfg) }

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

type cfg struct {
	prefix   string
	ttl      time.Duration
	log      *zap.Logger
	reg      prometheus.Registerer
	maxDrift float64
	margin   time.Duration // 0: TTL/10, decided in validate
	http     string
	// listeners are the advertised addresses by listener name.
	listeners map[string]string
	shards    int
	preferID  int32 // -1: none
	format    int   // ReadsFormat; 0: not advertised
}

// Defaults of the options.
const (
	// DefaultPrefix is the prefix of the etcd store, whose meta/ directory
	// the package's keys live in.
	DefaultPrefix = "/tenure/"
	// DefaultElectionTTL is the lease TTL: how long a leader that stopped
	// renewing keeps the leader key, and so about how long a fail-over
	// takes after a leader dies.
	DefaultElectionTTL = 5 * time.Second
	// MinElectionTTL is the shortest ElectionTTL: etcd grants leases in
	// whole seconds, and raises a TTL below 1.5 of its election timeouts
	// to that anyway.
	MinElectionTTL = time.Second
	// DefaultMaxDrift is the clock-rate drift assumed between a node and
	// the etcd leader; see epoch.DefaultMaxDrift for why 1 %.
	DefaultMaxDrift = epoch.DefaultMaxDrift
)

func defaultCfg() cfg {
	return cfg{
		prefix:   DefaultPrefix,
		ttl:      DefaultElectionTTL,
		log:      zap.NewNop(),
		maxDrift: DefaultMaxDrift,
		shards:   1,
		preferID: -1,
	}
}

// Prefix sets the prefix under which the node keeps its keys (in
// <prefix>meta/ha/), overriding the default "/tenure/". It must be the
// etcd store's prefix (etcdstore.Prefix), whose loads skip meta/. A
// missing trailing "/" is added.
func Prefix(p string) Opt {
	return opt(func(c *cfg) {
		if !strings.HasSuffix(p, "/") {
			p += "/"
		}
		c.prefix = p
	})
}

// ElectionTTL sets the TTL of the node's lease, overriding the default
// 5 s. It bounds how long the set is without a leader after the leader
// dies: its successor wins at most about TTL (plus etcd's half-second
// expiry tick) after the last keepalive etcd received. It must be whole
// seconds (etcd's lease unit) and at least 1 s.
func ElectionTTL(d time.Duration) Opt { return opt(func(c *cfg) { c.ttl = d }) }

// Logger sets the logger, overriding the default of no logging.
func Logger(l *zap.Logger) Opt { return opt(func(c *cfg) { c.log = l }) }

// Registerer registers the node's metrics with r (default: none). Close
// unregisters them, so that a node joined later may register again.
func Registerer(r prometheus.Registerer) Opt { return opt(func(c *cfg) { c.reg = r }) }

// MaxDrift sets the bound on the relative rate difference between this
// node's monotonic clock and the etcd leader's, overriding the default
// 0.01 (epoch.DefaultMaxDrift). A term ends TTL×MaxDrift earlier than it
// would with perfect clocks. It must be in [0, 0.5).
func MaxDrift(d float64) Opt { return opt(func(c *cfg) { c.maxDrift = d }) }

// Margin sets how much earlier than the drift bound alone requires a term
// becomes invalid, overriding the default ElectionTTL/10 (500 ms at the
// default TTL; at least 100 ms, since the TTL is at least 1 s).
//
// The margin is the leader's time to act on a Valid check: between
// checking and the effect leaving the process (a reply written to a
// socket) there is scheduling, a GC pause, a slow syscall. It also covers
// the latency of the timer that closes Done, and makes the bound strict at
// the extreme drift. It must exceed the etcd cluster's heartbeat interval
// (100 ms by default; the package doc says why). It scales with the TTL
// because the TTL is what an
// operator raises on slow or loaded machines, where those stalls are
// longer. It costs nothing while keepalives succeed (a healthy leader's
// deadline stays more than half a TTL ahead); when they fail, the leader
// stops serving Margin earlier than it must. It must be positive, and
// leave a term at least TTL/2 after a keepalive is sent, so that two lost
// keepalives in a row do not end it.
func Margin(d time.Duration) Opt { return opt(func(c *cfg) { c.margin = d }) }

// PreferID makes a node that joins for the first time at its address take
// ID id, if no live node has it and no other address had it, instead of
// the lowest free one (default: none). A node that rejoins keeps the ID
// its address had, whatever this says. tenure serve prefers the number
// its etcd member's name ends in, so that member n1 is node 1.
func PreferID(id int32) Opt { return opt(func(c *cfg) { c.preferID = id }) }

// HTTPAddr registers addr (host:port) as the node's HTTP listener, where
// the other nodes reach its admin API (default: none, registered as "").
// A follower forwards an admin request that only the leader can serve to
// the leader's HTTPAddr. It must be an address the other nodes can
// reach, with a port other than 0.
func HTTPAddr(addr string) Opt { return opt(func(c *cfg) { c.http = addr }) }

// Listeners registers the node's advertised host:port on each of its
// listeners, by listener name (NodeInfo.Listeners), beside the advertised
// address Join takes; default none. Each address must be host:port.
func Listeners(addrs map[string]string) Opt {
	return opt(func(c *cfg) { c.listeners = maps.Clone(addrs) })
}

// Shards makes the set coordinate groups in n shards instead of under one
// leader (default 1: one leader). Each shard has an owner of its own,
// spread evenly over the live nodes (see ShardTerms); a group belongs to
// shard ShardOf(group, n). The count is a property of the prefix: the
// first node records it, and a node joining with another count is
// refused (ErrShardCount), since two counts would give one group two
// owners. At most MaxShards.
func Shards(n int) Opt { return opt(func(c *cfg) { c.shards = n }) }

// ReadsFormat advertises, in the node's registration (NodeInfo.Format),
// that the node reads the store's formats up to v (etcdstore.
// FormatVersion); default none, which the other nodes take for a node of
// a tenure from before the field, as they take a registration without it
// (FormatReaders). The set raises the store's format only once every
// registered node reads the new one. It must not be negative.
func ReadsFormat(v int) Opt { return opt(func(c *cfg) { c.format = v }) }

// MaxShards bounds Shards: each shard is a key, a term and a store per
// owner, and more shards than a few per group's worth of CPU buy nothing.
const MaxShards = 4096

// ErrInvalidOption is wrapped by Join's errors for bad options.
var ErrInvalidOption = errors.New("ha: invalid option")

// keepaliveInterval is how often a node renews its lease: six renewals per
// TTL, so that the window after one (0.89 TTL at the defaults) spans
// several, and losing two in a row ends nothing.
func keepaliveInterval(ttl time.Duration) time.Duration { return ttl / 6 }

func (c *cfg) window() epoch.Window {
	return epoch.Window{SessionTimeout: c.ttl, MaxDrift: c.maxDrift, Margin: c.margin}
}

func (c *cfg) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if c.shards < 1 || c.shards > MaxShards {
		bad("shards %d is outside [1, %d]", c.shards, MaxShards)
	}
	if c.format < 0 {
		bad("format %d is negative", c.format)
	}
	if c.prefix == "/" || c.prefix == "" {
		bad("the prefix must not be empty")
	}
	ttlOK := true
	switch {
	case c.ttl < MinElectionTTL:
		bad("election TTL %v is below %v", c.ttl, MinElectionTTL)
		ttlOK = false
	case c.ttl%time.Second != 0:
		bad("election TTL %v is not whole seconds", c.ttl)
		ttlOK = false
	}
	driftOK := c.maxDrift >= 0 && c.maxDrift < 0.5
	if !driftOK {
		bad("max drift %v is outside [0, 0.5)", c.maxDrift)
	}
	if c.margin == 0 && ttlOK {
		c.margin = c.ttl / 10
	}
	if c.margin <= 0 {
		bad("margin %v must be positive", c.margin)
	} else if ttlOK && driftOK {
		if after, least := c.window().SuspectAfter(), 3*keepaliveInterval(c.ttl); after < least {
			bad("a term would end %v after a keepalive is sent (TTL %v, max drift %v, margin %v); it must be at least %v",
				after, c.ttl, c.maxDrift, c.margin, least)
		}
	}
	if c.log == nil {
		bad("nil logger")
	}
	if c.http != "" {
		if err := checkHostPort("HTTP address", c.http); err != nil {
			errs = append(errs, err)
		}
	}
	for name, addr := range c.listeners {
		if err := checkAddr(addr); err != nil {
			errs = append(errs, fmt.Errorf("listener %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
