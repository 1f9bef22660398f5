package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Input is everything a chaos run left behind, as the runner collected it.
// Nothing in it is the coordinator's or the worker's opinion of itself:
// Rows are what the resources hold, Attempts and Offsets what the clients
// logged they tried and saw, History the coordinator's persisted records
// as etcd kept every revision of them.
type Input struct {
	Run Run
	// Attempts are the workers' attempt-log lines, in file order.
	Attempts []Attempt
	// Rows are the records the fenced resources hold.
	Rows []Row
	// History is every revision of the keys under Run.Prefix's groups/
	// directory, in revision order.
	History []KV
	// RevTimes are samples of (etcd's current revision, wall time), about
	// every 100 ms, that place History's revisions in time.
	RevTimes []RevTime
	// Offsets are the stock kgo consumers' commits and fetches.
	Offsets []OffsetOp
	// Callbacks are the stock kgo consumers' rebalance callbacks, one
	// line per partition of each call, in file order.
	Callbacks []Callback
	// Notes are remarks of the loader (a skipped torn line); Check copies
	// them into the Report.
	Notes []string
}

// Run is the run's metadata: run.json.
type Run struct {
	Seed int64
	// Group is the group the workers and consumers are members of; Topic
	// the topic they consume, with Partitions partitions (0 to
	// Partitions-1).
	Group      string
	Topic      string
	Partitions int32
	// Prefix is the coordinator's etcd store prefix (etcdstore.Prefix).
	Prefix           string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// Faults is the fault schedule, as it was carried out.
	Faults []Fault
	// ConsumerGroups are the groups of the stock consumers (Offsets,
	// Callbacks), which the history replay checks for two owners and
	// grant order too.
	ConsumerGroups []string
	// Unnoticed says that every fault of the run is one the stock
	// consumers must not notice (a coordinating node lost for good,
	// frozen for good, or a node joining): check 10 applies.
	Unnoticed bool
}

// Fault is one fault of the schedule. End is when it healed (the process
// restarted or resumed, the network or the quorum came back); a zero End
// means it never healed during the run.
type Fault struct {
	Kind   string    `json:"kind"`
	Target string    `json:"target"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end,omitzero"`
}

// runJSON is run.json: Run with its durations in Go's notation ("20s").
type runJSON struct {
	Seed             int64    `json:"seed"`
	Group            string   `json:"group"`
	Topic            string   `json:"topic"`
	Partitions       int32    `json:"partitions"`
	Prefix           string   `json:"prefix"`
	SessionTimeout   string   `json:"session_timeout"`
	RebalanceTimeout string   `json:"rebalance_timeout"`
	Faults           []Fault  `json:"faults"`
	ConsumerGroups   []string `json:"consumer_groups,omitempty"`
	Unnoticed        bool     `json:"unnoticed,omitempty"`
}

// MarshalJSON writes the form of run.json.
func (r Run) MarshalJSON() ([]byte, error) {
	faults := r.Faults
	if faults == nil {
		faults = []Fault{}
	}
	return json.Marshal(runJSON{
		Seed: r.Seed, Group: r.Group, Topic: r.Topic, Partitions: r.Partitions, Prefix: r.Prefix,
		SessionTimeout: r.SessionTimeout.String(), RebalanceTimeout: r.RebalanceTimeout.String(),
		Faults: faults, ConsumerGroups: r.ConsumerGroups, Unnoticed: r.Unnoticed,
	})
}

// UnmarshalJSON reads the form of run.json.
func (r *Run) UnmarshalJSON(b []byte) error {
	var j runJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	st, err := time.ParseDuration(j.SessionTimeout)
	if err != nil {
		return fmt.Errorf("session_timeout: %w", err)
	}
	rt, err := time.ParseDuration(j.RebalanceTimeout)
	if err != nil {
		return fmt.Errorf("rebalance_timeout: %w", err)
	}
	*r = Run{
		Seed: j.Seed, Group: j.Group, Topic: j.Topic, Partitions: j.Partitions, Prefix: j.Prefix,
		SessionTimeout: st, RebalanceTimeout: rt, Faults: j.Faults,
		ConsumerGroups: j.ConsumerGroups, Unnoticed: j.Unnoticed,
	}
	return nil
}

// validate reports what makes r unusable.
func (r *Run) validate() error {
	var errs []error
	if r.Group == "" {
		errs = append(errs, errors.New("no group"))
	}
	if r.Topic == "" {
		errs = append(errs, errors.New("no topic"))
	}
	if r.Partitions <= 0 {
		errs = append(errs, fmt.Errorf("partitions %d, want > 0", r.Partitions))
	}
	if r.Prefix == "" {
		errs = append(errs, errors.New("no store prefix"))
	}
	if r.SessionTimeout <= 0 || r.RebalanceTimeout <= 0 {
		errs = append(errs, fmt.Errorf("session timeout %v and rebalance timeout %v, want both > 0", r.SessionTimeout, r.RebalanceTimeout))
	}
	for i, f := range r.Faults {
		if f.Start.IsZero() || !f.End.IsZero() && f.End.Before(f.Start) {
			errs = append(errs, fmt.Errorf("fault %d (%s %s): start %v, end %v", i, f.Kind, f.Target, f.Start, f.End))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("check: run.json: %w", err)
	}
	return nil
}

// The ops of an Attempt.
const (
	OpAppend = "append" // a record appended to a resource (Seq)
	OpAdmit  = "admit"  // a token admitted at a resource
	OpCommit = "commit" // an offset committed to the coordinator (Offset)
	OpFetch  = "fetch"  // the committed offset read from the coordinator (Offset)
	OpClaim  = "claim"  // a claim started (T only; informational)
	OpForge  = "forge"  // a forged token's record appended to a resource (Seq, Cause)
)

// The outcomes of an Attempt.
const (
	OutcomeOK    = "ok"    // the resource or the coordinator accepted it
	OutcomeStale = "stale" // rejected for a stale token: nothing written
	OutcomeError = "error" // unknown: it may or may not have taken effect
	// OutcomeUnverified: refused by the resource's verifier as not issued
	// for the partition; nothing written.
	OutcomeUnverified = "unverified"
	// OutcomePending is a commit's line written before it is sent (T0
	// only), so that a writer killed before it logs the outcome leaves a
	// trace: a pending commit with no line of the same (writer, offset,
	// partition, T0) that ends it is of unknown outcome.
	OutcomePending = "pending"
)

// The resources of an Attempt and a Row.
const (
	ResourcePostgres    = "postgres"
	ResourceEtcd        = "etcd"
	ResourceCoordinator = "coordinator"
)

// Attempt is one line of a worker's attempt log: one operation with the
// real-time interval [T0, T1] from its call to its return. Claim lines
// carry T instead. The JSON names are the log's; fields the log has and
// this type does not are ignored.
type Attempt struct {
	T0        time.Time `json:"t0,omitzero"`
	T1        time.Time `json:"t1,omitzero"`
	T         time.Time `json:"t,omitzero"`
	Op        string    `json:"op"`
	Worker    string    `json:"worker,omitempty"`
	Member    string    `json:"member,omitempty"`
	Partition int32     `json:"partition"`
	Token     int64     `json:"token"`
	Seq       int64     `json:"seq"`
	Offset    int64     `json:"offset"`
	Resource  string    `json:"resource,omitempty"`
	Outcome   string    `json:"outcome,omitempty"`
	Err       string    `json:"err,omitempty"`
	// Held is true if a pause held the operation between the claim check
	// and the write: a zombie's write.
	Held bool `json:"held,omitempty"`
	// Cause is the kind of a forgery (OpForge).
	Cause string `json:"cause,omitempty"`
}

// Row is a record as a resource holds it. Order is the order in which the
// resource accepted it (PostgreSQL's serial id, etcd's mod revision),
// comparable only within one resource. Member may be empty if the
// resource does not keep it: the checks then go by Worker.
type Row struct {
	Resource  string `json:"resource"`
	Partition int32  `json:"partition"`
	Seq       int64  `json:"seq"`
	Token     int64  `json:"token"`
	Worker    string `json:"worker"`
	Member    string `json:"member,omitempty"`
	Order     int64  `json:"order"`
}

// KV is one revision of one key of the coordinator's store: a put of Value,
// or a deletion. Key and Value are base64 in JSON.
type KV struct {
	Rev     int64  `json:"rev"`
	Key     []byte `json:"key"`
	Value   []byte `json:"value,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// RevTime says that etcd's revision was Rev at wall time T.
type RevTime struct {
	Rev int64     `json:"rev"`
	T   time.Time `json:"t"`
}

// The kinds of an OffsetOp.
const (
	KindCommit = "commit"
	KindFetch  = "fetch"
)

// The outcomes of an OffsetOp.
const (
	OffsetOK      = "ok"      // committed, or fetched Offset
	OffsetError   = "error"   // unknown outcome (a timeout, a dropped connection)
	OffsetRefused = "refused" // the coordinator answered an error code: nothing written
	// OffsetPending is a commit's line written before it is sent, as
	// OutcomePending is an Attempt's.
	OffsetPending = "pending"
)

// OffsetOp is one commit or fetch of one partition's offset by a stock
// kgo consumer, with its real-time interval [T0, T1]. Group, if empty, is
// Run.Group; the topic is Run.Topic.
type OffsetOp struct {
	Client    string    `json:"client"`
	Group     string    `json:"group,omitempty"`
	Member    string    `json:"member,omitempty"`
	Partition int32     `json:"partition"`
	Kind      string    `json:"kind"`
	Offset    int64     `json:"offset"`
	T0        time.Time `json:"t0"`
	T1        time.Time `json:"t1"`
	Outcome   string    `json:"outcome"`
	Err       string    `json:"err,omitempty"`
}

// The kinds of a Callback: which of kgo's rebalance callbacks was called.
const (
	CallbackAssigned = "assigned" // OnPartitionsAssigned
	CallbackRevoked  = "revoked"  // OnPartitionsRevoked
	CallbackLost     = "lost"     // OnPartitionsLost
)

// Callback is one partition of one call of a stock consumer's rebalance
// callback, at wall time T, with the member ID and epoch (the generation,
// for a classic group) the client knew then. The topic is Run.Topic.
type Callback struct {
	Client    string    `json:"client"`
	Group     string    `json:"group"`
	Member    string    `json:"member,omitempty"`
	Epoch     int32     `json:"epoch"`
	Callback  string    `json:"callback"`
	Partition int32     `json:"partition"`
	T         time.Time `json:"t"`
}
