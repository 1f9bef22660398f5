package kgobalancer_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/assignor/kgobalancer"
)

// ownership tracks which client owns which partition of topic "t", as
// reported by kgo's assignment callbacks, and records any moment at which
// two clients owned the same partition.
type ownership struct {
	mu      sync.Mutex
	owner   map[int32]string
	doubled []string
}

func (o *ownership) assigned(client string, tps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range tps["t"] {
		if prev, ok := o.owner[p]; ok && prev != client {
			o.doubled = append(o.doubled, fmt.Sprintf("partition %d given to %s while %s owns it", p, client, prev))
		}
		o.owner[p] = client
	}
}

func (o *ownership) revoked(client string, tps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range tps["t"] {
		if o.owner[p] == client {
			delete(o.owner, p)
		}
	}
}

// counts returns how many partitions each client owns and how many are
// owned in all.
func (o *ownership) counts() (map[string]int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := map[string]int{}
	for _, client := range o.owner {
		c[client]++
	}
	return c, len(o.owner)
}

// TestBalancersWithKafkaClients runs stock kgo consumers with the adapters in
// a classic consumer group on an in-process fake Kafka cluster: four
// consumers share a 64-partition topic, then one leaves. Every partition must
// end up owned exactly once, and (cooperative protocol) no partition may be
// handed to a consumer before its previous owner revoked it.
func TestBalancersWithKafkaClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fake Kafka cluster")
	}
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		// want reports whether the per-client counts are final.
		want func(counts map[string]int, clients int) bool
	}{
		{"uniform", kgobalancer.Uniform(), func(counts map[string]int, clients int) bool {
			for _, n := range counts {
				if n != 64/clients && n != 64/clients+1 {
					return false
				}
			}
			return true
		}},
		{"rendezvous", kgobalancer.Rendezvous(assignor.DefaultEpsilon), func(counts map[string]int, clients int) bool {
			even := (64 + clients - 1) / clients
			capacity := (even*5 + 3) / 4 // ⌈even × 1.25⌉
			for _, n := range counts {
				if n > capacity {
					return false
				}
			}
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runGroup(t, tc.balancer, tc.want)
		})
	}
}

func runGroup(t *testing.T, balancer kgo.GroupBalancer, want func(map[string]int, int) bool) {
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(64, "t"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()

	own := &ownership{owner: map[int32]string{}}
	clients := map[string]*kgo.Client{}
	for i := range 4 {
		name := fmt.Sprintf("c%d", i)
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(cluster.ListenAddrs()...),
			kgo.ConsumerGroup("g"),
			kgo.ConsumeTopics("t"),
			kgo.Balancers(balancer),
			kgo.SessionTimeout(3*time.Second),
			kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.RebalanceTimeout(5*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
				own.assigned(name, tps)
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
				own.revoked(name, tps)
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
				own.revoked(name, tps)
			}),
		)
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = cl
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()

	settle := func(stage string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			counts, owned := own.counts()
			if owned == 64 && len(counts) == len(clients) && want(counts, len(clients)) {
				t.Logf("%s: %v", stage, counts)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: partitions not owned exactly once by %d clients: %d owned, per client %v",
					stage, len(clients), owned, counts)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	settle("four consumers")

	clients["c1"].Close()
	delete(clients, "c1")
	settle("after c1 left")

	own.mu.Lock()
	defer own.mu.Unlock()
	if len(own.doubled) > 0 {
		t.Fatalf("partitions owned twice:\n%v", own.doubled)
	}
	if slices.Contains(slices.Collect(maps.Values(own.owner)), "c1") {
		t.Fatalf("c1 still owns partitions after closing")
	}
}
