package etcdstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Opt configures a Store; see New.
type Opt interface{ apply(*cfg) }

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

type cfg struct {
	prefix       string
	maxTxnOps    int
	maxTxnBytes  int
	log          *zap.Logger
	reg          prometheus.Registerer
	guard        []clientv3.Cmp
	fenceTimeout time.Duration
	busyTimeout  time.Duration
	pageSize     int
	shard        int
	shards       int // 1: the unsharded layout
	combiner     *Combiner
	combineDelay time.Duration
	foldEvery    int // 0: no folds but those asked for (tests)
}

// Defaults of the options.
const (
	// DefaultPrefix is where the store keeps its keys.
	DefaultPrefix = "/tenure/"
	// DefaultMaxTxnOps is etcd's own default --max-txn-ops.
	DefaultMaxTxnOps = 128
	// DefaultMaxTxnBytes leaves half a MiB of headroom under etcd's
	// default --max-request-bytes (1.5 MiB), for the estimate's error
	// and the request's framing.
	DefaultMaxTxnBytes = 1 << 20
	// DefaultFenceTimeout bounds how long Persist keeps trying to fence
	// a write whose outcome it does not know.
	DefaultFenceTimeout = 5 * time.Second
	// DefaultFoldEvery is how many offset batches of a group a store
	// writes before it folds them into the group's partition keys
	// (fold.go): a load reads at most about this many batches a group
	// (up to 4 times as many for a group whose folds write many
	// partition keys, foldInterval; more after a crash), and a fold
	// costs a read and a put of every partition committed meanwhile.
	DefaultFoldEvery = 64
	// DefaultCombineDelay is how long a Combiner's transaction that
	// finds no request in flight waits for others (CombineDelay).
	DefaultCombineDelay = 2 * time.Millisecond
	// DefaultBusyTimeout bounds how long one write keeps trying while
	// etcd refuses it as too many requests (busy.go).
	DefaultBusyTimeout = 10 * time.Second

	// MaxShards is the largest shard count (Shard): far above what an HA
	// set needs (a store per shard), it keeps a mistyped count out.
	MaxShards = 1 << 16

	// MinTxnOps is the smallest MaxTxnOps: the most operations one record
	// becomes (a group deletion: its tombstone and two range deletions),
	// since a record is never split across transactions.
	MinTxnOps = 3
	// defaultPageSize is the keys per page of a load: about 1.5 MB of
	// typical keys and values. Each page costs the server a walk of the
	// rest of the range (it counts the keys left), so small pages cost
	// CPU: loading 97,000 keys took 1.5 s of CPU in pages of 1,000 and
	// 0.6 s in pages of 16,384.
	defaultPageSize = 10000
)

func defaultCfg() cfg {
	return cfg{
		prefix:       DefaultPrefix,
		maxTxnOps:    DefaultMaxTxnOps,
		maxTxnBytes:  DefaultMaxTxnBytes,
		log:          zap.NewNop(),
		fenceTimeout: DefaultFenceTimeout,
		busyTimeout:  DefaultBusyTimeout,
		pageSize:     defaultPageSize,
		shards:       1,
		foldEvery:    DefaultFoldEvery,
		combineDelay: DefaultCombineDelay,
	}
}

// newCfg is the defaults with opts applied.
func newCfg(opts []Opt) cfg {
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	return c
}

// Prefix sets the key prefix under which the store keeps everything,
// overriding the default "/tenure/". A missing trailing "/" is added, so
// that "/tenure" and "/tenure2" never share keys.
func Prefix(p string) Opt {
	return opt(func(c *cfg) {
		if !strings.HasSuffix(p, "/") {
			p += "/"
		}
		c.prefix = p
	})
}

// MaxTxnOps sets the most operations of one write transaction, overriding
// the default 128 (etcd's default --max-txn-ops). It must not exceed the
// server's --max-txn-ops, and must be at least 3.
func MaxTxnOps(n int) Opt { return opt(func(c *cfg) { c.maxTxnOps = n }) }

// CombineDelay sets how long a transaction sent through a Combiner (of the
// stores opened with it, NewCombiner's options) waits for the other
// stores' when no request of the Combiner is in flight, overriding the
// default 2 ms; 0 sends it at once. Those that come while one request is
// unanswered wait for its answer instead, however long, and no
// transaction waits beyond the delay once more waits than one request
// holds. A write's latency grows by up to the delay; in exchange a node's
// shards written in one of its clients' bursts go in one request, not
// two or more.
func CombineDelay(d time.Duration) Opt { return opt(func(c *cfg) { c.combineDelay = d }) }

// MaxTxnBytes sets the most bytes (keys and values, plus 16 per operation
// for framing) of one write transaction, overriding the default 1 MiB. Keep
// it well below the server's --max-request-bytes (1.5 MiB by default). A
// single record larger than this is written alone.
func MaxTxnBytes(n int) Opt { return opt(func(c *cfg) { c.maxTxnBytes = n }) }

// FoldEvery sets how many offset batches of a group the store writes
// before it folds them into the group's partition keys, overriding the
// default 64 (a group whose last fold wrote more than 4 partition keys a
// batch waits for more, up to 4 times n); 0 folds only when Fold is
// called.
func FoldEvery(n int) Opt { return opt(func(c *cfg) { c.foldEvery = n }) }

// Logger sets the logger, overriding the default of no logging.
func Logger(l *zap.Logger) Opt { return opt(func(c *cfg) { c.log = l }) }

// Registerer registers the store's metrics with r (default: none). The
// stores open at once on r share them (they sum over the stores, the
// shards' included); the last of them to close unregisters them, so that
// a store opened later registers again.
func Registerer(r prometheus.Registerer) Opt { return opt(func(c *cfg) { c.reg = r }) }

// Guard adds cmps to every write transaction (and to the fence writes), so
// that nothing is written unless they hold; a write whose guard fails
// returns ErrGuardFailed and writes nothing. It is for fail-over: the
// leader's write is guarded by its leader key's create revision. A guard
// must be monotone (once it fails it never holds again), because the
// store relies on it to fence a write whose outcome it does not know when
// it cannot move the fence key. Default: no guard.
func Guard(cmps ...clientv3.Cmp) Opt {
	return opt(func(c *cfg) { c.guard = append(c.guard, cmps...) })
}

// FenceTimeout bounds how long Persist, after a write whose outcome it
// does not know, keeps trying to move the fence key, overriding the
// default 5 s. The attempt outlives Persist's context (most such errors are
// that context's deadline) but not Close.
func FenceTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.fenceTimeout = d }) }

// BusyTimeout bounds how long a write keeps trying, with a jittered
// back-off, while etcd refuses it as too many requests (its applied index
// trails its committed one, as after a restart replaying a long log),
// overriding the default 10s. Nothing is written meanwhile; the write
// fails after it.
func BusyTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.busyTimeout = d }) }

// Shard makes the store the store of shard index of count: its groups'
// keys live under <prefix>shards/<index>/groups/ and it has a fence of its
// own (<prefix>meta/shards/<index>/fence), so that the stores of different
// shards of one prefix, open at once, neither see nor fence each other.
// Topics, users, ACLs and the generation logs stay shared by every shard.
// The count is fixed once a prefix is used (New records it in
// <prefix>meta/shards and fails with ErrShardCount for another); which
// group belongs to which shard is the caller's to decide, the store keeps
// whatever groups it is given. count is at most MaxShards. Default:
// Shard(0, 1), the unsharded layout (<prefix>groups/, <prefix>meta/fence).
func Shard(index, count int) Opt {
	return opt(func(c *cfg) { c.shard, c.shards = index, count })
}

// ErrInvalidOption is wrapped by New's errors for bad options.
var ErrInvalidOption = errors.New("etcdstore: invalid option")

// CheckOptions reports, as New would, every option of opts that is out of
// range, without opening a store (an HA node opens one per term).
func CheckOptions(opts ...Opt) error {
	c := newCfg(opts)
	return c.validate()
}

func (c *cfg) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if c.prefix == "/" || c.prefix == "" {
		bad("the prefix must not be empty")
	}
	if c.foldEvery < 0 {
		bad("fold every %d batches is negative", c.foldEvery)
	}
	if c.maxTxnOps < MinTxnOps {
		bad("max txn ops %d is below %d", c.maxTxnOps, MinTxnOps)
	}
	if len(c.guard)+1 > c.maxTxnOps {
		bad("%d guard comparisons and the fence exceed max txn ops %d", len(c.guard), c.maxTxnOps)
	}
	if c.combineDelay < 0 {
		bad("combine delay %v is negative", c.combineDelay)
	}
	if c.maxTxnBytes < 1024 {
		bad("max txn bytes %d is below 1024", c.maxTxnBytes)
	}
	if c.log == nil {
		bad("nil logger")
	}
	if c.fenceTimeout <= 0 {
		bad("fence timeout %v must be positive", c.fenceTimeout)
	}
	if c.busyTimeout < 0 {
		bad("busy timeout %v is negative", c.busyTimeout)
	}
	switch {
	case c.shards < 1 || c.shards > MaxShards:
		bad("shard count %d is not in 1..%d", c.shards, MaxShards)
	case c.shard < 0 || c.shard >= c.shards:
		bad("shard %d is not one of 0..%d", c.shard, c.shards-1)
	}
	return errors.Join(errs...)
}
