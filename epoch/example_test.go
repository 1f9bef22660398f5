package epoch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// A resource checks the writer's token before it applies a write. The owner
// of partition 3 got it at generation 7; a former owner, paused at
// generation 6, wakes up and tries to write: the fence rejects it.
func ExampleMemFence() {
	var fence epoch.MemFence // the zero MemFence is ready to use
	ctx := context.Background()

	fmt.Println(fence.Admit(ctx, 3, 7)) // the current owner writes
	fmt.Println(fence.Admit(ctx, 3, 7)) // and writes again with the same token

	err := fence.Admit(ctx, 3, 6) // the former owner's late write
	fmt.Println(err)
	fmt.Println(errors.Is(err, epoch.ErrStale))

	var stale *epoch.StaleError
	if errors.As(err, &stale) {
		fmt.Println("rejected", stale.Token, "current", stale.Current)
	}

	fmt.Println(fence.Admit(ctx, 3, 8), fence.Current(3)) // a newer owner takes over
	fmt.Println(fence.Admit(ctx, 4, epoch.None))          // no token, no write
	// Output:
	// <nil>
	// <nil>
	// epoch: stale token 6 for partition 3 (current 7)
	// true
	// rejected 6 current 7
	// <nil> 8
	// epoch: no token
}

// A member's view of partition 3 through one ownership, a suspicion, a
// graceful hand-off and a lost session.
func ExampleOwnership() {
	o := epoch.NewOwnership(3)
	fmt.Println(&o)

	_ = o.Assign(5) // the coordinator gives partition 3 at generation 5
	fmt.Println(&o, "working:", o.Working())
	o.Start() // the previous owner released it
	fmt.Println(&o, "working:", o.Working())

	o.Suspect() // the safe-ownership deadline passed: stop work now
	fmt.Println(&o, "working:", o.Working())
	o.Confirm() // a later heartbeat confirmed the session and token 5
	fmt.Println(&o)

	o.Revoke() // the coordinator moves the partition: commit, then release
	o.Release()
	fmt.Println(&o)

	// A replayed response offering token 5 again is rejected, not a panic.
	fmt.Println(o.Assign(5))

	_ = o.Assign(9)
	o.Lose() // the session expired: token 9 is dead
	fmt.Println(&o, "can start:", o.Can(epoch.EventStart))
	// Output:
	// partition 3 Unowned
	// partition 3 Pending token 5 working: false
	// partition 3 Owned token 5 working: true
	// partition 3 Suspect (from Owned) token 5 working: false
	// partition 3 Owned token 5
	// partition 3 Unowned (highest 5)
	// epoch: stale token 5 for partition 3 (current 5)
	// partition 3 Lost (highest 9) can start: false
}

// Calling a transition the current state does not allow is a bug in the
// caller, and panics.
func ExampleOwnership_illegal() {
	o := epoch.NewOwnership(3)
	_ = o.Assign(5)
	o.Lose()
	defer func() { fmt.Println(recover()) }()
	o.Start()
	// Output:
	// epoch: illegal transition Lost -> Owned for partition 3: Start is allowed only in Pending
}

// The worked example of the package documentation: a 10 s session, 1 %
// drift and a 100 ms margin make a member Suspect 9.8 s after it sent its
// last acknowledged heartbeat.
func ExampleWindow_Deadline() {
	w := epoch.Window{SessionTimeout: 10 * time.Second, MaxDrift: 0.01, Margin: 100 * time.Millisecond}

	// In a member these come from its monotonic clock (time.Now); the
	// clock is read before the heartbeat is sent.
	sent := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	deadline := w.Deadline(sent)

	fmt.Println(w.SuspectAfter())
	fmt.Println(deadline.Sub(sent))
	fmt.Println(w.Lapsed(sent, sent.Add(9*time.Second)))
	fmt.Println(w.Lapsed(sent, deadline))
	// Output:
	// 9.8s
	// 9.8s
	// false
	// true
}

func ExampleTiming_Validate() {
	fmt.Println(epoch.DefaultTiming().Validate())

	t := epoch.Timing{
		HeartbeatInterval: 5 * time.Second,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  time.Minute,
		MaxDrift:          0.01,
		Margin:            0,
	}
	err := t.Validate()
	fmt.Println(errors.Is(err, epoch.ErrUnsafeTiming))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// epoch: unsafe timing: margin 0s must be positive: it keeps the suspect deadline strictly before the session's expiry
	// epoch: unsafe timing: heartbeat interval 5s × 3 exceeds session timeout 10s: a session must survive two lost heartbeats
}
