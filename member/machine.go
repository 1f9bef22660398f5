package member

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// Machine is one member's core: a pure state machine that never reads a
// clock, starts a goroutine or touches a socket. Time comes in as an
// argument to [Machine.Start], [Machine.Step], [Machine.Tick] and
// [Machine.Leave]; effects go out through [Machine.Ready]. It is not safe
// for concurrent use: one goroutine (the shell's event loop, or the
// simulator) owns it.
//
// See the package documentation for what it decides and why.
type Machine struct {
	cfg          MachineConfig
	window       epoch.Window
	expireAfter  time.Duration
	revokeAfter  time.Duration
	memberID     string
	subscription []string // sorted
	ids          map[string][16]byte
	names        map[[16]byte]string

	started bool
	start   time.Time // for String
	left    bool

	memberEpoch int32 // 0 while joining
	interval    time.Duration
	incarnation uint64 // bumped whenever the member starts over at epoch 0

	// The heartbeat in flight, if any.
	inflight          *kmsg.ConsumerGroupHeartbeatRequest
	inflightSent      time.Time
	inflightIncarn    uint64
	inflightRevocable bool // it reported partitions the coordinator revoked

	hbAt     time.Time // when the next regular heartbeat is due, if hbWanted
	hbWanted bool
	hbNow    bool // send a heartbeat as soon as none is in flight
	failures int  // consecutive failed heartbeats, for the backoff
	full     bool // the next heartbeat carries every field
	dirty    bool // the owned set changed since the last heartbeat that carried it

	lastAck  time.Time // send time of the last acknowledged heartbeat; zero if none
	revokeAt time.Time // the coordinator may evict us after this; zero if unarmed

	leaving     bool
	temporary   bool // a static member's temporary leave (epoch -2)
	resetLeave  bool // leave (epoch -1) before rejoining, to get fresh tokens
	leaveFailed bool

	claims     map[key]*claim
	order      []*claim // sorted by topic, partition
	deferred   []grant  // assignments waiting for revocations to complete
	unresolved []grant  // assignments of topics the machine cannot name
	counts     counts
	stale      bool // counts need a recount

	rd           Ready
	advanced     uint64    // Seq of the last Ready retired by Advance
	lastNextTick time.Time // NextTick of that Ready
}

// key identifies a partition as the coordinator does: by topic ID.
type key struct {
	id        [16]byte
	partition int32
}

// grant is a partition the coordinator assigned, not yet a Pending claim.
// An unresolved grant has the token of the response that brought it; a
// deferred one (waiting for revocations) has none until it is accepted,
// when it takes the member's epoch then: the epoch of the heartbeat that
// first reports it, which is the token the coordinator fixes.
type grant struct {
	key
	token epoch.Token
}

// NewMachine returns a member that has not started. It panics if
// cfg.Validate fails: validate a config that comes from users first.
func NewMachine(cfg MachineConfig) *Machine {
	if err := cfg.Validate(); err != nil {
		panic("member: NewMachine with an invalid config: " + err.Error())
	}
	m := &Machine{
		cfg:          cfg,
		window:       cfg.window(),
		expireAfter:  cfg.expireAfter(),
		revokeAfter:  cfg.revokeAfter(),
		memberID:     cfg.MemberID,
		subscription: sortedTopics(cfg.Topics),
		ids:          make(map[string][16]byte),
		names:        make(map[[16]byte]string),
		claims:       make(map[key]*claim),
	}
	m.learn(cfg.TopicIDs)
	return m
}

// Start asks the machine to join (first heartbeat at epoch 0) at now.
// Calling it again does nothing.
func (m *Machine) Start(now time.Time) {
	if m.started {
		return
	}
	m.started, m.start = true, now
	m.full, m.hbNow = true, true
	m.process(now)
}

// Step feeds one event at now. Events that do not fit the machine's state
// (a response with nothing in flight, a release of a token the claim no
// longer holds) are ignored: they come from the network or from racing
// goroutines, never from a bug the machine could detect.
func (m *Machine) Step(now time.Time, ev Event) {
	if !m.started || m.left {
		if e, ok := ev.(TopicIDs); ok {
			m.learn(e.IDs)
		}
		return
	}
	switch e := ev.(type) {
	case HeartbeatResponse:
		m.onResponse(now, e)
	case HeartbeatFailed:
		m.onFailure(now, e)
	case Released:
		m.onReleased(e)
	case Started:
		m.onStarted(e)
	case CommitRejected:
		m.onCommitRejected(e)
	case TopicIDs:
		m.onTopicIDs(now, e)
	}
	m.process(now)
}

// Tick fires the timers due at now: heartbeat due, safe-ownership
// deadline, session surely expired, revocation deadline.
func (m *Machine) Tick(now time.Time) {
	if !m.started || m.left {
		return
	}
	m.process(now)
}

// Leave starts a graceful leave: revoke every claim, wait until all are
// released, send the leave heartbeat (epoch -1, or -2 for static members
// leaving temporarily when Leave(temporary=true)). Heartbeats go on while
// the claims are released. [Ready.Left] reports the end.
func (m *Machine) Leave(now time.Time, temporary bool) {
	if m.left || m.leaving {
		return
	}
	if !m.started {
		m.left, m.rd.Left = true, true
		return
	}
	m.leaving = true
	m.temporary = temporary && m.cfg.InstanceID != ""
	m.deferred, m.unresolved = m.deferred[:0], m.unresolved[:0]
	for _, c := range m.order {
		switch from := c.own.State(); from {
		case epoch.Pending, epoch.Owned:
			c.own.Revoke()
			c.revoked = true
			m.change(c, from, causeLeaving)
		case epoch.Revoking, epoch.Suspect:
			c.revoked = true
		}
	}
	m.stale = true
	m.process(now)
}

// Subscribe replaces the subscription; the next heartbeat, sent at once,
// carries it. An empty subscription keeps the member in the group with no
// partitions: the coordinator revokes them all. Names must be non-empty
// and distinct, else the error wraps [ErrConfig] and nothing changes.
func (m *Machine) Subscribe(now time.Time, topics []string) error {
	if err := validTopics(topics); err != nil {
		return err
	}
	m.subscription = sortedTopics(topics)
	if !m.started || m.left {
		return nil
	}
	m.full, m.hbNow = true, true
	m.process(now)
	return nil
}

// HasReady reports whether [Machine.Ready] has something for the shell:
// a heartbeat, changes, topics to resolve, the end, or a new NextTick.
func (m *Machine) HasReady() bool {
	rd := &m.rd
	return rd.Heartbeat != nil || len(rd.Changes) > 0 || len(rd.Resolve) > 0 ||
		rd.Left || rd.Err != nil || !m.nextTick().Equal(m.lastNextTick)
}

// Ready returns what the shell must do now (see [Ready] for the order and
// the obligations). It returns the same Seq, and what it held, until
// [Machine.Advance] retires it; a Step in between only adds to it. The
// Changes slice is valid until Advance.
func (m *Machine) Ready() Ready {
	rd := m.rd
	rd.Seq = m.advanced + 1
	rd.NextTick = m.nextTick()
	return rd
}

// Advance tells the machine the shell has performed rd, which Ready
// returned. Only what rd held is retired: a heartbeat, changes or topics
// to resolve that a Step added after that Ready stay for the next one
// (raft's rule, and [coordinator.Group.Advance]'s). The machine reuses the
// memory of rd.Changes. Advancing any Ready but the machine's current one
// is a bug of the shell, and panics.
func (m *Machine) Advance(rd Ready) {
	if rd.Seq != m.advanced+1 {
		panic(fmt.Sprintf("member: Advance of Ready %d, but the machine's next Ready is %d", rd.Seq, m.advanced+1))
	}
	m.advanced = rd.Seq
	// The heartbeat and the topics to resolve are replaced, not queued: a
	// later Step's own stays.
	if m.rd.Heartbeat == rd.Heartbeat {
		m.rd.Heartbeat = nil
	}
	if sameSlice(m.rd.Resolve, rd.Resolve) {
		m.rd.Resolve = nil
	}
	m.rd.Changes = retire(m.rd.Changes, len(rd.Changes))
	if rd.Left {
		// Err is only ever set with Left.
		m.rd.Left, m.rd.Err = false, nil
	}
	m.lastNextTick = rd.NextTick
}

// retire drops the first n elements of s, keeping what is left in s's
// memory.
func retire[T any](s []T, n int) []T {
	k := copy(s, s[n:])
	clear(s[k:])
	return s[:k]
}

// sameSlice reports whether a and b are the same elements of the same
// memory.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// MemberID returns the member's ID (the configured one, or the one the
// coordinator returned if it chose another).
func (m *Machine) MemberID() string { return m.memberID }

// MemberEpoch returns the member epoch the coordinator last gave; 0 while
// joining.
func (m *Machine) MemberEpoch() int32 { return m.memberEpoch }

// HeartbeatInterval returns the interval the coordinator asked for; 0
// before its first response. Check it with
// [MachineConfig.ValidateInterval].
func (m *Machine) HeartbeatInterval() time.Duration { return m.interval }

// Deadline returns the safe-ownership deadline: the instant at which
// Pending, Owned and Revoking claims go Suspect unless a later heartbeat
// is acknowledged. Zero before the first acknowledgement of the current
// membership.
func (m *Machine) Deadline() time.Time {
	if m.lastAck.IsZero() {
		return time.Time{}
	}
	return m.window.Deadline(m.lastAck)
}

// Left reports whether the member is done.
func (m *Machine) Left() bool { return m.left }

// Claims lists the claims the machine holds or has lost, sorted by topic
// and partition: Lost claims stay listed, with their dead token, until the
// partition is assigned again. Released claims are not listed.
func (m *Machine) Claims() []ClaimState {
	out := make([]ClaimState, 0, len(m.order))
	for _, c := range m.order {
		st := c.own.State()
		if st == epoch.Unowned {
			continue
		}
		out = append(out, ClaimState{Topic: c.topic, Partition: c.key.partition, Token: c.token(), State: st})
	}
	return out
}

// learn records topic IDs.
func (m *Machine) learn(ids map[string][16]byte) {
	for name, id := range ids {
		if name == "" {
			continue
		}
		if old, ok := m.ids[name]; ok && old != id {
			delete(m.names, old)
		}
		m.ids[name] = id
		m.names[id] = name
	}
}

// process runs after every input: it fires due timers, emits a heartbeat
// if one is due, and keeps the counters current.
func (m *Machine) process(now time.Time) {
	if m.left {
		return
	}
	m.recount()
	if !m.revokeAt.IsZero() && !now.Before(m.revokeAt) {
		// A revoked partition was not released and acknowledged in time:
		// the coordinator may evict the member any moment now, and give
		// every partition it holds to others.
		m.revokeAt = time.Time{}
		if m.counts.held > 0 {
			m.loseAll(causeRebalanceTimeout)
			m.recount()
		}
	}
	if m.memberEpoch > 0 && !m.lastAck.IsZero() && !now.Before(m.lastAck.Add(m.expireAfter)) {
		m.suspectAll()
		m.loseAll(causeSessionExpired)
		m.recount()
		if m.leaving {
			m.finishLeave()
			return
		}
	}
	if m.counts.live > 0 && !m.lastAck.IsZero() && m.window.Lapsed(m.lastAck, now) {
		m.suspectAll()
		m.recount()
	}
	m.maybeHeartbeat(now)
}

// nextTick is the earliest instant at which process has something to do.
func (m *Machine) nextTick() time.Time {
	if !m.started || m.left {
		return time.Time{}
	}
	var t time.Time
	earliest := func(u time.Time) {
		if !u.IsZero() && (t.IsZero() || u.Before(t)) {
			t = u
		}
	}
	if m.inflight == nil && m.hbWanted {
		earliest(m.hbAt)
	}
	if !m.lastAck.IsZero() {
		if m.counts.live > 0 {
			earliest(m.window.Deadline(m.lastAck))
		}
		if m.memberEpoch > 0 {
			earliest(m.lastAck.Add(m.expireAfter))
		}
	}
	earliest(m.revokeAt)
	return t
}

// insert adds c to the claims, keeping m.order sorted.
func (m *Machine) insert(c *claim) {
	i, _ := slices.BinarySearchFunc(m.order, c, func(a, b *claim) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.key.partition) - int(b.key.partition)
	})
	m.order = slices.Insert(m.order, i, c)
	m.claims[c.key] = c
}
