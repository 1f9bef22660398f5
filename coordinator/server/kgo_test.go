package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// kgoLogger sends kgo's logs to the test's zap logger.
type kgoLogger struct{ log *zap.SugaredLogger }

func (l kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }
func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l.log.Infow("kgo: "+msg, keyvals...)
}

// newKgo returns a stock kgo client of ts, closed when the test ends.
func newKgo(t testing.TB, ts *testServer, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(ts.addr),
		kgo.WithLogger(kgoLogger{ts.log.Named("kgo").Sugar()}),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// commitOne commits offset for topic[partition] in cl's group, and
// returns the error of the request or of the partition.
func commitOne(ctx context.Context, cl *kgo.Client, topic string, partition int32, offset int64) error {
	var commitErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {partition: {Epoch: -1, Offset: offset}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err != nil {
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						commitErr = fmt.Errorf("%s[%d]: %w", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					}
				}
			}
		})
	return commitErr
}

// TestKgoSmoke drives the server with a stock kgo client and kadm: API
// versions, CreateTopics, Metadata, FindCoordinator, ListOffsets, and a
// direct (groupless) consumer whose fetches are held rather than spun.
func TestKgoSmoke(t *testing.T) {
	ts := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, ts))

	created, err := adm.CreateTopics(ctx, 8, 1, nil, "smoke")
	if err != nil || created["smoke"].Err != nil || created["smoke"].ID == (kadm.TopicID{}) {
		t.Fatalf("CreateTopics: %v %+v", err, created)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil || len(topics["smoke"].Partitions) != 8 || topics["smoke"].ID != created["smoke"].ID {
		t.Fatalf("ListTopics: %v %+v", err, topics)
	}
	coords := adm.FindGroupCoordinators(ctx, "g1", "g2")
	for _, g := range []string{"g1", "g2"} {
		if c := coords[g]; c.Err != nil || c.NodeID != 0 {
			t.Fatalf("coordinator of %s: %+v", g, c)
		}
	}
	for name, list := range map[string]func(context.Context, ...string) (kadm.ListedOffsets, error){
		"start": adm.ListStartOffsets, "end": adm.ListEndOffsets,
	} {
		offsets, err := list(ctx, "smoke")
		if err != nil {
			t.Fatalf("list %s offsets: %v", name, err)
		}
		n := 0
		offsets.Each(func(o kadm.ListedOffset) {
			n++
			if o.Err != nil || o.Offset != 0 {
				t.Errorf("%s offset of partition %d: %d %v", name, o.Partition, o.Offset, o.Err)
			}
		})
		if n != 8 {
			t.Fatalf("%d %s offsets, want 8", n, name)
		}
	}

	// A direct consumer: ListOffsets, then held empty fetches.
	cons := newKgo(t, ts, kgo.ConsumeTopics("smoke"), kgo.FetchMaxWait(200*time.Millisecond))
	pollCtx, pollCancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	fetches := cons.PollFetches(pollCtx)
	pollCancel()
	fetches.EachError(func(topic string, p int32, err error) {
		if err != context.DeadlineExceeded {
			t.Errorf("fetch error on %s[%d]: %v", topic, p, err)
		}
	})
	if n := fetches.NumRecords(); n != 0 {
		t.Fatalf("%d records from a virtual topic", n)
	}
	// 1.5 s of 200 ms holds is at most ~8 fetches; an unheld server would
	// have seen thousands.
	n := ts.metric(t, "tenure_requests_total", "api", "Fetch", "error", "NONE")
	if n < 1 || n > 30 {
		t.Fatalf("%v fetches in 1.5s", n)
	}
}

// coreServes reports whether the group core answers a request of this
// kind, rather than a placeholder's UNSUPPORTED_VERSION.
func coreServes(t *testing.T, ts *testServer, req kmsg.Request) bool {
	t.Helper()
	resp := dial(t, ts.addr).roundTrip(req)
	return responseCode(resp) != kerr.UnsupportedVersion.Code
}

func probeJoin() kmsg.Request {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group = "probe"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	req.Protocols = append(req.Protocols, p)
	return req
}

func probeConsumerHeartbeat() kmsg.Request {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "probe848"
	req.MemberID = "probe-member"
	req.MemberEpoch = -1 // leave: nothing to leave, but answered by the core
	return req
}

func testKgoGroup(t *testing.T, serverSide bool) {
	ts := startServer(t, func(c *Config) { c.Core.InitialRebalanceDelay = 0 })
	if serverSide && !coreServes(t, ts, probeConsumerHeartbeat()) || !serverSide && !coreServes(t, ts, probeJoin()) {
		t.Skip("the group core does not serve this protocol yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, ts))
	if _, err := adm.CreateTopics(ctx, 8, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	assigned := make(map[int32]bool)
	opts := []kgo.Opt{
		kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("jobs"),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m["jobs"] {
				assigned[p] = true
			}
		}),
	}
	if serverSide {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl := newKgo(t, ts, opts...)
	pollDone := make(chan struct{})
	pollCtx, stopPolling := context.WithCancel(ctx)
	go func() {
		defer close(pollDone)
		for pollCtx.Err() == nil {
			cl.PollFetches(pollCtx)
		}
	}()
	defer func() { stopPolling(); <-pollDone }()

	eventually(t, 20*time.Second, "all 8 partitions assigned", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(assigned) == 8
	})

	if err := commitOne(ctx, cl, "jobs", 3, 42); err != nil {
		t.Fatalf("commit: %v", err)
	}
	offsets, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offsets.Lookup("jobs", 3); !ok || o.At != 42 {
		t.Fatalf("committed offset of jobs[3]: %+v %v", o, ok)
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil || listed["g"].State != "Stable" {
		t.Fatalf("ListGroups: %v %+v", err, listed)
	}
	if serverSide {
		described, err := adm.DescribeConsumerGroups(ctx, "g")
		if err != nil || len(described["g"].Members) != 1 {
			t.Fatalf("DescribeConsumerGroups: %v %+v", err, described)
		}
		// The classic API cannot describe a KIP-848 group: Dead, as in
		// Kafka before DescribeGroups v6.
		classic, err := adm.DescribeGroups(ctx, "g")
		if err != nil || classic["g"].State != "Dead" || classic["g"].Err != nil {
			t.Fatalf("DescribeGroups of a consumer group: %v %+v", err, classic["g"])
		}
	} else {
		described, err := adm.DescribeGroups(ctx, "g")
		if err != nil || described["g"].State != "Stable" || len(described["g"].Members) != 1 {
			t.Fatalf("DescribeGroups: %v %+v", err, described)
		}
	}
	if n := ts.metric(t, "tenure_rebalances_total"); n < 1 {
		t.Fatalf("%v rebalances counted", n)
	}
	if gen := ts.metric(t, "tenure_group_generation", "group", "g"); gen < 1 {
		t.Fatalf("generation gauge %v", gen)
	}

	// Leaving empties the group, which can then be deleted.
	stopPolling()
	<-pollDone
	cl.Close()
	eventually(t, 10*time.Second, "the group to empty", func() bool {
		l, err := adm.ListGroups(ctx)
		return err == nil && l["g"].State == "Empty"
	})
	deleted, err := adm.DeleteGroups(ctx, "g")
	if err != nil || deleted["g"].Err != nil {
		t.Fatalf("DeleteGroups: %v %+v", err, deleted)
	}
	listed, _ = adm.ListGroups(ctx)
	if slices.Contains(slices.Collect(maps.Keys(listed)), "g") {
		t.Fatalf("deleted group still listed")
	}
}

func TestKgoConsumerGroupClassic(t *testing.T) { testKgoGroup(t, false) }
func TestKgoConsumerGroup848(t *testing.T)     { testKgoGroup(t, true) }
