package member

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/epoch"
)

// Three members share the 64 partitions of a kfake cluster (which speaks
// KIP-848 as Kafka does): once stable, every partition is Owned by exactly
// one. One leaves gracefully: its handlers commit under their still valid
// tokens, and its partitions move to the others with higher tokens, never
// worked on by two members at once.
func TestKfakeShareAndLeave(t *testing.T) {
	brokers := startKfake(t)
	rec := &recorder{t: t, commit: true}
	sessions := map[string]*Session{}
	for _, name := range []string{"a", "b", "c"} {
		sessions[name] = join(t, testConfig(t, brokers), rec.handler(name))
	}
	waitFor(t, 10*time.Second, stable(sessions))

	a := sessions["a"]
	before := map[int32]epoch.Token{}
	for _, c := range a.Claims() {
		before[c.Partition()] = c.Token().Token
	}
	if len(before) == 0 {
		t.Fatal("a owns nothing")
	}
	zombie := a.Claims()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := a.Claims(); len(got) != 0 {
		t.Fatalf("claims after close: %v", got)
	}
	delete(sessions, "a")
	waitFor(t, 10*time.Second, stable(sessions))
	for _, s := range sessions {
		for _, c := range s.Claims() {
			if old, ok := before[c.Partition()]; ok && c.Token().Token <= old {
				t.Errorf("partition %d moved from a at token %v to %s at token %v", c.Partition(), old, s.MemberID(), c.Token().Token)
			}
		}
	}

	// a's commits of the hand-off were accepted, under a's tokens: the new
	// owners read them.
	for _, c := range sessions["b"].Claims() {
		old, ok := before[c.Partition()]
		if !ok {
			continue
		}
		off, err := c.Committed(ctx)
		if err != nil || off != int64(old) {
			t.Errorf("committed offset of %v: %d, %v; want a's final commit %d", c, off, err, old)
		}
		break
	}

	// A zombie of a: a commit with a's released claim is refused locally,
	// without a request; sent anyway, kfake rejects it because a is no
	// longer a member (UNKNOWN_MEMBER_ID). kfake does not check which
	// member owns a partition: that part is tenure's (see
	// TestTenureZombieCommit).
	if err := zombie.Commit(ctx, 999, "zombie"); !errors.Is(err, ErrRevoked) {
		t.Errorf("zombie commit: %v, want refused with ErrRevoked", err)
	}
	zs := &Session{cfg: a.cfg, cl: sessions["b"].cl, rejects: make(chan CommitRejected), loopDone: closedChan()}
	zs.memberID.Store(&a.cfg.MemberID)
	zs.memberEpoch.Store(a.memberEpoch.Load())
	err := zs.commit(ctx, zombie, 999, "zombie")
	var ce *CommitError
	if !errors.Is(err, epoch.ErrStale) || !errors.Is(err, kerr.UnknownMemberID) || !errors.As(err, &ce) || ce.Token != zombie.Token().Token {
		t.Errorf("zombie commit sent to kfake: %v, want a CommitError wrapping ErrStale and UNKNOWN_MEMBER_ID", err)
	}
	rec.check(t)
}

// lastClaim returns one of the claims s ever ran, whatever its state.
func lastClaim(s *Session) *Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.snapshot {
		return c
	}
	return nil
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// A member cut off from the network (no resets: packets vanish) stops
// work when its safe-ownership deadline passes: never later than 2.87 s
// after the send of its last acknowledged heartbeat, so strictly before
// the coordinator expires its session (3 s after receiving it) and hands
// its partitions to the others, who get higher tokens. No partition is
// ever worked on by two members at once. When the network heals, the
// member rejoins and claims partitions again with new tokens.
func TestKfakeNetworkCut(t *testing.T) {
	brokers := startKfake(t)
	rec := &recorder{t: t}
	cut := newNetCut()
	sessions := map[string]*Session{
		"a": join(t, testConfig(t, brokers, kgo.Dialer(cut.dial)), rec.handler("a")),
		"b": join(t, testConfig(t, brokers), rec.handler("b")),
		"c": join(t, testConfig(t, brokers), rec.handler("c")),
	}
	waitFor(t, 10*time.Second, stable(sessions))
	a := sessions["a"]
	before := map[int32]epoch.Token{}
	for _, c := range a.Claims() {
		before[c.Partition()] = c.Token().Token
	}

	cutAt := time.Now()
	cut.Cut()
	// The last acknowledged heartbeat was sent before the cut, so the
	// deadline is at most cutAt + 2.87s; allow 100ms for timers and
	// scheduling on a loaded machine.
	latest := cutAt.Add(testSuspectAfter + 100*time.Millisecond)
	waitFor(t, 2*testSession, func() string {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, rn := range rec.runs {
			if rn.member == "a" && rn.end.IsZero() {
				return "a still works on partition " + strconv.Itoa(int(rn.partition))
			}
		}
		return ""
	})
	rec.mu.Lock()
	for _, rn := range rec.runs {
		if rn.member != "a" || rn.end.Before(cutAt) {
			continue
		}
		if !errors.Is(rn.cause, ErrSuspect) {
			t.Errorf("a's run of partition %d ended with %v, want ErrSuspect", rn.partition, rn.cause)
		}
		if rn.end.After(latest) {
			t.Errorf("a's run of partition %d ended %v after the cut, later than the deadline %v", rn.partition, rn.end.Sub(cutAt), testSuspectAfter)
		}
	}
	rec.mu.Unlock()

	// The others take over once kfake expires a's session.
	others := map[string]*Session{"b": sessions["b"], "c": sessions["c"]}
	waitFor(t, 10*time.Second, stable(others))
	if took := time.Since(cutAt); took < testSession-testInterval {
		t.Errorf("partitions moved %v after the cut, before the session could expire", took)
	}
	for name, s := range others {
		for _, c := range s.Claims() {
			if old, ok := before[c.Partition()]; ok && c.Token().Token <= old {
				t.Errorf("partition %d moved from a at token %v to %s at token %v", c.Partition(), old, name, c.Token().Token)
			}
		}
	}
	for _, c := range a.Claims() {
		if c.State().Working() {
			t.Errorf("a still works on %v", c)
		}
	}

	// Healed, a is told it is unknown (or fenced), rejoins and gets
	// partitions again, with tokens above the ones it lost.
	cut.Heal()
	waitFor(t, 15*time.Second, stable(sessions))
	for _, c := range a.Claims() {
		if old, ok := before[c.Partition()]; ok && c.Token().Token <= old {
			t.Errorf("a got partition %d back at token %v, not above its lost %v", c.Partition(), c.Token().Token, old)
		}
	}
	rec.check(t)
}
