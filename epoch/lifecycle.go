package epoch

import (
	"strconv"
	"strings"
)

// State is where a member's ownership of one partition stands. The zero
// State is invalid; see the package documentation for the diagram.
type State uint8

// The states of an [Ownership].
const (
	// Unowned: the member holds no token for the partition and does no work
	// on it. Every Ownership starts here.
	Unowned State = iota + 1
	// Pending: the coordinator has assigned the partition with a token, but
	// the member may not work yet: the previous owner may not have released
	// it, or the member has not started its worker.
	Pending
	// Owned: the member holds a live token and may work. The only state in
	// which work is allowed.
	Owned
	// Revoking: graceful hand-off. The member stops new work, commits what
	// it has done under its still-valid token, then releases the partition.
	Revoking
	// Suspect: the member cannot confirm that its session is alive (its
	// safe-ownership deadline passed, see [Window]). Work must stop now; the
	// token may still be valid, so the ownership can be confirmed later.
	Suspect
	// Lost: the session expired or the member was fenced. The token is dead
	// forever; owning the partition again takes a new, higher token.
	Lost
)

var stateNames = [...]string{
	Unowned:  "Unowned",
	Pending:  "Pending",
	Owned:    "Owned",
	Revoking: "Revoking",
	Suspect:  "Suspect",
	Lost:     "Lost",
}

// String returns the state's name, or "State(n)" for an invalid value.
func (s State) String() string {
	if s >= Unowned && s <= Lost {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Working reports whether a member in state s may work on the partition:
// true only in [Owned]. Every other state means stop (or do not start).
func (s State) Working() bool { return s == Owned }

// Held reports whether a member in state s holds a token that may still be
// live: [Pending], [Owned], [Revoking] and [Suspect]. These are the states
// from which [Ownership.Lose] is legal.
func (s State) Held() bool {
	return s == Pending || s == Owned || s == Revoking || s == Suspect
}

// Event names a transition of an [Ownership]: one per method. Use it with
// [Ownership.Can]. The zero Event is invalid.
type Event uint8

// The events of an [Ownership], one per transition method.
const (
	EventAssign  Event = iota + 1 // [Ownership.Assign]
	EventStart                    // [Ownership.Start]
	EventRevoke                   // [Ownership.Revoke]
	EventRelease                  // [Ownership.Release]
	EventSuspect                  // [Ownership.Suspect]
	EventConfirm                  // [Ownership.Confirm]
	EventLose                     // [Ownership.Lose]
)

// stateSet is a bit set of States.
type stateSet uint8

func setOf(states ...State) stateSet {
	var s stateSet
	for _, st := range states {
		s |= 1 << st
	}
	return s
}

func (s stateSet) has(st State) bool { return st < 8 && s&(1<<st) != 0 }

// events describes every transition: the states it is legal from, and the
// state it leads to. Confirm leads back to the state Suspect interrupted;
// its "to" is the usual case, for messages only.
var events = [...]struct {
	name string
	from stateSet
	to   State
}{
	EventAssign:  {"Assign", setOf(Unowned, Lost), Pending},
	EventStart:   {"Start", setOf(Pending), Owned},
	EventRevoke:  {"Revoke", setOf(Pending, Owned), Revoking},
	EventRelease: {"Release", setOf(Revoking), Unowned},
	EventSuspect: {"Suspect", setOf(Pending, Owned, Revoking), Suspect},
	EventConfirm: {"Confirm", setOf(Suspect), Owned},
	EventLose:    {"Lose", setOf(Pending, Owned, Revoking, Suspect), Lost},
}

// String returns the event's name (its method's name), or "Event(n)".
func (e Event) String() string {
	if e >= EventAssign && e <= EventLose {
		return events[e].name
	}
	return "Event(" + strconv.Itoa(int(e)) + ")"
}

// Ownership is the lifecycle of one member's ownership of one partition: a
// pure state machine (no clock, no I/O) with one method per transition. See
// the package documentation for the diagram.
//
// It holds the current token and the highest token it has ever held, so
// that a new ownership, after a release or a loss, must carry a strictly
// higher token: a token once given up is never used again.
//
// Calling a transition from a state that does not allow it is a bug in the
// caller and panics ("epoch: illegal transition Lost -> Owned for partition
// 3 ..."); use [Ownership.Can] when in doubt. A token that does not grow is
// something the network can deliver, so [Ownership.Assign] returns an error
// for it instead.
//
// Make one with [NewOwnership]; the zero Ownership is invalid. An Ownership
// is a small value and not safe for concurrent use.
type Ownership struct {
	partition Partition
	state     State
	token     Token // live token while state.Held(), else None
	highest   Token // highest token ever held
	resume    State // the state Suspect interrupted; zero otherwise
}

// NewOwnership returns the ownership of partition by a member that has
// never held it: [Unowned], with no token.
func NewOwnership(partition Partition) Ownership {
	return Ownership{partition: partition, state: Unowned}
}

// Partition returns the partition this ownership is about.
func (o *Ownership) Partition() Partition { return o.partition }

// State returns the current state.
func (o *Ownership) State() State { return o.state }

// Working reports whether the member may work on the partition now: true
// only in [Owned].
func (o *Ownership) Working() bool { return o.state.Working() }

// Token returns the token of the current ownership while it may be live
// ([State.Held]), and [None] in [Unowned] and [Lost]: that is the token to
// attach to commits and fenced writes.
func (o *Ownership) Token() Token {
	return o.token
}

// Highest returns the highest token this ownership has ever held (None if
// it never held one). In [Lost] it is the dead token. The next
// [Ownership.Assign] must carry a higher one.
func (o *Ownership) Highest() Token { return o.highest }

// Can reports whether event is legal in the current state, that is whether
// calling its method would not panic. For [EventAssign] it says nothing
// about the token, which [Ownership.Assign] checks and reports as an error.
func (o *Ownership) Can(event Event) bool {
	return event >= EventAssign && event <= EventLose && events[event].from.has(o.state)
}

// Assign records that the coordinator assigned the partition with token:
// [Unowned] or [Lost] -> [Pending]. Work may begin only after [Ownership.Start].
//
// A token that is not higher than every token this ownership has held
// returns a [*StaleError] (wrapping [ErrStale], with Current set to
// [Ownership.Highest]); a token that is not [Token.Valid] returns an error
// wrapping [ErrNoToken]. In both cases nothing changes. Calling Assign in
// any other state panics.
func (o *Ownership) Assign(token Token) error {
	o.must(EventAssign)
	if !token.Valid() {
		return noTokenError(token)
	}
	if token <= o.highest {
		return &StaleError{Partition: o.partition, Token: token, Current: o.highest}
	}
	o.state, o.token, o.highest = Pending, token, token
	return nil
}

// Start lets work begin once the previous owner has released the partition
// and the worker is ready: [Pending] -> [Owned].
func (o *Ownership) Start() {
	o.must(EventStart)
	o.state = Owned
}

// Revoke begins a graceful hand-off asked for by the coordinator: [Owned]
// or [Pending] -> [Revoking]. Stop new work, commit what was done under
// [Ownership.Token] (still valid), then call [Ownership.Release].
func (o *Ownership) Revoke() {
	o.must(EventRevoke)
	o.state = Revoking
}

// Release ends a graceful hand-off once work has stopped and everything
// is committed: [Revoking] -> [Unowned]. The released token is never held
// again.
func (o *Ownership) Release() {
	o.must(EventRelease)
	o.state, o.token = Unowned, None
}

// Suspect stops work because the member cannot confirm its session (its
// safe-ownership deadline passed, see [Window.Deadline]): [Pending],
// [Owned] or [Revoking] -> [Suspect]. The ownership remembers which of the
// three it interrupted, for [Ownership.Confirm].
func (o *Ownership) Suspect() {
	o.must(EventSuspect)
	o.state, o.resume = Suspect, o.state
}

// Confirm resumes the ownership that [Suspect] interrupted: [Suspect] ->
// [Pending], [Owned] or [Revoking], whichever it was. A Revoking ownership
// therefore does not start working again, and a Pending one still waits for
// [Ownership.Start].
//
// Confirm is safe only if the coordinator has confirmed this member's
// session and this same token again. Typically: a heartbeat was
// acknowledged, its response still gives the partition at
// [Ownership.Token], and the deadline counted from that heartbeat's send
// time ([Window.Deadline]) is still ahead. The caller decides that; if the
// coordinator answers that the session expired, call [Ownership.Lose]
// instead.
func (o *Ownership) Confirm() {
	o.must(EventConfirm)
	o.state, o.resume = o.resume, 0
}

// Lose records that the token is dead: the session expired, or the
// coordinator or a fence rejected the token. [Pending], [Owned], [Revoking]
// or [Suspect] -> [Lost]. Owning the partition again takes
// [Ownership.Assign] with a higher token.
func (o *Ownership) Lose() {
	o.must(EventLose)
	o.state, o.token, o.resume = Lost, None, 0
}

// String describes the ownership for logs and tests, for example
// "partition 3 Owned token 7" or "partition 3 Suspect (from Revoking) token 7"
// or "partition 3 Lost (highest 7)".
func (o *Ownership) String() string {
	var b strings.Builder
	b.WriteString("partition ")
	b.WriteString(strconv.Itoa(int(o.partition)))
	b.WriteByte(' ')
	b.WriteString(o.state.String())
	if o.state == Suspect {
		b.WriteString(" (from ")
		b.WriteString(o.resume.String())
		b.WriteByte(')')
	}
	if o.state.Held() {
		b.WriteString(" token ")
		b.WriteString(o.token.String())
	} else if !o.highest.IsNone() {
		b.WriteString(" (highest ")
		b.WriteString(o.highest.String())
		b.WriteByte(')')
	}
	return b.String()
}

// must panics unless event is legal in the current state.
func (o *Ownership) must(event Event) {
	if events[event].from.has(o.state) {
		return
	}
	panic(o.illegal(event))
}

func (o *Ownership) illegal(event Event) string {
	ev := events[event]
	var allowed []string
	for s := Unowned; s <= Lost; s++ {
		if ev.from.has(s) {
			allowed = append(allowed, s.String())
		}
	}
	msg := "epoch: illegal transition " + o.state.String() + " -> " + ev.to.String() +
		" for partition " + strconv.Itoa(int(o.partition)) +
		": " + ev.name + " is allowed only in " + strings.Join(allowed, ", ")
	if o.state == 0 {
		msg += " (the Ownership was not made by NewOwnership)"
	}
	return msg
}
