package epoch_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
)

const testPartition epoch.Partition = 3

// fixtures builds an Ownership of testPartition in every state, through
// legal transitions only; every fixture that ever held a token holds 5.
var fixtures = []struct {
	name  string
	build func() epoch.Ownership
}{
	{"Unowned", func() epoch.Ownership { return epoch.NewOwnership(testPartition) }},
	{"Pending", func() epoch.Ownership { return assigned(5) }},
	{"Owned", func() epoch.Ownership { o := assigned(5); o.Start(); return o }},
	{"Revoking", func() epoch.Ownership { o := assigned(5); o.Start(); o.Revoke(); return o }},
	{"Suspect(Pending)", func() epoch.Ownership { o := assigned(5); o.Suspect(); return o }},
	{"Suspect(Owned)", func() epoch.Ownership { o := assigned(5); o.Start(); o.Suspect(); return o }},
	{"Suspect(Revoking)", func() epoch.Ownership {
		o := assigned(5)
		o.Start()
		o.Revoke()
		o.Suspect()
		return o
	}},
	{"Lost", func() epoch.Ownership { o := assigned(5); o.Start(); o.Lose(); return o }},
}

func assigned(tok epoch.Token) epoch.Ownership {
	o := epoch.NewOwnership(testPartition)
	if err := o.Assign(tok); err != nil {
		panic(err)
	}
	return o
}

// fire calls the method for ev, assigning token 9 for EventAssign.
func fire(o *epoch.Ownership, ev epoch.Event) error {
	switch ev {
	case epoch.EventAssign:
		return o.Assign(9)
	case epoch.EventStart:
		o.Start()
	case epoch.EventRevoke:
		o.Revoke()
	case epoch.EventRelease:
		o.Release()
	case epoch.EventSuspect:
		o.Suspect()
	case epoch.EventConfirm:
		o.Confirm()
	case epoch.EventLose:
		o.Lose()
	default:
		panic("unknown event " + ev.String())
	}
	return nil
}

// firePanic calls fire and returns what it panicked with, if anything.
func firePanic(o *epoch.Ownership, ev epoch.Event) (panicked any, err error) {
	defer func() { panicked = recover() }()
	return nil, fire(o, ev)
}

var allEvents = []epoch.Event{
	epoch.EventAssign, epoch.EventStart, epoch.EventRevoke, epoch.EventRelease,
	epoch.EventSuspect, epoch.EventConfirm, epoch.EventLose,
}

func TestOwnershipTransitions(t *testing.T) {
	type outcome struct {
		state   epoch.State
		token   epoch.Token // Token() afterwards
		highest epoch.Token // Highest() afterwards
	}
	// legal lists every legal (fixture, event) pair and its outcome; every
	// pair not listed must panic and change nothing.
	legal := map[string]map[epoch.Event]outcome{
		"Unowned": {
			epoch.EventAssign: {epoch.Pending, 9, 9},
		},
		"Pending": {
			epoch.EventStart:   {epoch.Owned, 5, 5},
			epoch.EventRevoke:  {epoch.Revoking, 5, 5},
			epoch.EventSuspect: {epoch.Suspect, 5, 5},
			epoch.EventLose:    {epoch.Lost, epoch.None, 5},
		},
		"Owned": {
			epoch.EventRevoke:  {epoch.Revoking, 5, 5},
			epoch.EventSuspect: {epoch.Suspect, 5, 5},
			epoch.EventLose:    {epoch.Lost, epoch.None, 5},
		},
		"Revoking": {
			epoch.EventRelease: {epoch.Unowned, epoch.None, 5},
			epoch.EventSuspect: {epoch.Suspect, 5, 5},
			epoch.EventLose:    {epoch.Lost, epoch.None, 5},
		},
		"Suspect(Pending)": {
			epoch.EventConfirm: {epoch.Pending, 5, 5},
			epoch.EventLose:    {epoch.Lost, epoch.None, 5},
		},
		"Suspect(Owned)": {
			epoch.EventConfirm: {epoch.Owned, 5, 5},
			epoch.EventLose:    {epoch.Lost, epoch.None, 5},
		},
		"Suspect(Revoking)": {
			epoch.EventConfirm: {epoch.Revoking, 5, 5},
			epoch.EventLose:    {epoch.Lost, epoch.None, 5},
		},
		"Lost": {
			epoch.EventAssign: {epoch.Pending, 9, 9},
		},
	}
	for _, fx := range fixtures {
		for _, ev := range allEvents {
			t.Run(fx.name+"/"+ev.String(), func(t *testing.T) {
				o := fx.build()
				before := o
				want, ok := legal[fx.name][ev]
				if got := o.Can(ev); got != ok {
					t.Errorf("Can(%v) = %v, want %v", ev, got, ok)
				}
				panicked, err := firePanic(&o, ev)
				if !ok {
					msg, _ := panicked.(string)
					if panicked == nil {
						t.Fatalf("%v in %s did not panic; now %v", ev, fx.name, &o)
					}
					wantPrefix := "epoch: illegal transition " + before.State().String() + " -> "
					if !strings.HasPrefix(msg, wantPrefix) || !strings.Contains(msg, "for partition 3: "+ev.String()+" is allowed only in ") {
						t.Errorf("panic message %q does not name the transition, partition and event", msg)
					}
					if o != before {
						t.Errorf("a panicking %v changed the ownership: %v, was %v", ev, &o, &before)
					}
					return
				}
				if panicked != nil {
					t.Fatalf("%v in %s panicked: %v", ev, fx.name, panicked)
				}
				if err != nil {
					t.Fatalf("%v in %s: %v", ev, fx.name, err)
				}
				got := outcome{o.State(), o.Token(), o.Highest()}
				if got != want {
					t.Errorf("after %v: state %v token %v highest %v, want %v %v %v",
						ev, got.state, got.token, got.highest, want.state, want.token, want.highest)
				}
				if o.Working() != (want.state == epoch.Owned) {
					t.Errorf("Working() = %v in %v", o.Working(), want.state)
				}
				if o.Partition() != testPartition {
					t.Errorf("Partition() = %d, want %d", o.Partition(), testPartition)
				}
			})
		}
	}
}

func TestOwnershipAssignRejectsTokens(t *testing.T) {
	released := func() epoch.Ownership {
		o := assigned(5)
		o.Revoke()
		o.Release()
		return o
	}
	lost := func() epoch.Ownership {
		o := assigned(5)
		o.Lose()
		return o
	}
	fresh := func() epoch.Ownership { return epoch.NewOwnership(testPartition) }
	tests := []struct {
		name  string
		build func() epoch.Ownership
		tok   epoch.Token
		stale bool // else ErrNoToken
	}{
		{"none on a fresh ownership", fresh, epoch.None, false},
		{"negative on a fresh ownership", fresh, -1, false},
		{"released token again", released, 5, true},
		{"older than the released token", released, 4, true},
		{"lost token again", lost, 5, true},
		{"older than the lost token", lost, 2, true},
		{"none after a loss", lost, epoch.None, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.build()
			before := o
			err := o.Assign(tt.tok)
			if o != before {
				t.Errorf("rejected Assign(%v) changed the ownership: %v, was %v", tt.tok, &o, &before)
			}
			if !tt.stale {
				if !errors.Is(err, epoch.ErrNoToken) || errors.Is(err, epoch.ErrStale) {
					t.Fatalf("Assign(%v) = %v, want ErrNoToken", tt.tok, err)
				}
				return
			}
			var se *epoch.StaleError
			if !errors.As(err, &se) || !errors.Is(err, epoch.ErrStale) {
				t.Fatalf("Assign(%v) = %v, want a StaleError wrapping ErrStale", tt.tok, err)
			}
			want := epoch.StaleError{Partition: testPartition, Token: tt.tok, Current: 5}
			if *se != want {
				t.Errorf("StaleError = %+v, want %+v", *se, want)
			}
		})
	}
}

func TestOwnershipZeroValuePanics(t *testing.T) {
	var o epoch.Ownership
	panicked, _ := firePanic(&o, epoch.EventAssign)
	msg, _ := panicked.(string)
	if !strings.Contains(msg, "illegal transition State(0) -> Pending") || !strings.Contains(msg, "NewOwnership") {
		t.Errorf("Assign on a zero Ownership panicked with %q, want a hint to NewOwnership", msg)
	}
}

func TestStateAndEventStrings(t *testing.T) {
	states := map[epoch.State]string{
		0: "State(0)", epoch.Unowned: "Unowned", epoch.Pending: "Pending", epoch.Owned: "Owned",
		epoch.Revoking: "Revoking", epoch.Suspect: "Suspect", epoch.Lost: "Lost", 7: "State(7)",
	}
	for s, want := range states {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(s), got, want)
		}
		if got, wantW := s.Working(), s == epoch.Owned; got != wantW {
			t.Errorf("%v.Working() = %v, want %v", s, got, wantW)
		}
		wantHeld := s == epoch.Pending || s == epoch.Owned || s == epoch.Revoking || s == epoch.Suspect
		if got := s.Held(); got != wantHeld {
			t.Errorf("%v.Held() = %v, want %v", s, got, wantHeld)
		}
	}
	events := map[epoch.Event]string{
		0: "Event(0)", epoch.EventAssign: "Assign", epoch.EventStart: "Start", epoch.EventRevoke: "Revoke",
		epoch.EventRelease: "Release", epoch.EventSuspect: "Suspect", epoch.EventConfirm: "Confirm",
		epoch.EventLose: "Lose", 8: "Event(8)",
	}
	for e, want := range events {
		if got := e.String(); got != want {
			t.Errorf("Event(%d).String() = %q, want %q", uint8(e), got, want)
		}
	}
	o := epoch.NewOwnership(3)
	if o.Can(0) || o.Can(8) {
		t.Errorf("Can accepts an invalid event")
	}
}

func TestOwnershipString(t *testing.T) {
	want := map[string]string{
		"Unowned":           "partition 3 Unowned",
		"Pending":           "partition 3 Pending token 5",
		"Owned":             "partition 3 Owned token 5",
		"Revoking":          "partition 3 Revoking token 5",
		"Suspect(Pending)":  "partition 3 Suspect (from Pending) token 5",
		"Suspect(Owned)":    "partition 3 Suspect (from Owned) token 5",
		"Suspect(Revoking)": "partition 3 Suspect (from Revoking) token 5",
		"Lost":              "partition 3 Lost (highest 5)",
	}
	for _, fx := range fixtures {
		o := fx.build()
		if got := o.String(); got != want[fx.name] {
			t.Errorf("%s: String() = %q, want %q", fx.name, got, want[fx.name])
		}
	}
}

// TestOwnershipRandomSequences drives an Ownership with random events,
// legal or not, and random tokens, and checks after every step:
//   - an event the test's own legality rules forbid panics and changes
//     nothing; a legal one does not panic;
//   - the token held never decreases over the whole history, and Highest
//     never decreases;
//   - a token that was released or lost is never held again, let alone Owned;
//   - Confirm returns to the state Suspect interrupted;
//   - Working is true exactly in Owned, and Token is set exactly in Held states.
func TestOwnershipRandomSequences(t *testing.T) {
	legalFrom := map[epoch.Event][]epoch.State{
		epoch.EventAssign:  {epoch.Unowned, epoch.Lost},
		epoch.EventStart:   {epoch.Pending},
		epoch.EventRevoke:  {epoch.Pending, epoch.Owned},
		epoch.EventRelease: {epoch.Revoking},
		epoch.EventSuspect: {epoch.Pending, epoch.Owned, epoch.Revoking},
		epoch.EventConfirm: {epoch.Suspect},
		epoch.EventLose:    {epoch.Pending, epoch.Owned, epoch.Revoking, epoch.Suspect},
	}
	isLegal := func(ev epoch.Event, s epoch.State) bool {
		for _, from := range legalFrom[ev] {
			if from == s {
				return true
			}
		}
		return false
	}
	rapid.Check(t, func(t *rapid.T) {
		o := epoch.NewOwnership(testPartition)
		var (
			lastHeld    epoch.Token              // the latest token seen held
			highest     epoch.Token              // the test's own record of the highest token
			dead        = map[epoch.Token]bool{} // released or lost tokens
			interrupted epoch.State              // what Suspect interrupted
			history     []string
		)
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			ev := rapid.SampledFrom(allEvents).Draw(t, "event")
			before := o
			legal := isLegal(ev, o.State())
			var (
				err      error
				panicked any
				tok      epoch.Token
			)
			if ev == epoch.EventAssign {
				tok = epoch.Token(rapid.Int64Range(-1, int64(highest)+3).Draw(t, "token"))
				func() {
					defer func() { panicked = recover() }()
					err = o.Assign(tok)
				}()
			} else {
				panicked, err = firePanic(&o, ev)
			}
			history = append(history, fmt.Sprintf("%v(%v) -> %v", ev, tok, &o))
			if !legal {
				if panicked == nil {
					t.Fatalf("illegal %v in %v did not panic; history %v", ev, before.State(), history)
				}
				if o != before {
					t.Fatalf("illegal %v changed the ownership; history %v", ev, history)
				}
				continue
			}
			if panicked != nil {
				t.Fatalf("legal %v in %v panicked: %v; history %v", ev, before.State(), panicked, history)
			}
			switch ev {
			case epoch.EventAssign:
				wantErr := tok <= 0 || tok <= highest
				if (err != nil) != wantErr {
					t.Fatalf("Assign(%v) with highest %v returned %v; history %v", tok, highest, err, history)
				}
				if err != nil {
					if o != before {
						t.Fatalf("rejected Assign(%v) changed the ownership; history %v", tok, history)
					}
				} else {
					highest = tok
				}
			case epoch.EventSuspect:
				interrupted = before.State()
			case epoch.EventConfirm:
				if o.State() != interrupted {
					t.Fatalf("Confirm went to %v, Suspect had interrupted %v; history %v", o.State(), interrupted, history)
				}
			case epoch.EventRelease, epoch.EventLose:
				dead[before.Token()] = true
			}

			if o.Highest() != highest {
				t.Fatalf("Highest() = %v, want %v; history %v", o.Highest(), highest, history)
			}
			if o.State().Held() != !o.Token().IsNone() {
				t.Fatalf("state %v with token %v; history %v", o.State(), o.Token(), history)
			}
			if o.Working() != (o.State() == epoch.Owned) {
				t.Fatalf("Working() = %v in %v; history %v", o.Working(), o.State(), history)
			}
			if held := o.Token(); !held.IsNone() {
				if held < lastHeld {
					t.Fatalf("token went down from %v to %v; history %v", lastHeld, held, history)
				}
				if dead[held] {
					t.Fatalf("dead token %v is held again in %v; history %v", held, o.State(), history)
				}
				lastHeld = held
			}
		}
	})
}

func BenchmarkOwnership(b *testing.B) {
	// One full cycle through every state: Assign, Start, Suspect, Confirm,
	// Revoke, Release, Assign, Lose.
	b.Run("cycle", func(b *testing.B) {
		o := epoch.NewOwnership(3)
		tok := epoch.Token(0)
		for b.Loop() {
			tok++
			if err := o.Assign(tok); err != nil {
				b.Fatal(err)
			}
			o.Start()
			o.Suspect()
			o.Confirm()
			o.Revoke()
			o.Release()
			tok++
			if err := o.Assign(tok); err != nil {
				b.Fatal(err)
			}
			o.Lose()
		}
	})
	b.Run("assign-stale", func(b *testing.B) {
		o := assigned(5)
		o.Lose()
		for b.Loop() {
			if err := o.Assign(4); err == nil {
				b.Fatal("stale token admitted")
			}
		}
	})
}
