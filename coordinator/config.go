package coordinator

import (
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/assignor"
)

// Config holds the coordinator-wide settings that shape every group. The
// zero value is not usable: start from DefaultConfig and override fields.
// A Config is read-only once a Group uses it and may be shared by all groups.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// classic member may ask for; a JoinGroup outside them is answered
	// INVALID_SESSION_TIMEOUT. Kafka: group.min.session.timeout.ms (6 s) and
	// group.max.session.timeout.ms (30 min).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// InitialRebalanceDelay is how long a classic group that is new or empty
	// waits for more members before completing its first rebalance, so that
	// a fleet starting together causes one rebalance instead of one per
	// member. Each new member extends the wait by this much, up to the
	// rebalance timeout. Kafka: group.initial.rebalance.delay.ms (3 s).
	InitialRebalanceDelay time.Duration

	// MaxGroupSize is the most members one group may have; a join beyond
	// it is answered GROUP_MAX_SIZE_REACHED. Kafka: group.max.size.
	MaxGroupSize int

	// ConsumerSessionTimeout is the session timeout of KIP-848 members
	// (the protocol lets the coordinator choose it). Kafka:
	// group.consumer.session.timeout.ms (45 s).
	ConsumerSessionTimeout time.Duration

	// ConsumerHeartbeatInterval is the interval returned to KIP-848
	// members in every heartbeat response. Kafka:
	// group.consumer.heartbeat.interval.ms (5 s).
	ConsumerHeartbeatInterval time.Duration

	// ConsumerJoinCoalesce makes KIP-848 joins that arrive within this
	// long of a join's epoch bump share one bump, performed by Tick at the
	// end of the window, instead of bumping the epoch (and so making every
	// member reconcile) once per join. A member that joins meanwhile
	// stands at the current epoch with nothing assigned until the bump. 0
	// (the default) bumps once per join; it must be below the session
	// timeout. No Kafka equivalent: Kafka 4.3's
	// consumer.assignment.interval.ms batches only the target
	// computation.
	ConsumerJoinCoalesce time.Duration

	// Assignors are the server-side assignors KIP-848 members may name;
	// the first is the default. Kafka: group.consumer.assignors
	// (uniform, range).
	Assignors []assignor.Assignor

	// Topics resolves topic names and IDs for KIP-848 target assignments
	// and for commit validation. It must be safe for the concurrent use of
	// all groups sharing this Config.
	Topics Topics

	// MaxMetadataBytes bounds the metadata string of a committed offset;
	// longer ones are answered OFFSET_METADATA_TOO_LARGE. Kafka:
	// offset.metadata.max.bytes (4096).
	MaxMetadataBytes int

	// GenerationLogRetention is how many generation log entries a group
	// keeps (genlog.go); zero means DefaultGenerationLogRetention.
	GenerationLogRetention int

	// ConnLossGrace is how long a member whose connection closed (see
	// input ConnectionClosed) keeps its place without being heard from on
	// any connection; then it is expelled, as its session expiry would,
	// with the reason "connection-closed". A process that dies has its
	// connections closed by its kernel, so its partitions move after
	// this grace instead of a whole session timeout; a paused or cut-off
	// process closes nothing and still waits for its session timeout.
	// 0 disables it. Static members are exempt. No Kafka equivalent:
	// Kafka ignores connection closes. Default 3 s: see DefaultConfig.
	ConnLossGrace time.Duration

	// TakeoverGrace lengthens the sessions of the members a Restore
	// brings back (a fail-over, a restart) to at least this, plus a
	// spread of up to an eighth of it by member (restore_grace.go); a
	// member's first heartbeat (JoinGroup or SyncGroup, for a classic
	// one) ends its grace. Clients need that long to find the new
	// coordinator after theirs died: kgo's request to a node that
	// stopped answering waits out its 10 s request timeout, and its next
	// heartbeat queues behind a new connection to the old address for
	// about as long again. The price: a member that died with the old
	// coordinator keeps its partitions up to the grace, not its session.
	// 0 (the default here; tenure serve uses 30 s) keeps the sessions.
	TakeoverGrace time.Duration

	// IssueGrants makes replies name the ownerships they grant
	// (Reply.Grants), for the caller to sign (grants.go). Off by default:
	// the core then tracks nothing of it.
	IssueGrants bool
}

// DefaultConfig returns tenure's defaults.
//
// The KIP-848 session timeout is 20 s and the heartbeat interval 1 s (Kafka
// uses 45 s and 5 s). Safety does not depend on them, because tokens fence
// every commit; they trade how long partitions of a crashed member stay
// unowned against how often a live member is expelled by a pause or a short
// network cut. `tenure tune` over the built-in scenario mix (steady, crash,
// gc-pauses, rolling-restart, scale-out, flaky-network) chose them: against
// 10 s / 2 s they cut false expulsions from about 2 to 0.4 per member-day
// and unowned partition-seconds by a third, for one heartbeat per second
// per member. The member's safe-ownership window (session x (1 - drift) -
// margin, see package epoch) stays far above two heartbeat intervals, so
// one lost heartbeat never makes a member Suspect. Run the tuner to choose
// values for a given workload.
//
// The connection-loss grace is 3 s. A live client whose connection to the
// coordinator closes under it (a proxy's idle close, a server-side close)
// reconnects on its next request: a KIP-848 member heartbeats every
// second here, and kgo retries a request that failed on a dead
// connection on a new one, so it is heard again within about one
// interval; three intervals also absorb a dial that fails once and a slow
// TLS or SASL handshake. A classic member sends its heartbeats at its own
// interval (3 s in kgo and the Java client), so one whose idle connection
// drops just after a heartbeat may be heard only after about 3 s; such
// drops are rare on a connection used every few seconds, and a false
// expulsion costs a rebalance, never safety. A dead process's partitions
// then move about 3 s after it died plus one heartbeat interval of the
// members that take them, instead of the session timeout.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:         6 * time.Second,
		MaxSessionTimeout:         30 * time.Minute,
		InitialRebalanceDelay:     3 * time.Second,
		MaxGroupSize:              10000,
		ConsumerSessionTimeout:    20 * time.Second,
		ConsumerHeartbeatInterval: 1 * time.Second,
		Assignors:                 []assignor.Assignor{assignor.Uniform(), assignor.Range(), assignor.Rendezvous(0)},
		MaxMetadataBytes:          4096,
		ConnLossGrace:             3 * time.Second,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("coordinator: invalid config")

// Validate reports every setting that is out of range.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.MinSessionTimeout <= 0 {
		bad("min session timeout %v must be positive", c.MinSessionTimeout)
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		bad("max session timeout %v is below the min %v", c.MaxSessionTimeout, c.MinSessionTimeout)
	}
	if c.InitialRebalanceDelay < 0 {
		bad("initial rebalance delay %v is negative", c.InitialRebalanceDelay)
	}
	if c.MaxGroupSize <= 0 {
		bad("max group size %d must be positive", c.MaxGroupSize)
	}
	if c.TakeoverGrace < 0 {
		bad("takeover grace %v is negative", c.TakeoverGrace)
	}
	if c.ConsumerSessionTimeout <= 0 {
		bad("consumer session timeout %v must be positive", c.ConsumerSessionTimeout)
	}
	if c.ConsumerHeartbeatInterval <= 0 || c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout {
		bad("consumer heartbeat interval %v must be positive and below the session timeout %v",
			c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	}
	if c.ConsumerJoinCoalesce < 0 || (c.ConsumerSessionTimeout > 0 && c.ConsumerJoinCoalesce >= c.ConsumerSessionTimeout) {
		bad("consumer join coalesce window %v must be non-negative and below the session timeout %v",
			c.ConsumerJoinCoalesce, c.ConsumerSessionTimeout)
	}
	if len(c.Assignors) == 0 {
		bad("no assignors")
	}
	seen := make(map[string]bool)
	for _, a := range c.Assignors {
		if seen[a.Name()] {
			bad("assignor %q listed twice", a.Name())
		}
		seen[a.Name()] = true
	}
	if c.Topics == nil {
		bad("no topic resolver")
	}
	if c.MaxMetadataBytes < 0 {
		bad("max metadata bytes %d is negative", c.MaxMetadataBytes)
	}
	if c.ConnLossGrace < 0 {
		bad("connection loss grace %v is negative", c.ConnLossGrace)
	}
	if c.GenerationLogRetention < 0 {
		bad("generation log retention %d is negative", c.GenerationLogRetention)
	}
	return errors.Join(errs...)
}

// assignor returns the assignor named name, or the default for "".
func (c *Config) assignor(name string) (assignor.Assignor, bool) {
	if name == "" {
		return c.Assignors[0], true
	}
	for _, a := range c.Assignors {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}
