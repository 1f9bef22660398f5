package member

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frozenCluster is a kfake cluster of three brokers in which the broker
// that coordinated group "g" froze (it keeps its connections and answers
// nothing, as under SIGSTOP) and the group moved to another broker, as an
// HA set's survivors take it over. The frozen broker's address is the
// last seed, so that a client's first Metadata does not wait on it.
func frozenCluster(t *testing.T) (c *kfake.Cluster, seeds []string, frozen int32) {
	t.Helper()
	c = startKfakeBrokers(t, 3, testInterval)
	frozen = c.CoordinatorFor("g")
	for c.CoordinatorFor("g") == frozen {
		c.RehashCoordinators()
	}
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		// Handled with no answer and no error: the connection stays
		// open and nothing comes back.
		return nil, nil, c.CurrentNode() == frozen
	})
	addrs := c.ListenAddrs()
	for i, a := range addrs {
		if int32(i) != frozen {
			seeds = append(seeds, a)
		}
	}
	return c, append(seeds, addrs[frozen]), frozen
}

// TestFindCoordinatorFrozenBroker: kgo sends FindCoordinator to one broker
// of its choosing, round robin, so some of a few lookups wait on the
// frozen broker until they time out; findCoordinator asks every broker
// at once and is answered by the live ones every time.
func TestFindCoordinatorFrozenBroker(t *testing.T) {
	c, seeds, frozen := frozenCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// kgo's first Metadata goes to a seed of its choosing: if it is the
	// frozen one, the next try goes to another.
	for i := 0; len(cl.DiscoveredBrokers()) != 3; i++ {
		if i == 5 {
			t.Fatalf("%d brokers discovered, want 3", len(cl.DiscoveredBrokers()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
	}
	want := c.CoordinatorFor("g")

	stalled := 0
	for range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g"}
		if _, err := req.RequestWith(ctx, cl); err != nil {
			stalled++
		}
		cancel()
	}
	if stalled == 0 {
		t.Fatalf("none of 4 lookups through kgo's own routing reached the frozen broker %d: the test shows nothing", frozen)
	}

	for i := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		id, err := findCoordinator(ctx, cl, "g")
		cancel()
		if err != nil || id != want {
			t.Fatalf("lookup %d: coordinator %d, %v; want %d", i, id, err, want)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("lookup %d took %v: it waited on the frozen broker", i, took)
		}
	}
	t.Logf("kgo's own lookups stalled on the frozen broker %d: %d of 4", frozen, stalled)
}

// TestJoinWhileCoordinatorFrozen: members join while the broker that
// coordinated their group is frozen and another coordinates it. Each
// joins within a few heartbeat intervals; a lookup that waited on the
// frozen broker would hold its join heartbeats for kgo's 10 s
// RequestTimeoutOverhead.
func TestJoinWhileCoordinatorFrozen(t *testing.T) {
	_, seeds, _ := frozenCluster(t)
	for i := range 3 {
		start := time.Now()
		s := join(t, testConfig(t, seeds), (&recorder{t: t}).handler(fmt.Sprint("m", i)))
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("member %d (%s) took %v to join", i, s.MemberID(), took)
		}
	}
}

// TestCommitWhileCoordinatorFrozen: a member commits, its coordinator
// freezes (connections open, nothing answered) and another broker takes
// the group over; once the heartbeats reach the new coordinator, a commit
// goes there too and is accepted. Through kgo's coordinator cache it went
// to the frozen broker kgo had looked up for the first commit, and waited
// out kgo's 10 s RequestTimeoutOverhead, past the commit's deadline.
func TestCommitWhileCoordinatorFrozen(t *testing.T) {
	claim, old, now := claimThroughFreeze(t, func(claim *Claim) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := claim.Commit(ctx, 1, ""); err != nil {
			t.Fatalf("commit before the freeze: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := claim.Commit(ctx, 2, ""); err != nil {
		t.Fatalf("commit after coordinator %d froze and %d took over: %v", old, now, err)
	}
}

// TestCommittedWhileCoordinatorFrozen: as TestCommitWhileCoordinatorFrozen,
// for reading the committed offset. The member reads it before the freeze
// (so kgo, had it been asked, would hold the coordinator it found then);
// after the group moved and the heartbeats followed, a read with a 5 s
// deadline gets the committed offset from the new coordinator. Through
// kgo's coordinator cache it went to the frozen broker and waited out
// kgo's 10 s RequestTimeoutOverhead.
func TestCommittedWhileCoordinatorFrozen(t *testing.T) {
	claim, old, now := claimThroughFreeze(t, func(claim *Claim) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := claim.Commit(ctx, 7, ""); err != nil {
			t.Fatalf("commit before the freeze: %v", err)
		}
		if off, err := claim.Committed(ctx); err != nil || off != 7 {
			t.Fatalf("committed offset before the freeze: %d, %v; want 7", off, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	off, err := claim.Committed(ctx)
	if err != nil || off != 7 {
		t.Fatalf("committed offset after coordinator %d froze and %d took over: %d, %v; want 7", old, now, off, err)
	}
}

// claimThroughFreeze joins a member of group "g" to a kfake cluster of
// three brokers, calls before with its first claim, then freezes the
// group's coordinator (connections open, nothing answered), moves the
// group to another broker and waits until the member's heartbeats reach
// it, with the claim still held.
func claimThroughFreeze(t *testing.T, before func(*Claim)) (claim *Claim, old, now int32) {
	t.Helper()
	c := startKfakeBrokers(t, 3, testInterval)
	var frozen atomic.Int32
	frozen.Store(-1)
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, c.CurrentNode() == frozen.Load()
	})
	claims := make(chan *Claim, testParts)
	h := func(cl *Claim) {
		claims <- cl
		<-cl.Context().Done()
	}
	s := join(t, testConfig(t, c.ListenAddrs()), h)
	select {
	case claim = <-claims:
	case <-time.After(10 * time.Second):
		t.Fatal("no claim within 10 s")
	}
	before(claim)

	old = c.CoordinatorFor("g")
	frozen.Store(old)
	for c.CoordinatorFor("g") == old {
		c.RehashCoordinators()
	}
	now = c.CoordinatorFor("g")
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.coord.mu.Lock()
		id := s.coord.id
		s.coord.mu.Unlock()
		if id == now {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the heartbeats did not reach the new coordinator %d within 10 s (at %d)", now, id)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !claim.State().Held() {
		t.Fatalf("the claim was lost while the coordinator moved (%v)", claim.State())
	}
	return claim, old, now
}

// TestCommitDuringClose: a commit still looking for a coordinator that
// answers when the session closes ends with ErrClosed at its next try,
// rather than looking the coordinator up again until its own deadline
// (coordinatorRetryWait). Such a lookup started while Close waited for
// the session's goroutines: a WaitGroup Add racing its Wait, which -race
// reported in a worker stopping during its commits, and which may panic.
func TestCommitDuringClose(t *testing.T) {
	c := startKfakeBrokers(t, 1, testInterval)
	var frozen atomic.Bool
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, frozen.Load()
	})
	claims := make(chan *Claim, testParts)
	release := make(chan struct{})
	handled := make(chan struct{}, testParts)
	h := func(cl *Claim) {
		defer func() { handled <- struct{}{} }()
		claims <- cl
		<-release
	}
	jctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Join(jctx, testConfig(t, c.ListenAddrs()), h)
	if err != nil {
		t.Fatal(err)
	}
	var claim *Claim
	select {
	case claim = <-claims:
	case <-time.After(10 * time.Second):
		t.Fatal("no claim within 10 s")
	}

	// Nothing answers from now on: the commit tries, times out, looks
	// for the coordinator again, and again.
	frozen.Store(true)
	committed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		committed <- claim.Commit(ctx, 1, "")
	}()
	// The leave is not answered either: Close gives up after a request's
	// time, with the handler still running.
	cctx, ccancel := context.WithTimeout(context.Background(), testRequest)
	defer ccancel()
	if err := s.Close(cctx); err == nil {
		t.Error("Close answered nil with a frozen coordinator and a handler that holds on")
	}
	select {
	case err := <-committed:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("the commit during Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the commit still looks for the coordinator 10 s after Close (it may for %v)", coordinatorRetryWait)
	}
	close(release)
	<-handled
}
