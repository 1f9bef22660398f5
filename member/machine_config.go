package member

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// ErrConfig is wrapped by every error [MachineConfig.Validate] and
// [Config] validation report for a missing or malformed setting. Timing
// rules that keep ownership safe are reported wrapping
// [epoch.ErrUnsafeTiming] instead. Test with errors.Is.
var ErrConfig = errors.New("member: invalid config")

// MachineConfig configures one member's core, the [Machine]. The shell
// ([Join]) builds it from a [Config]; the simulator and tests fill it
// directly.
type MachineConfig struct {
	// Group is the consumer group to join. Required.
	Group string
	// MemberID identifies the member for its whole life. KIP-848 v1: the
	// client generates it (a UUID); it is kept across rejoins. Required.
	MemberID string
	// InstanceID makes the member static (KIP-345): a restarted member with
	// the same instance ID takes its predecessor's place and partitions.
	// Empty for a dynamic member.
	InstanceID string
	// RackID is sent with the first heartbeat for rack-aware assignors.
	RackID string
	// Topics is the subscription: the names of the topics whose partitions
	// the member wants. At least one is required.
	Topics []string
	// Assignor is the server-side assignor to ask for ("uniform",
	// "range", ...); empty for the coordinator's default.
	Assignor string
	// RebalanceTimeout is how long the member may take to release revoked
	// partitions before the coordinator evicts it. Required.
	RebalanceTimeout time.Duration
	// SessionTimeout is the coordinator's KIP-848 session timeout; the
	// protocol does not tell members, so it is configured and must not
	// exceed the coordinator's. MaxDrift and SuspectMargin complete the
	// epoch.Window that decides when claims go Suspect.
	SessionTimeout time.Duration
	// MaxDrift bounds the clock-rate difference between member and
	// coordinator; see [epoch.Window.MaxDrift]. 0.01 is a safe choice.
	MaxDrift float64
	// SuspectMargin is subtracted from the safe-ownership deadline on top
	// of the drift allowance: the time the member needs to stop work. It
	// must be positive.
	SuspectMargin time.Duration
	// RequestTimeout bounds one heartbeat round trip; the shell reports a
	// HeartbeatFailed when it passes. (The core needs it only to schedule.)
	RequestTimeout time.Duration
	// TopicIDs optionally names the topic IDs the coordinator uses in
	// assignments. The machine can also learn them later from a
	// [TopicIDs] event; an assigned topic it cannot name is asked for in
	// [Ready.Resolve].
	TopicIDs map[string][16]byte
}

// Validate reports every missing or malformed setting (wrapping
// [ErrConfig]) and every timing rule that does not depend on the
// heartbeat interval (wrapping [epoch.ErrUnsafeTiming]); nil if cfg is
// usable. The rules that involve the interval the coordinator returns are
// checked by [MachineConfig.ValidateInterval].
func (c MachineConfig) Validate() error {
	var errs []error
	bad := func(sentinel error, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...))
	}
	if c.Group == "" {
		bad(ErrConfig, "no group")
	}
	if c.MemberID == "" {
		bad(ErrConfig, "no member ID: KIP-848 v1 members generate their own")
	}
	if len(c.Topics) == 0 {
		bad(ErrConfig, "no topics to subscribe to")
	}
	if err := validTopics(c.Topics); err != nil {
		errs = append(errs, err)
	}
	for name := range c.TopicIDs {
		if name == "" {
			bad(ErrConfig, "topic ID for an empty topic name")
		}
	}
	if c.RebalanceTimeout <= 0 || c.RebalanceTimeout.Milliseconds() > math.MaxInt32 {
		bad(ErrConfig, "rebalance timeout %v must be positive and fit in int32 milliseconds", c.RebalanceTimeout)
	}
	if c.RequestTimeout <= 0 {
		bad(ErrConfig, "request timeout %v must be positive", c.RequestTimeout)
	}
	timingOK := true
	if c.SessionTimeout <= 0 {
		bad(epoch.ErrUnsafeTiming, "session timeout %v must be positive", c.SessionTimeout)
		timingOK = false
	}
	if !(c.MaxDrift >= 0 && c.MaxDrift < 0.5) {
		bad(epoch.ErrUnsafeTiming, "max drift %v must be in [0, 0.5)", c.MaxDrift)
		timingOK = false
	}
	if c.SuspectMargin <= 0 {
		bad(epoch.ErrUnsafeTiming, "suspect margin %v must be positive", c.SuspectMargin)
		timingOK = false
	}
	if timingOK {
		if x := c.window().SuspectAfter(); x <= 0 {
			bad(epoch.ErrUnsafeTiming, "suspect deadline %v (session timeout %v × (1 − %v) − margin %v) must be positive",
				x, c.SessionTimeout, c.MaxDrift, c.SuspectMargin)
		} else if c.RequestTimeout >= x {
			bad(epoch.ErrUnsafeTiming, "request timeout %v must be shorter than the suspect deadline %v", c.RequestTimeout, x)
		}
		if r := c.revokeAfter(); c.RebalanceTimeout > 0 && r <= 0 {
			bad(epoch.ErrUnsafeTiming, "rebalance timeout %v leaves no time to revoke after drift and margin %v", c.RebalanceTimeout, c.SuspectMargin)
		}
	}
	return errors.Join(errs...)
}

// Timing returns the epoch.Timing of this member with the heartbeat
// interval the coordinator returned.
func (c MachineConfig) Timing(interval time.Duration) epoch.Timing {
	return epoch.Timing{
		HeartbeatInterval: interval,
		SessionTimeout:    c.SessionTimeout,
		RebalanceTimeout:  c.RebalanceTimeout,
		MaxDrift:          c.MaxDrift,
		Margin:            c.SuspectMargin,
	}
}

// ValidateInterval checks the config against the heartbeat interval the
// coordinator returned: the rules of [epoch.Timing.Validate], and that a
// heartbeat sent two intervals after the last acknowledged one can
// complete its round trip (RequestTimeout) before the suspect deadline.
// Each violation wraps [epoch.ErrUnsafeTiming]. An unsafe combination
// does not break ownership safety (the deadline still holds) but makes
// healthy members go Suspect.
func (c MachineConfig) ValidateInterval(interval time.Duration) error {
	err := c.Timing(interval).Validate()
	if err != nil {
		return err
	}
	if x := c.window().SuspectAfter(); 2*interval+c.RequestTimeout >= x {
		return fmt.Errorf("%w: 2 × heartbeat interval %v + request timeout %v reaches the suspect deadline %v: one lost heartbeat would make members Suspect",
			epoch.ErrUnsafeTiming, interval, c.RequestTimeout, x)
	}
	return nil
}

func (c MachineConfig) window() epoch.Window {
	return epoch.Window{SessionTimeout: c.SessionTimeout, MaxDrift: c.MaxDrift, Margin: c.SuspectMargin}
}

// expireAfter is how long after the send time of its last acknowledged
// heartbeat the coordinator has surely expired the member's session:
// SessionTimeout×(1+MaxDrift), rounded up.
func (c MachineConfig) expireAfter() time.Duration {
	return time.Duration(math.Ceil(float64(c.SessionTimeout) * (1 + c.MaxDrift)))
}

// revokeAfter is how long after the send time of the heartbeat whose
// response revoked a partition the member may take to release it and have
// the release acknowledged before the coordinator may evict it:
// RebalanceTimeout×(1−MaxDrift) − SuspectMargin, the allowance rounded up.
func (c MachineConfig) revokeAfter() time.Duration {
	allowance := time.Duration(math.Ceil(float64(c.RebalanceTimeout) * c.MaxDrift))
	return c.RebalanceTimeout - allowance - c.SuspectMargin
}

// validTopics checks a subscription: names non-empty and distinct.
func validTopics(topics []string) error {
	seen := make(map[string]bool, len(topics))
	var errs []error
	for _, t := range topics {
		if t == "" {
			errs = append(errs, fmt.Errorf("%w: empty topic name in the subscription", ErrConfig))
			continue
		}
		if seen[t] {
			errs = append(errs, fmt.Errorf("%w: topic %q subscribed twice", ErrConfig, t))
		}
		seen[t] = true
	}
	return errors.Join(errs...)
}

// sortedTopics returns a sorted, de-duplicated, non-nil copy.
func sortedTopics(topics []string) []string {
	out := slices.Clone(topics)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
