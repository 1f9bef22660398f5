package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/member"
)

// Scenario is one simulated situation: a fleet of members and their
// coordinator, the topics they share, the timing settings under test, and
// what goes wrong when (pauses, crashes, network trouble, deploys). Parse
// one from the scenario language with [ParseScenario], or take a built-in
// with [Builtin]; change settings with [Scenario.Set] or the typed fields.
//
// A Scenario holds no run state: [Run] it as often as you like, with any
// seed, also from several goroutines at once.
type Scenario struct {
	// Name names the scenario in reports.
	Name string

	// Members is the number of members started at time zero, named m1 to
	// mN. Static gives them static membership (instance IDs m1..mN), so
	// a restarted member rejoins as the same instance.
	Members int
	Static  bool
	// StartDelay is how long a member process takes from launch to its
	// first heartbeat (a slow start); nil is instant.
	StartDelay Dist
	// Assignor is the server-side assignor members ask for ("" for the
	// coordinator's default, uniform).
	Assignor string

	// Topics are the topics every member subscribes to.
	Topics []Topic

	// Timing is the settings under test.
	Timing Timing

	// ClockSkew makes each member's clock run at a rate drawn uniformly
	// from [1−ClockSkew, 1+ClockSkew] of the coordinator's (0: perfect
	// clocks). Timing.MaxDrift is what the members assume; ClockSkew is
	// what they get.
	ClockSkew float64

	// Network is every link's behaviour; Links overrides it for the named
	// members' connections (both directions).
	Network Link
	Links   map[string]Link

	// Pauses are random stop-the-world pauses.
	Pauses []Pauses
	// Crashes are random crashes.
	Crashes []Crashes
	// ConnDrops, if not nil, is the time between drops of a random live
	// member's connection under it (a proxy's idle timeout, a NAT table
	// flush): the coordinator sees the close, the member opens a new
	// connection with its next request.
	ConnDrops Dist
	// Actions are the timed events: crashes, pauses, cuts, rolling
	// restarts, scaling, fail-over. Sorted by time.
	Actions []Action

	// Work is what every owner does with its partitions.
	Work Work

	// Duration is how much virtual time a run covers.
	Duration time.Duration

	// lines is the scenario's source, kept so that Set can change an
	// argument and recompile.
	lines []cmdLine
}

// Topic is a topic the members share.
type Topic struct {
	Name       string
	Partitions int32
}

// Timing holds the settings that tenure serve and member.Join take and that
// package tune searches: the coordinator's KIP-848 session timeout and heartbeat
// interval, its initial rebalance delay, and the members' rebalance
// timeout, suspect margin, assumed clock drift and request timeout.
type Timing struct {
	HeartbeatInterval     time.Duration
	SessionTimeout        time.Duration
	RebalanceTimeout      time.Duration
	InitialRebalanceDelay time.Duration
	Margin                time.Duration
	MaxDrift              float64
	// RequestTimeout is how long a member waits for a heartbeat's
	// response before it reports the heartbeat as failed; zero means the
	// heartbeat interval.
	RequestTimeout time.Duration
	// ConnLossGrace is the coordinator's connection-aware expiry
	// (coordinator.Config.ConnLossGrace): a member whose connection closed
	// and that is not heard from within it is expelled then, rather than
	// at its session timeout. Zero turns it off, as in Kafka.
	ConnLossGrace time.Duration
	// ViewSettle is how long after the HA set's view changes a closed
	// connection starts no connection-loss grace
	// (coordinator.ViewSettling; tenure serve --view-settle): clients
	// then close connections themselves to follow the view. A fail-over
	// changes the view at once: the survivors' probe finds the crashed
	// leader down. Zero: every close starts the grace.
	ViewSettle time.Duration
	// KeepAlive is the coordinator's TCP keepalive timeout (tenure serve
	// --conn-keepalive): when a member's host has answered nothing on its
	// connection for this long, not even the kernel's keepalive probes,
	// the coordinator's kernel aborts the connection, and the group
	// treats it as closed (ConnLossGrace). A crashed host or a cut is then
	// noticed after KeepAlive plus the grace rather than the session; a
	// paused process's kernel still answers, so a pause is not. Zero
	// turns it off (the operating system's default keepalive gives up
	// after minutes).
	KeepAlive time.Duration
	// TakeoverGrace is the least session a fail-over's successor gives
	// the members it restores (coordinator.Config.TakeoverGrace, tenure
	// serve --takeover-grace), plus up to an eighth more by member: a
	// member that died with the old coordinator keeps its partitions that
	// long after the takeover. Zero (coordinator.DefaultConfig's) restarts
	// each member's own session.
	TakeoverGrace time.Duration
}

// DefaultTiming returns tenure's defaults: the coordinator's
// (coordinator.DefaultConfig: session timeout, heartbeat interval, initial
// delay, connection-loss grace) with the rebalance timeout, drift and
// margin of epoch.DefaultTiming.
func DefaultTiming() Timing {
	et := epoch.DefaultTiming()
	cc := coordinator.DefaultConfig()
	return Timing{
		HeartbeatInterval:     cc.ConsumerHeartbeatInterval,
		SessionTimeout:        cc.ConsumerSessionTimeout,
		RebalanceTimeout:      et.RebalanceTimeout,
		InitialRebalanceDelay: cc.InitialRebalanceDelay,
		Margin:                et.Margin,
		MaxDrift:              et.MaxDrift,
		ConnLossGrace:         cc.ConnLossGrace,
		ViewSettle:            coordinator.DefaultViewSettle,
	}
}

// KafkaTiming returns Kafka's defaults for a KIP-848 group: session 45 s,
// heartbeat 5 s, initial rebalance delay 3 s, the Java and franz-go
// clients' 60 s rebalance (max poll) timeout, with tenure's drift and
// margin (Kafka has no suspect deadline), and no connection-aware expiry
// (Kafka waits for the session timeout whether or not the connection
// closed).
func KafkaTiming() Timing {
	et := epoch.DefaultTiming()
	return Timing{
		HeartbeatInterval:     5 * time.Second,
		SessionTimeout:        45 * time.Second,
		RebalanceTimeout:      60 * time.Second,
		InitialRebalanceDelay: 3 * time.Second,
		Margin:                et.Margin,
		MaxDrift:              et.MaxDrift,
	}
}

// Epoch returns the timing in the form package epoch validates.
func (t Timing) Epoch() epoch.Timing {
	return epoch.Timing{
		HeartbeatInterval: t.HeartbeatInterval,
		SessionTimeout:    t.SessionTimeout,
		RebalanceTimeout:  t.RebalanceTimeout,
		MaxDrift:          t.MaxDrift,
		Margin:            t.Margin,
	}
}

// Validate checks t with the rules of epoch.Timing.Validate, and that the
// initial delay and request timeout are not negative.
func (t Timing) Validate() error {
	var errs []error
	if err := t.Epoch().Validate(); err != nil {
		errs = append(errs, err)
	}
	if t.InitialRebalanceDelay < 0 {
		errs = append(errs, fmt.Errorf("%w: initial rebalance delay %v is negative", epoch.ErrUnsafeTiming, t.InitialRebalanceDelay))
	}
	if t.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: request timeout %v is negative", epoch.ErrUnsafeTiming, t.RequestTimeout))
	}
	if t.KeepAlive != 0 && t.KeepAlive < 2*time.Second {
		errs = append(errs, fmt.Errorf("%w: keepalive timeout %v is below 2 s (a probe after a second of silence, then one more; tenure serve refuses less)", epoch.ErrUnsafeTiming, t.KeepAlive))
	}
	if t.ConnLossGrace < 0 {
		errs = append(errs, fmt.Errorf("%w: connection-loss grace %v is negative", epoch.ErrUnsafeTiming, t.ConnLossGrace))
	}
	if t.ViewSettle < 0 {
		errs = append(errs, fmt.Errorf("%w: view settle %v is negative", epoch.ErrUnsafeTiming, t.ViewSettle))
	}
	if t.TakeoverGrace < 0 {
		errs = append(errs, fmt.Errorf("%w: takeover grace %v is negative", epoch.ErrUnsafeTiming, t.TakeoverGrace))
	}
	return errors.Join(errs...)
}

// machineConfig is the member configuration of a simulated member.
func (t Timing) machineConfig(group, memberID string, topics []string) member.MachineConfig {
	return member.MachineConfig{
		Group:            group,
		MemberID:         memberID,
		Topics:           topics,
		RebalanceTimeout: t.RebalanceTimeout,
		SessionTimeout:   t.SessionTimeout,
		MaxDrift:         t.MaxDrift,
		SuspectMargin:    t.Margin,
		RequestTimeout:   t.requestTimeout(),
	}
}

func (t Timing) requestTimeout() time.Duration {
	if t.RequestTimeout > 0 {
		return t.RequestTimeout
	}
	return t.HeartbeatInterval
}

// String renders t in the scenario language's timing command.
func (t Timing) String() string {
	s := fmt.Sprintf("heartbeat=%v session=%v rebalance=%v initial-delay=%v margin=%v drift=%g",
		t.HeartbeatInterval, t.SessionTimeout, t.RebalanceTimeout, t.InitialRebalanceDelay, t.Margin, t.MaxDrift)
	if t.RequestTimeout > 0 {
		s += fmt.Sprintf(" request-timeout=%v", t.RequestTimeout)
	}
	s += fmt.Sprintf(" conn-grace=%v", t.ConnLossGrace)
	// The window matters only with the grace; tenure's default is left
	// out, so that reports of runs without fail-overs read as before.
	if t.ConnLossGrace > 0 && t.ViewSettle != coordinator.DefaultViewSettle {
		s += fmt.Sprintf(" view-settle=%v", t.ViewSettle)
	}
	if t.KeepAlive > 0 {
		s += fmt.Sprintf(" keepalive=%v", t.KeepAlive)
	}
	if t.TakeoverGrace > 0 {
		s += fmt.Sprintf(" takeover-grace=%v", t.TakeoverGrace)
	}
	return s
}

// Pauses are random stop-the-world pauses of members: each member (of
// Members, or all when empty) pauses at the instants of a renewal process
// with gaps drawn from Every, for lengths drawn from Length.
type Pauses struct {
	Every   Dist
	Length  Dist
	Members []string
}

// Crashes are random crashes of the fleet: a crash of a random running
// member every Every; the member restarts after Restart (never if nil).
// Host says what crashed (see [Action.Host]).
type Crashes struct {
	Every   Dist
	Restart Dist
	Host    bool
}

// Work is what owners do: every Every, each member writes to every
// partition it works on, carrying the partition's token, to a fenced and an
// unfenced copy of the resource.
type Work struct {
	// Every is the write period; zero disables work (and the stale-write
	// figures).
	Every time.Duration
	// Start is how long a worker takes to start on a new claim before it
	// reports Started; Stop how long it takes to stop before it reports
	// Released. nil is instant.
	Start, Stop Dist
	// InFlight is the probability that a partition's write is in flight
	// when a stop-the-world pause begins; that write lands right after the
	// pause, before the member notices anything. The scenario language's
	// default is 1: every worker was mid-write.
	InFlight float64
}

// ActionKind is what a timed [Action] does. The zero ActionKind is invalid.
type ActionKind uint8

// The actions of a scenario.
const (
	_ ActionKind = iota
	// ActCrash kills Member; it restarts after Restart unless Restart is
	// nil. A process crash closes the member's connections (its kernel
	// sends FIN), a host crash (Host) leaves them silent.
	ActCrash
	// ActPause pauses Member for Length.
	ActPause
	// ActCut separates the nodes named in Nodes ("coord" is the
	// coordinator) from all others; the cut heals after Heal (never if
	// zero).
	ActCut
	// ActRollingRestart restarts every running member, Surge at a time,
	// one batch every Every: with static membership each member leaves
	// temporarily and its process restarts after Restart as the same
	// instance; without, Surge new members start and as many old ones
	// leave for good.
	ActRollingRestart
	// ActScaleOut starts N new members.
	ActScaleOut
	// ActScaleIn makes the N newest running members leave for good.
	ActScaleIn
	// ActFailover loses the coordinator's leader; a successor rebuilt
	// from the persisted records takes over after Takeover (the election
	// delay), or after a delay drawn from ElectionTTL, and requests sent
	// in between are lost.
	ActFailover
	actionKinds
)

var actionNames = [...]string{
	ActCrash:          "crash",
	ActPause:          "pause",
	ActCut:            "cut",
	ActRollingRestart: "rolling-restart",
	ActScaleOut:       "scale-out",
	ActScaleIn:        "scale-in",
	ActFailover:       "failover",
}

func (k ActionKind) String() string {
	if k > 0 && k < actionKinds {
		return actionNames[k]
	}
	return "ActionKind(" + itoa(int(k)) + ")"
}

// Action is one timed event of a scenario. Which fields matter depends on
// Kind; see [ActionKind].
type Action struct {
	Kind     ActionKind
	At       time.Duration
	Member   string
	Nodes    []string
	N        int
	Restart  Dist
	Length   time.Duration
	Heal     time.Duration
	Every    time.Duration
	Surge    int
	Takeover time.Duration
	// ElectionTTL, for a fail-over, is the HA set's election TTL (tenure
	// serve --election-ttl): the takeover delay is then drawn per
	// fail-over, as etcd makes it (Action.takeover).
	ElectionTTL time.Duration
	// Host makes a crash a crash of the member's host (power loss, kernel
	// panic, the machine cut off for good): nothing closes its
	// connections, so the coordinator hears nothing until the session
	// expires. Otherwise only the process dies and its kernel closes them.
	Host bool
	// Line is the scenario line the action comes from (0 if built in Go).
	Line int
}

// Validate checks that the scenario can run.
func (s *Scenario) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sim: "+format, args...)) }
	if s.Members < 0 {
		bad("members n=%d is negative", s.Members)
	}
	if len(s.Topics) == 0 {
		bad("no topic: add a line such as topic name=work partitions=64")
	}
	seen := map[string]bool{}
	for _, t := range s.Topics {
		if t.Partitions <= 0 {
			bad("topic %s has %d partitions", t.Name, t.Partitions)
		}
		if seen[t.Name] {
			bad("topic %s given twice", t.Name)
		}
		seen[t.Name] = true
	}
	if s.Duration <= 0 {
		bad("the run has no duration: add a line such as run for=10m")
	}
	if err := s.Timing.Validate(); err != nil {
		errs = append(errs, err)
	} else if err := s.Timing.machineConfig("g", "m", []string{"t"}).Validate(); err != nil {
		// What member.NewMachine would refuse.
		errs = append(errs, err)
	}
	if s.ClockSkew < 0 || s.ClockSkew >= 0.5 {
		bad("clock skew %g must be in [0, 0.5)", s.ClockSkew)
	}
	for _, p := range []float64{s.Network.Loss, s.Network.Dup, s.Network.Reorder} {
		if p < 0 || p > 1 {
			bad("network probability %g must be in [0, 1]", p)
		}
	}
	if s.Work.Every < 0 {
		bad("work every=%v is negative", s.Work.Every)
	}
	return errors.Join(errs...)
}
