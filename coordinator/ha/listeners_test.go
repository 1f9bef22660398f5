package ha_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestListeners: a node registers the advertised address of each of its
// listeners, which the other nodes see (for Metadata and FindCoordinator
// to answer each client on its own listener); a node without listeners
// registers none; an address that is not host:port is refused.
func TestListeners(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	lns := map[string]string{"INTERNAL": "10.0.0.1:9092", "EXTERNAL": "tenure-0.example:9094"}
	a := join(t, etcd.Client(t), prefix, lns["INTERNAL"], ha.Listeners(lns))
	lns["EXTERNAL"] = "changed:1" // Listeners keeps its own copy
	b := join(t, etcd.Client(t), prefix, addr(1))
	want := map[string]string{"INTERNAL": "10.0.0.1:9092", "EXTERNAL": "tenure-0.example:9094"}
	if got := a.Self().Listeners; !maps.Equal(got, want) {
		t.Fatalf("Self().Listeners = %v, want %v", got, want)
	}
	testenv.Eventually(t, 5*time.Second, "node b to see a's listeners", func() bool {
		for _, n := range b.Nodes() {
			if n.ID == a.Self().ID {
				return maps.Equal(n.Listeners, want) && n.Addr == "10.0.0.1:9092"
			}
		}
		return false
	})
	for _, n := range a.Nodes() {
		if n.ID == b.Self().ID && n.Listeners != nil {
			t.Errorf("a node without listeners registered %v", n.Listeners)
		}
	}
	_, err := ha.Join(testenv.Context(t), etcd.Client(t), addr(2), ha.Prefix(prefix), ha.Listeners(map[string]string{"X": "no-port"}))
	if !errors.Is(err, ha.ErrInvalidOption) {
		t.Errorf("Join with a listener address without a port: %v, want ErrInvalidOption", err)
	}
}
