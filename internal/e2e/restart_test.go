// Package e2e tests tenure the way users run it: real processes, stock
// clients, kill -9 and restarts.
package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

const (
	group      = "restart"
	topic      = "jobs"
	partitions = 64
	committers = 8
)

// TestRestartKeepsEverything kills tenure with SIGKILL while 8 KIP-848
// members commit offsets as fast as they are answered, then starts it
// again on the same data: every commit that was acknowledged before the
// kill is there, the group is at the epoch it had, every member that goes
// on heartbeating with its epoch is answered as before (a restart expels
// nobody and rebalances nothing), and the next rebalance gets a higher
// epoch. It runs against the embedded etcd (`tenure serve` with no store
// flags) and against a separate etcd server process.
func TestRestartKeepsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	t.Parallel()
	bins := build(t, "github.com/tenure-dev/tenure/cmd/tenure", "go.etcd.io/etcd/server/v3")
	tenure, etcd := bins[0], bins[1]
	t.Run("embedded", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		testRestart(t, tenure, "--data-dir", data)
	})
	t.Run("etcd-process", func(t *testing.T) {
		peer, err := proctest.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		e := proctest.Start(t, "etcd", etcd,
			"--name", "e1", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
			"--listen-client-urls", "http://{addr}", "--advertise-client-urls", "http://{addr}",
			"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
			"--initial-cluster", "e1=http://"+peer, "--log-level", "warn")
		testRestart(t, tenure, "--etcd-endpoints", "http://"+e.Addr)
	})
}

func testRestart(t *testing.T, bin string, storeArgs ...string) {
	args := append([]string{"serve", "--listen", "{addr}", "--log-level", "warn"}, storeArgs...)
	srv := proctest.Start(t, "tenure", bin, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	topicID := createTopic(t, client(t, srv.Addr))
	cl := newRouter(t, srv.Addr)
	ms := make([]*member, committers)
	for i := range ms {
		ms[i] = &member{id: fmt.Sprintf("committer-%d-0000000000000000", i), topicID: topicID, acked: map[int32]int64{}, tried: map[int32]int64{}}
		// On a shared etcd the node coordinates once it has won its
		// first term.
		testenv.Eventually(t, 20*time.Second, "the node to coordinate", func() bool {
			_, err := ms[i].beat(ctx, cl)
			return err == nil
		})
	}
	// Reconcile until every partition is owned.
	testenv.Eventually(t, 10*time.Second, "every partition to be owned", func() bool {
		n := 0
		for _, m := range ms {
			m.heartbeat(ctx, t, cl)
			n += len(m.owned)
		}
		return n == partitions
	})
	epoch := ms[0].epoch

	// Commit until the kill.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.commit(ctx, cl)
			}
		}()
	}
	time.Sleep(time.Second)
	killed := time.Now() // from the signal: Kill returns once the process is gone
	srv.Kill()
	close(stop)
	wg.Wait()
	acked := 0
	for _, m := range ms {
		acked += m.commits
	}
	if acked < 100 {
		t.Fatalf("only %d commits were acknowledged before the kill; the test needs a stream of them", acked)
	}

	srv2 := proctest.Start(t, "tenure-restarted", bin, args...)
	cl2 := newRouter(t, srv2.Addr)
	var first time.Duration
	testenv.Eventually(t, 20*time.Second, "a heartbeat to be answered after the restart", func() bool {
		if _, err := ms[0].beat(ctx, cl2); err == nil {
			first = time.Since(killed)
			return true
		}
		return false
	})
	t.Logf("%d commits acknowledged before the kill; first heartbeat answered %v after it", acked, first.Round(time.Millisecond))

	// Every acknowledged commit survived.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = group
	fetch.Groups = append(fetch.Groups, fg)
	stored := fetchOffsets(ctx, t, cl2)
	for _, m := range ms {
		for p, off := range m.acked {
			if got := stored[p]; got < off || got > m.tried[p] {
				t.Errorf("partition %d: stored offset %d, acknowledged %d, last tried %d", p, got, off, m.tried[p])
			}
		}
	}

	// Nobody was fenced, nothing rebalanced.
	for _, m := range ms {
		before := m.epoch
		if r, err := m.beat(ctx, cl2); err != nil || r.MemberEpoch != before {
			t.Errorf("%s after the restart: %v, epoch %d, want epoch %d", m.id, err, m.epoch, before)
		}
	}
	// The next rebalance continues above.
	newcomer := &member{id: "newcomer-00000000000000000", topicID: topicID, acked: map[int32]int64{}, tried: map[int32]int64{}}
	newcomer.heartbeat(ctx, t, cl2)
	if newcomer.epoch <= epoch {
		t.Fatalf("a member joining after the restart got epoch %d; the group was at %d", newcomer.epoch, epoch)
	}
}

func client(t *testing.T, addrs ...string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RetryTimeout(500*time.Millisecond), kgo.RequestRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// coordinatorOf asks cl (any of its brokers) for the group's coordinator.
func coordinatorOf(ctx context.Context, cl kmsg.Requestor) (string, error) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	fc.CoordinatorKeys = []string{group} // v4 batches keys
	resp, err := fc.RequestWith(ctx, cl)
	if err != nil {
		return "", err
	}
	code, host, port := resp.ErrorCode, resp.Host, resp.Port
	if len(resp.Coordinators) > 0 {
		c := resp.Coordinators[0]
		code, host, port = c.ErrorCode, c.Host, c.Port
	}
	if code != 0 {
		return "", kerr.ErrorForCode(code)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// router sends the raw members' group requests to the group's
// coordinator, finding it with FindCoordinator (through any node) before
// every request: kgo caches the coordinator of a ConsumerGroupHeartbeat
// (its consumer's own loop finds a new one), which would keep these
// members dialing a coordinator that was killed.
type router struct {
	t     *testing.T
	seeds *kgo.Client
	mu    sync.Mutex
	nodes map[string]*kgo.Client
}

func newRouter(t *testing.T, addrs ...string) *router {
	return &router{t: t, seeds: client(t, addrs...), nodes: map[string]*kgo.Client{}}
}

// Request implements kmsg.Requestor. Each request gets two seconds: a
// coordinator may be paused (SIGSTOP) with the request in its socket.
func (r *router) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addr, err := coordinatorOf(ctx, r.seeds)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	cl := r.nodes[addr]
	if cl == nil {
		cl = client(r.t, addr)
		r.nodes[addr] = cl
	}
	r.mu.Unlock()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// createTopic creates the topic (Metadata auto-creation) and returns its ID.
func createTopic(t *testing.T, cl *kgo.Client) [16]byte {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(testenv.Context(t), req)
	if err != nil {
		t.Fatal(err)
	}
	mt := resp.(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != 0 || len(mt.Partitions) != partitions {
		t.Fatalf("topic %s: error %d, %d partitions", topic, mt.ErrorCode, len(mt.Partitions))
	}
	return mt.TopicID
}

// member is a raw KIP-848 member that commits its partitions in a loop.
type member struct {
	id      string
	topicID [16]byte
	epoch   int32
	owned   []int32
	next    int64
	commits int
	// acked and tried are, per partition, the highest offset
	// acknowledged and the highest sent.
	acked, tried map[int32]int64
}

// beat sends one heartbeat reporting what m owns, and takes the answer.
func (m *member) beat(ctx context.Context, cl kmsg.Requestor) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = group
	req.MemberID = m.id
	req.MemberEpoch = m.epoch
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if len(m.owned) > 0 {
		req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: m.topicID, Partitions: slices.Clone(m.owned)})
	}
	resp, err := cl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		return r, kerr.ErrorForCode(r.ErrorCode)
	}
	m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		m.owned = nil
		for _, at := range r.Assignment.Topics {
			m.owned = append(m.owned, at.Partitions...)
		}
		slices.Sort(m.owned)
	}
	return r, nil
}

// peek sends m's heartbeat without taking the answer.
func (m *member) peek(ctx context.Context, cl kmsg.Requestor) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	c := *m
	return c.beat(ctx, cl)
}

func (m *member) heartbeat(ctx context.Context, t *testing.T, cl kmsg.Requestor) {
	t.Helper()
	if _, err := m.beat(ctx, cl); err != nil {
		t.Fatalf("%s heartbeat: %v", m.id, err)
	}
}

// commit commits the next offset of every partition m owns.
func (m *member) commit(ctx context.Context, cl kmsg.Requestor) {
	m.next++
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = group
	req.MemberID = m.id
	req.Generation = m.epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range m.owned {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, m.next
		rt.Partitions = append(rt.Partitions, rp)
		m.tried[p] = m.next
	}
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(ctx, req)
	if err != nil {
		time.Sleep(10 * time.Millisecond)
		return
	}
	for _, rt := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode == 0 {
				m.acked[p.Partition] = m.next
				m.commits++
			}
		}
	}
}
