package member

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// startTenure runs tenure's coordinator (the `tenure serve` server, with
// an in-memory store) on a loopback port with the test timing: a 3 s
// session and a 300 ms heartbeat interval for KIP-848 members. Its topics
// are created on first use with 64 partitions. It stops when the test
// ends.
func startTenure(t *testing.T) []string {
	return []string{testenv.StartTenure(t, testenv.TenureConfig(t, testSession, testInterval, testParts))}
}

// The same as TestKfakeShareAndLeave and TestKfakeNetworkCut, against
// tenure's own coordinator.
func TestTenureShareLeaveAndCut(t *testing.T) {
	brokers := startTenure(t)
	rec := &recorder{t: t, commit: true}
	cut := newNetCut()
	cfgA := testConfig(t, brokers)
	cfgA.ClientOpts = append(cfgA.ClientOpts, kgoDialer(cut))
	sessions := map[string]*Session{
		"a": join(t, cfgA, rec.handler("a")),
		"b": join(t, testConfig(t, brokers), rec.handler("b")),
		"c": join(t, testConfig(t, brokers), rec.handler("c")),
		"d": join(t, testConfig(t, brokers), rec.handler("d")),
	}
	waitFor(t, 10*time.Second, stable(sessions))

	// d leaves gracefully; its partitions move with higher tokens.
	d := sessions["d"]
	before := tokens(d)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	delete(sessions, "d")
	waitFor(t, 10*time.Second, stable(sessions))
	checkMoved(t, sessions, before)

	// a is cut off: it stops in time; the others take over.
	a := sessions["a"]
	before = tokens(a)
	cutAt := time.Now()
	cut.Cut()
	latest := cutAt.Add(testSuspectAfter + 100*time.Millisecond)
	others := map[string]*Session{"b": sessions["b"], "c": sessions["c"]}
	waitFor(t, 10*time.Second, stable(others))
	rec.mu.Lock()
	for _, rn := range rec.runs {
		if rn.member == "a" && !rn.end.IsZero() && rn.end.After(cutAt) {
			if !errors.Is(rn.cause, ErrSuspect) || rn.end.After(latest) {
				t.Errorf("a's run of partition %d ended %v after the cut with %v; want ErrSuspect within %v",
					rn.partition, rn.end.Sub(cutAt), rn.cause, testSuspectAfter)
			}
		}
	}
	rec.mu.Unlock()
	checkMoved(t, others, before)

	// A zombie commit: a's old claim, sent to tenure anyway, on behalf of
	// b (a live member that does not own the partition). kfake would
	// accept it; tenure checks the owner and the token.
	zombie := lastClaim(a)
	if zombie == nil {
		t.Fatal("no claim of a to replay")
	}
	if err := zombie.Commit(ctx, 999, "zombie"); err == nil {
		t.Errorf("zombie commit accepted locally")
	}
	b := sessions["b"]
	owner := ""
	for name, s := range others {
		for _, c := range s.Claims() {
			if c.Partition() == zombie.Partition() {
				owner = name
			}
		}
	}
	if owner == "b" {
		b = sessions["c"]
	}
	err := b.commit(ctx, zombie, 999, "zombie")
	if !errors.Is(err, epoch.ErrStale) || !errors.Is(err, kerr.StaleMemberEpoch) {
		t.Errorf("commit of a partition b does not own: %v, want a CommitError wrapping ErrStale and STALE_MEMBER_EPOCH", err)
	}

	cut.Heal()
	waitFor(t, 15*time.Second, stable(sessions))
	rec.check(t)
}

func tokens(s *Session) map[int32]epoch.Token {
	out := map[int32]epoch.Token{}
	for _, c := range s.Claims() {
		out[c.Partition()] = c.Token().Token
	}
	return out
}

func checkMoved(t *testing.T, sessions map[string]*Session, before map[int32]epoch.Token) {
	t.Helper()
	for name, s := range sessions {
		for _, c := range s.Claims() {
			if old, ok := before[c.Partition()]; ok && c.Token().Token <= old {
				t.Errorf("partition %d moved at token %v to %s at token %v", c.Partition(), old, name, c.Token().Token)
			}
		}
	}
}
