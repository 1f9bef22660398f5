//go:build unix

package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Config configures one run. The zero values of the durations and counts
// take DefaultConfig's.
type Config struct {
	// Seed draws the fault schedule (see [Schedule]).
	Seed uint64
	// Dir is the run's folder, created if missing: the checker's inputs
	// (see package check), every process's log, the schedule and report.
	Dir string
	// Tenure and Etcd are the binaries to run: a tenure build, and an etcd
	// server (go.etcd.io/etcd/server/v3's main package).
	Tenure, Etcd string
	// PostgresDSN is the PostgreSQL server the workers write to; each run
	// creates its own tables there and drops them when it ends.
	PostgresDSN string

	// Duration is the run's length from the moment every process is up:
	// Warmup without faults, then faults, then Settle without faults,
	// which must let every partition find an owner again.
	Duration, Warmup, Settle time.Duration
	// Workers (tenure worker processes) and Committers (stock kgo
	// KIP-848 consumers committing offsets); ClassicCommitters are stock
	// kgo consumers of the classic protocol (cooperative-sticky) doing the
	// same in a group of their own.
	Workers, Committers, ClassicCommitters int
	// Shards is the tenure nodes' --shards: above 1, groups hash onto
	// shards spread over the nodes, and no node leads the set.
	Shards int
	// Partitions of the workers' topic.
	Partitions int32
	// SessionTimeout and HeartbeatInterval are the coordinator's KIP-848
	// settings; RebalanceTimeout the workers'. ElectionTTL is the HA
	// set's.
	SessionTimeout, HeartbeatInterval, RebalanceTimeout, ElectionTTL time.Duration
	// WorkInterval is the time between two records of one partition.
	WorkInterval time.Duration
	// Unfenced makes this the control run: the resources check no token.
	// Its checker must find violations.
	Unfenced bool
	// Forge is the forging variant: the nodes sign their grants
	// (--sign-grants), every worker's resources verify every token with
	// the keys the nodes' admin APIs publish (--verify-keys), and worker
	// w1 also appends a record under a forged token every WorkInterval
	// (--forge-every): none may be accepted (check 9), and the honest
	// owners must not notice.
	Forge bool
	// Unverified, with Forge, makes this the variant's control run: the
	// nodes sign, the resources fence but verify nothing, so the
	// forger's invented tokens land, raise the fences and refuse the
	// honest owners. Its checker must find violations.
	Unverified bool
	// Failover is the fail-over variant: a schedule of the faults stock
	// consumers must not notice (see [FailoverSchedule]): the coordinator
	// of a consumers' group killed and never restarted, another frozen
	// (SIGSTOP) and never resumed, a fresh node joining on a new address.
	// The checker holds the stock consumers to their own callbacks
	// (check 10): no revoke, no loss, no member expelled, no partition
	// held by two of them.
	Failover bool
	// Progress, if set, receives a line per fault and per stage.
	Progress io.Writer
}

// DefaultConfig is a one-minute run of 8 workers and 4 committers.
func DefaultConfig() Config {
	return Config{
		Duration: time.Minute, Warmup: 5 * time.Second, Settle: 12 * time.Second,
		Workers: 8, Committers: 4, Partitions: 64,
		SessionTimeout: 3 * time.Second, HeartbeatInterval: 300 * time.Millisecond,
		RebalanceTimeout: 5 * time.Second, ElectionTTL: 2 * time.Second,
		WorkInterval: 100 * time.Millisecond,
	}
}

// withDefaults fills the zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setDur(&c.Duration, d.Duration)
	setDur(&c.Warmup, d.Warmup)
	setDur(&c.Settle, d.Settle)
	setDur(&c.SessionTimeout, d.SessionTimeout)
	setDur(&c.HeartbeatInterval, d.HeartbeatInterval)
	setDur(&c.RebalanceTimeout, d.RebalanceTimeout)
	setDur(&c.ElectionTTL, d.ElectionTTL)
	setDur(&c.WorkInterval, d.WorkInterval)
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.Partitions == 0 {
		c.Partitions = d.Partitions
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("no run folder"))
	}
	if c.Tenure == "" || c.Etcd == "" {
		errs = append(errs, errors.New("the tenure and etcd binaries are both needed"))
	}
	if c.PostgresDSN == "" {
		errs = append(errs, errors.New("no PostgreSQL DSN"))
	}
	if c.Workers < 1 || c.Committers < 0 || c.ClassicCommitters < 0 {
		errs = append(errs, fmt.Errorf("%d workers, %d committers and %d classic ones: want at least one worker", c.Workers, c.Committers, c.ClassicCommitters))
	}
	if c.Shards < 1 {
		errs = append(errs, fmt.Errorf("%d shards, want at least 1", c.Shards))
	}
	if c.Failover && (c.Forge || c.Unfenced) {
		errs = append(errs, errors.New("the fail-over variant has no control runs and no forging"))
	}
	if c.Failover && c.Committers+c.ClassicCommitters == 0 {
		errs = append(errs, errors.New("the fail-over variant needs stock consumers (committers) to judge"))
	}
	if c.Warmup+c.Settle >= c.Duration {
		errs = append(errs, fmt.Errorf("duration %v leaves no time for faults after warm-up %v and settle %v", c.Duration, c.Warmup, c.Settle))
	}
	if c.Settle < c.SessionTimeout+c.RebalanceTimeout {
		errs = append(errs, fmt.Errorf("settle %v is shorter than session timeout + rebalance timeout (%v): the liveness check needs it", c.Settle, c.SessionTimeout+c.RebalanceTimeout))
	}
	if c.Unverified && !c.Forge {
		errs = append(errs, errors.New("an unverified control run is one of the forging variant (Forge)"))
	}
	if c.ElectionTTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("election TTL %v is not whole seconds", c.ElectionTTL))
	}
	return errors.Join(errs...)
}

// shape is the part of the configuration the schedule depends on.
func (c Config) shape() Shape {
	return Shape{Duration: c.Duration, Warmup: c.Warmup, Settle: c.Settle, Session: c.SessionTimeout, Workers: c.Workers, Committers: c.Committers,
		Failover: c.Failover, ClassicCommitters: c.ClassicCommitters}
}

// control reports whether the run is a control run, which the checker
// must catch.
func (c Config) control() bool { return c.Unfenced || c.Unverified }

// describe names the run's kind for its report's first line.
func (c Config) describe() string {
	switch {
	case c.Unfenced && c.Forge:
		return " (control run of the forging variant: unfenced resources, one client forging tokens)"
	case c.Unfenced:
		return " (control run: unfenced resources)"
	case c.Unverified:
		return " (control run of the forging variant: signed grants, resources that verify nothing, one client forging tokens)"
	case c.Forge:
		return " (forging variant: signed grants, verifying resources, one client forging tokens)"
	case c.Failover:
		return fmt.Sprintf(" (fail-over variant, %d shards: nodes lost and frozen for good, a fresh node joining; stock consumers judged by their callbacks)", c.Shards)
	}
	return ""
}
