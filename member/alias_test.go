package member

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// aliasListener is a kfake broker's listener whose advertised address
// (Addr, which kfake puts in its Metadata answers) can be set to another
// broker's, as a tenure node that stood in for a departed one names the
// departed node's broker ID at its own address.
type aliasListener struct {
	net.Listener
	alias atomic.Pointer[net.Addr]
}

func (l *aliasListener) Addr() net.Addr {
	if a := l.alias.Load(); a != nil {
		return *a
	}
	return l.Listener.Addr()
}

// TestStaleCoordinatorAddress: the member's kgo client reads Metadata that
// names the coordinator's broker ID at another broker's address (the
// chaos run's view "0>2"), and its heartbeats, sent to that ID, reach the
// other broker, which answers NOT_COORDINATOR; every lookup names the
// same ID again. Once the Metadata is right again, the member's
// heartbeats reach the coordinator within a few heartbeat intervals.
// Before a NOT_COORDINATOR answer reloaded Metadata, kgo kept the alias
// until its next periodic refresh (MetadataMaxAge, 5 min), and a worker
// heartbeated the wrong node for the rest of a 13 s chaos run.
func TestStaleCoordinatorAddress(t *testing.T) {
	var mu sync.Mutex
	var lns []*aliasListener
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		al := &aliasListener{Listener: ln}
		mu.Lock()
		lns = append(lns, al)
		mu.Unlock()
		return al, nil
	}
	// kfake serves ApiVersions v5, in which kgo names the broker ID it
	// means to reach and kfake refuses a connection that reached another
	// (KIP-1242), so kgo would start over from its seeds; tenure serves
	// ApiVersions up to v3, and a stand-in serves a departed node's ID.
	versions := kversion.Tip()
	versions.SetMaxKeyVersion(int16(kmsg.ApiVersions), 3)
	c := startKfakeBrokers(t, 3, testInterval, kfake.ListenFn(listen), kfake.MaxVersions(versions))
	addrs := c.ListenAddrs()
	byAddr := map[string]*aliasListener{}
	mu.Lock()
	for _, l := range lns {
		byAddr[l.Addr().String()] = l
	}
	mu.Unlock()
	coord := c.CoordinatorFor("g")
	other := (coord + 1) % int32(len(addrs))

	// heartbeats[n] counts the heartbeats broker n handled.
	var heartbeats [3]atomic.Int64
	c.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		heartbeats[c.CurrentNode()].Add(1)
		return nil, nil, false
	})

	claims := make(chan *Claim, testParts)
	s := join(t, testConfig(t, addrs), func(cl *Claim) {
		claims <- cl
		<-cl.Context().Done()
	})
	select {
	case <-claims:
	case <-time.After(10 * time.Second):
		t.Fatal("no claim within 10 s")
	}

	// The window: broker coord is named at other's address. The member
	// reads it as after a heartbeat's timeout in the chaos run.
	otherAddr := byAddr[addrs[other]].Listener.Addr()
	byAddr[addrs[coord]].alias.Store(&otherAddr)
	before := heartbeats[other].Load()
	s.cl.ForceMetadataRefresh()
	waitFor(t, 5*time.Second, func() string {
		if heartbeats[other].Load() < before+3 {
			return fmt.Sprintf("the member's heartbeats did not reach broker %d under the alias", other)
		}
		return ""
	})

	// The Metadata is right again.
	byAddr[addrs[coord]].alias.Store(nil)
	healed := time.Now()
	atCoord, atOther := heartbeats[coord].Load(), heartbeats[other].Load()
	const bound = 3 * time.Second
	for heartbeats[coord].Load() == atCoord {
		if time.Since(healed) > bound {
			t.Fatalf("%v after broker %d's address was right again, the member still heartbeats broker %d (%d heartbeats answered NOT_COORDINATOR there since) and none reached the coordinator",
				bound, coord, other, heartbeats[other].Load()-atOther)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the member's heartbeats reached coordinator %d %v after its address was right again", coord, time.Since(healed).Round(time.Millisecond))
}
