package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

const (
	testShards     = 12
	testGroups     = 200
	testPartitions = 4
)

// TestShards runs three `tenure serve --shards 12` nodes on one etcd with
// 200 groups of one or two raw KIP-848 members heartbeating on their
// interval, and checks, while they run:
//
//   - every group is served by exactly one node: every node's
//     FindCoordinator names the owner of the group's shard in etcd, the
//     members are answered there, and a heartbeat to any other node gets
//     NOT_COORDINATOR;
//   - the shards are balanced within one (etcd's owner keys and each
//     node's tenure_shards_led);
//   - after a kill -9 of one node, every group is served again about the
//     election TTL later, and only the dead node's groups moved: every
//     other group kept its node throughout;
//   - when the node comes back, the shards are balanced again, and only
//     shards that go to it move;
//
// and throughout that no member's epoch goes backwards or even moves (a
// shard's move rebalances nothing), and no member is expelled.
func TestShards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	t.Parallel()
	h := startHASetWith(t, haOpts{etcdMembers: 1, http: true,
		args: []string{"--shards", strconv.Itoa(testShards), "--log-level", "warn"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc := &shardCheck{h: h, cli: h.etcdClient(), shards: testShards}
	for g := range testGroups {
		sc.groups = append(sc.groups, fmt.Sprintf("shards-%05d", g))
	}

	topicID := createTopicOn(t, h.nodes[0].Addr, "shards", testPartitions)
	f := newFleet(t, fleetConfig{addrs: h.addrs(), topic: "shards", topicID: topicID, partitions: testPartitions,
		groups: testGroups, prefix: "shards", members: func(g int) int { return 1 + g%2 },
		perLane: 1000, inFlight: 64, timeout: 5 * time.Second})
	sc.f = f
	f.start()
	defer f.stop()
	testenv.Eventually(t, 30*time.Second, "every group to settle", func() bool {
		n, _ := f.unsettled()
		return n == 0
	})
	epochs := f.epochs()

	owners := sc.waitServed(ctx, "at the start")
	sc.checkNotCoordinator(ctx, owners)
	f.check(t)

	victim := 1
	// Each node's standby follows the shards it would take (ha's
	// StandbyShards), not every shard: the survivors must then take all
	// of the dead node's groups from their standbys, loading none.
	loaded := func(i int) float64 {
		v, _ := h.metric(ctx, i, `tenure_takeover_groups_total{from="store"}`)
		return v
	}
	// The standby's pass sets what it follows once a second, from the
	// view of the moment: a count unchanged over two passes is one set
	// after the placement settled, not one on its way there.
	var counts []float64
	var steadySince time.Time
	testenv.Eventually(t, 30*time.Second, "every node's standby to follow the shards it may take, for two passes", func() bool {
		now := make([]float64, len(h.nodes))
		for i := range h.nodes {
			v, err := h.metric(ctx, i, "tenure_standby_shards")
			if err != nil || v == 0 || v == testShards {
				counts = nil
				return false
			}
			now[i] = v
		}
		if !slices.Equal(now, counts) {
			counts, steadySince = now, time.Now()
			return false
		}
		return time.Since(steadySince) >= 2*time.Second
	})
	loadedBefore := map[int]float64{}
	for i := range h.nodes {
		loadedBefore[i] = loaded(i)
	}
	histories := sc.histories()
	killed := time.Now() // from the signal: Kill returns once the process is gone
	h.nodes[victim].Kill()
	afterKill := sc.waitServed(ctx, "after the kill")
	for i := range h.nodes {
		if i != victim && loaded(i) != loadedBefore[i] {
			t.Errorf("node %d loaded %v groups from the store after the kill: a shard it took was not followed by its standby",
				i, loaded(i)-loadedBefore[i])
		}
	}
	var lastBack time.Time
	for _, g := range f.groups {
		hist := g.history()
		was := histories[g.name]
		if owners[g.name] != victim {
			if !slices.Equal(hist, was) {
				t.Errorf("%s, on node %d, moved while its node lived: served by %v, before the kill by %v", g.name, owners[g.name], hist, was)
			}
			continue
		}
		if back := hist[len(hist)-1].at; back.After(lastBack) {
			lastBack = back
		}
	}
	t.Logf("node %d killed: all its groups served again %v later (election TTL %v)", victim, lastBack.Sub(killed).Round(time.Millisecond), electionTTL)
	sc.checkNotCoordinator(ctx, afterKill)
	f.check(t)

	histories = sc.histories()
	h.start(victim)
	afterRestart := sc.waitServed(ctx, "after the restart")
	moved := map[int]bool{}
	for _, g := range f.groups {
		now, was := afterRestart[g.name], afterKill[g.name]
		if now != was && now != victim {
			t.Errorf("%s moved from node %d to node %d when node %d came back", g.name, was, now, victim)
		}
		if now == was && !slices.Equal(g.history(), histories[g.name]) {
			t.Errorf("%s, on node %d, moved and back when node %d came back: served by %v", g.name, now, victim, g.history())
		}
		if now != was {
			moved[ha.ShardOf(g.name, testShards)] = true
		}
	}
	if led, err := h.shardsLed(ctx, victim); err != nil || led != len(moved) {
		t.Errorf("node %d came back leading %d shards (%v); the groups of %d moved to it", victim, led, err, len(moved))
	}
	t.Logf("node %d back: %d shards moved to it", victim, len(moved))
	sc.checkNotCoordinator(ctx, afterRestart)

	// A shard's moves rebalanced nothing.
	if n, first := f.unsettled(); n > 0 {
		t.Errorf("%d groups unsettled at the end, the first %s", n, first)
	}
	if got := f.epochs(); !maps.Equal(got, epochs) {
		t.Errorf("member epochs moved: %v, at the start %v", got, epochs)
	}
	f.check(t)
	t.Logf("heartbeat errors seen: %v", f.errorCodes())
}

// shardCheck looks at an HA set's shards from outside: the owner keys in
// etcd, each node's FindCoordinator and tenure_shards_led, and which node
// answers the fleet's heartbeats.
type shardCheck struct {
	h      *haSet
	cli    *clientv3.Client
	shards int
	groups []string
	f      *fleet
}

// waitServed waits until the live nodes agree on who coordinates every
// group (shardCheck.coordination), and the fleet's members of every group
// were last answered by that node. It returns the node index by group.
func (sc *shardCheck) waitServed(ctx context.Context, when string) map[string]int {
	var owners map[string]int
	var why string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		owners, err = sc.coordination(ctx)
		if err == nil {
			err = sc.servedByOwners(owners)
		}
		if err == nil {
			return owners
		}
		if why = err.Error(); time.Now().After(deadline) {
			sc.h.t.Fatalf("%s: every group served by exactly one node: %s", when, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// coordination checks that the live nodes agree on each group's
// coordinator, that it is the owner of the group's shard in etcd and a
// live node, and that the shards are balanced within one over the live
// nodes, which count in their tenure_shards_led the shards etcd says
// they own. It returns the coordinator's node index by group.
func (sc *shardCheck) coordination(ctx context.Context) (map[string]int, error) {
	h := sc.h
	ids, err := h.nodeIDs(ctx)
	if err != nil {
		return nil, err
	}
	keys, _, err := shardOwners(ctx, sc.cli)
	if err != nil {
		return nil, err
	}
	if len(keys) != sc.shards {
		return nil, fmt.Errorf("%d shards have an owner in etcd, of %d", len(keys), sc.shards)
	}
	led := map[int32]int{}
	for s, id := range keys {
		if !slices.Contains(ids, id) {
			return nil, fmt.Errorf("shard %d's owner in etcd is node ID %d, not a live node (%v)", s, id, ids)
		}
		led[id]++
	}
	lo, hi := sc.shards, 0
	for i, id := range ids {
		if id < 0 {
			continue
		}
		lo, hi = min(lo, led[id]), max(hi, led[id])
		n, err := h.shardsLed(ctx, i)
		if err != nil {
			return nil, err
		}
		if n != led[id] {
			return nil, fmt.Errorf("node %d (ID %d) leads %d shards, etcd says %d", i, id, n, led[id])
		}
	}
	if hi-lo > 1 {
		return nil, fmt.Errorf("shards per node from %d to %d: %v", lo, hi, led)
	}
	owners := map[string]int{}
	for i, p := range h.nodes {
		if ids[i] < 0 {
			continue
		}
		named, err := coordinatorsAt(ctx, p.Addr, sc.groups)
		if err != nil {
			return nil, err
		}
		for g, id := range named {
			if want := keys[ha.ShardOf(g, sc.shards)]; id != want {
				return nil, fmt.Errorf("node %d names node ID %d for %s, of shard %d, whose owner in etcd is %d",
					i, id, g, ha.ShardOf(g, sc.shards), want)
			}
			owners[g] = slices.Index(ids, id)
		}
	}
	return owners, nil
}

// servedByOwners checks that each group's members were last answered by
// its coordinator.
func (sc *shardCheck) servedByOwners(owners map[string]int) error {
	for _, g := range sc.f.groups {
		hist := g.history()
		if len(hist) == 0 || hist[len(hist)-1].node != owners[g.name] {
			return fmt.Errorf("%s: coordinator node %d, served by %v", g.name, owners[g.name], hist)
		}
	}
	return nil
}

// histories returns which nodes served each group so far.
func (sc *shardCheck) histories() map[string][]serving {
	out := map[string][]serving{}
	for _, g := range sc.f.groups {
		out[g.name] = g.history()
	}
	return out
}

// checkNotCoordinator sends one heartbeat of each group's first member to
// every live node but the group's coordinator: each must answer
// NOT_COORDINATOR, which sends a stock client to look the coordinator up
// again.
func (sc *shardCheck) checkNotCoordinator(ctx context.Context, owners map[string]int) {
	h := sc.h
	epochs := sc.f.epochs()
	var mu sync.Mutex
	var wrong []string
	var wg sync.WaitGroup
	for i, p := range h.nodes {
		if p == nil || p.Exited() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
			if err != nil {
				panic(err)
			}
			defer cl.Close()
			for _, g := range sc.f.groups {
				if owners[g.name] == i {
					continue
				}
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Version = 1
				req.Group, req.MemberID, req.MemberEpoch = g.name, g.members[0].id, epochs[g.members[0].id]
				resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
				if err == nil && resp.ErrorCode == kerr.NotCoordinator.Code {
					continue
				}
				mu.Lock()
				if err == nil {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
				wrong = append(wrong, fmt.Sprintf("%s (coordinator %d) at node %d: %v", g.name, owners[g.name], i, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(wrong) > 0 {
		h.t.Fatalf("%d heartbeats to a node that does not coordinate the group were not answered NOT_COORDINATOR: %v", len(wrong), wrong)
	}
}
