package tune

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/member"
	"github.com/tenure-dev/tenure/sim"
)

// Space is the set of settings the tuner tries: every combination of the
// listed values (a grid), less the combinations that package epoch's rules
// ([sim.Timing.Validate]) or member.Join's reject. MaxDrift is fixed: it is a property of
// the members' clocks, not a choice.
type Space struct {
	Heartbeat    []time.Duration
	Session      []time.Duration
	Rebalance    []time.Duration
	InitialDelay []time.Duration
	Margin       []time.Duration
	// Grace is the coordinator's connection-loss grace
	// (sim.Timing.ConnLossGrace); 0 turns connection-aware expiry off.
	Grace []time.Duration
	// KeepAlive is the coordinator's TCP keepalive timeout
	// (sim.Timing.KeepAlive); 0 leaves it off. It acts through the grace,
	// so it is tried only with a grace, and only below the session.
	KeepAlive []time.Duration
	Static    []bool
	MaxDrift  float64
}

// DefaultSpace is the space `tenure tune` searches unless told otherwise:
// heartbeats from 250 ms to 5 s, sessions from 3 s to 45 s, two rebalance
// timeouts and margins, connection-loss graces from off to 3 s, static
// membership on and off.
//
// The initial rebalance delay has one value: it shapes the first rebalance
// of classic groups only, and the simulator drives KIP-848 groups, whose
// coordinator assigns at once (widen it with Space.InitialDelay to see
// that it changes nothing).
func DefaultSpace() Space {
	return Space{
		Heartbeat:    []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second},
		Session:      []time.Duration{3 * time.Second, 6 * time.Second, 10 * time.Second, 15 * time.Second, 20 * time.Second, 30 * time.Second, 45 * time.Second},
		Rebalance:    []time.Duration{15 * time.Second, 60 * time.Second},
		InitialDelay: []time.Duration{3 * time.Second},
		Margin:       []time.Duration{200 * time.Millisecond, time.Second},
		Grace:        []time.Duration{0, time.Second, 3 * time.Second},
		KeepAlive:    []time.Duration{0, 5 * time.Second, 10 * time.Second, 15 * time.Second, 20 * time.Second},
		Static:       []bool{false, true},
		MaxDrift:     0.01,
	}
}

// QuickSpace is the space `tenure tune` searches by default, a few minutes'
// work on two cores: the values of DefaultSpace that recommendations come
// from, less those that rarely change a figure. It drops the 2 s and 5 s
// heartbeats (Kafka's baseline runs 5 s anyway), the 3 s and 15 s
// sessions, the 15 s rebalance timeout (the simulated members revoke in
// milliseconds), the 200 ms margin (it only moves when an expelled member
// stops; the search keeps the safer one) and the 5 s and 15 s keepalives.
func QuickSpace() Space {
	return Space{
		Heartbeat:    []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 3 * time.Second},
		Session:      []time.Duration{6 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, 45 * time.Second},
		Rebalance:    []time.Duration{60 * time.Second},
		InitialDelay: []time.Duration{3 * time.Second},
		Margin:       []time.Duration{time.Second},
		Grace:        []time.Duration{0, time.Second, 3 * time.Second},
		KeepAlive:    []time.Duration{0, 10 * time.Second, 20 * time.Second},
		Static:       []bool{false, true},
		MaxDrift:     0.01,
	}
}

// Candidate is one point of the space: the timing under test and whether
// members use static membership.
type Candidate struct {
	Timing sim.Timing
	Static bool
}

// String renders the candidate compactly, as in
// "hb=1s session=10s rebalance=60s delay=3s margin=200ms grace=3s dynamic",
// with " keepalive=15s" after the grace when it is on.
func (c Candidate) String() string {
	t := c.Timing
	mode := "dynamic"
	if c.Static {
		mode = "static"
	}
	ka := ""
	if t.KeepAlive > 0 {
		ka = fmt.Sprintf(" keepalive=%v", t.KeepAlive)
	}
	return fmt.Sprintf("hb=%v session=%v rebalance=%v delay=%v margin=%v grace=%v%s %s",
		t.HeartbeatInterval, t.SessionTimeout, t.RebalanceTimeout, t.InitialRebalanceDelay, t.Margin, t.ConnLossGrace, ka, mode)
}

// KafkaDefaults is the candidate of Kafka's defaults: session 45 s,
// heartbeat 5 s, initial delay 3 s, 60 s rebalance timeout, dynamic
// membership (see [sim.KafkaTiming]).
func KafkaDefaults() Candidate { return Candidate{Timing: sim.KafkaTiming()} }

// TenureDefaults is the candidate of tenure's defaults (see
// [sim.DefaultTiming]).
func TenureDefaults() Candidate { return Candidate{Timing: sim.DefaultTiming()} }

// Pruned is a candidate the timing rules reject, with why.
type Pruned struct {
	Candidate Candidate
	Reason    string
}

// Candidates enumerates the space in a fixed order and splits it into the
// valid candidates and those the timing rules prune.
func (s Space) Candidates() (valid []Candidate, pruned []Pruned) {
	for _, hb := range s.Heartbeat {
		for _, session := range s.Session {
			for _, rebalance := range s.Rebalance {
				for _, delay := range s.InitialDelay {
					for _, margin := range s.Margin {
						for _, grace := range s.grace() {
							for _, ka := range s.keepAlive() {
								for _, static := range s.Static {
									if grace > 0 && (static || grace >= session) {
										// The grace would never act: the
										// coordinator exempts static
										// members, and the session expires
										// first. The candidate without it
										// covers the point.
										continue
									}
									if ka > 0 && (grace == 0 || static || ka+grace >= session) {
										// Nor would the keepalive: it acts
										// through the grace.
										continue
									}
									c := Candidate{Static: static, Timing: sim.Timing{
										HeartbeatInterval:     hb,
										SessionTimeout:        session,
										RebalanceTimeout:      rebalance,
										InitialRebalanceDelay: delay,
										Margin:                margin,
										MaxDrift:              s.MaxDrift,
										ConnLossGrace:         grace,
										KeepAlive:             ka,
										// Not searched: it acts only after
										// a fail-over (serve's default).
										ViewSettle: sim.DefaultTiming().ViewSettle,
									}}
									if err := c.check(); err != nil {
										pruned = append(pruned, Pruned{c, firstLine(err.Error())})
										continue
									}
									valid = append(valid, c)
								}
							}
						}
					}
				}
			}
		}
	}
	return valid, pruned
}

// grace returns the graces to try: none given means the feature off, as
// in a space written before it existed.
func (s Space) grace() []time.Duration {
	if len(s.Grace) == 0 {
		return []time.Duration{0}
	}
	return s.Grace
}

// keepAlive returns the keepalive timeouts to try: none given means off.
func (s Space) keepAlive() []time.Duration {
	if len(s.KeepAlive) == 0 {
		return []time.Duration{0}
	}
	return s.KeepAlive
}

// check applies package epoch's timing rules, then those member.Join
// applies with the heartbeat interval the coordinator returns (a heartbeat
// sent two intervals after the last acknowledged one must complete before
// the suspect deadline): a recommendation Join would refuse is no use.
func (c Candidate) check() error {
	if err := c.Timing.Validate(); err != nil {
		return err
	}
	mc := c.machineConfig()
	if err := mc.Validate(); err != nil {
		return err
	}
	return mc.ValidateInterval(c.Timing.HeartbeatInterval)
}

// machineConfig is the member configuration the simulator runs c with.
func (c Candidate) machineConfig() member.MachineConfig {
	t := c.Timing
	return member.MachineConfig{
		Group:            "g",
		MemberID:         "m",
		Topics:           []string{"t"},
		RebalanceTimeout: t.RebalanceTimeout,
		SessionTimeout:   t.SessionTimeout,
		MaxDrift:         t.MaxDrift,
		SuspectMargin:    t.Margin,
		RequestTimeout:   requestTimeout(t),
	}
}

// requestTimeout is the heartbeat request timeout the simulator gives
// members: the configured one, else the heartbeat interval.
func requestTimeout(t sim.Timing) time.Duration {
	if t.RequestTimeout > 0 {
		return t.RequestTimeout
	}
	return t.HeartbeatInterval
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Validate reports an empty dimension.
func (s Space) Validate() error {
	for _, d := range []struct {
		name string
		n    int
	}{{"heartbeat", len(s.Heartbeat)}, {"session", len(s.Session)}, {"rebalance", len(s.Rebalance)},
		{"initial delay", len(s.InitialDelay)}, {"margin", len(s.Margin)}, {"static", len(s.Static)}} {
		if d.n == 0 {
			return fmt.Errorf("tune: the space has no %s value", d.name)
		}
	}
	return nil
}

// ParseDurations parses a comma-separated list of durations, sorted and
// without duplicates.
func ParseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("tune: %q is not a duration", f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tune: empty list of durations %q", s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
