package ha_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestFollowerNamesLeader: a node that does not lead says which node does,
// once, and again when another takes over.
func TestFollowerNamesLeader(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	first := join(t, etcd.Client(t), prefix, addr(0))
	testenv.Eventually(t, 5*time.Second, "the first node to lead", func() bool {
		l, ok := first.Leader()
		return ok && l.ID == first.Self().ID
	})
	core, logs := observer.New(zapcore.InfoLevel)
	follower := join(t, etcd.Client(t), prefix, addr(1), ha.Logger(zap.New(core)))
	following := func() []observer.LoggedEntry { return logs.FilterMessage("following").All() }
	testenv.Eventually(t, 5*time.Second, "the follower to name the leader", func() bool { return len(following()) > 0 })
	if got := fmt.Sprint(following()[0].ContextMap()["leader"]); got != fmt.Sprint(first.Self().ID) {
		t.Errorf("the follower names leader %v, want %d", got, first.Self().ID)
	}
	if got := following()[0].ContextMap()["leader_addr"]; got != addr(0) {
		t.Errorf("the follower names the leader at %v, want %s", got, addr(0))
	}
	third := join(t, etcd.Client(t), prefix, addr(2))
	_ = third
	time.Sleep(200 * time.Millisecond) // a change of the nodes that leaves the leader be
	if n := len(following()); n != 1 {
		t.Errorf("the follower named the same leader %d times", n)
	}
	first.Close()
	testenv.Eventually(t, 10*time.Second, "a new leader", func() bool {
		l, ok := follower.Leader()
		return ok && l.ID != first.Self().ID
	})
	if l, _ := follower.Leader(); l.ID != follower.Self().ID {
		testenv.Eventually(t, 5*time.Second, "the follower to name the new leader", func() bool { return len(following()) == 2 })
	}
}
