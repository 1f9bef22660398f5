package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/benchcpu"
)

const (
	commitMembers = 1000
	commitGroup   = "committers"
	commitTopic   = "work1000"
	// commitClients are the kgo clients (connections) the committers
	// share, as a fleet's processes would each have their own.
	commitClients = 32
)

// BenchmarkCommits1000 measures acknowledged offset commits per second
// with the embedded etcd store, fsync on: 1,000 KIP-848 members of one
// group, each owning one partition of a 1,000-partition topic, commit it
// in a loop, each waiting for its acknowledgement, for -tenure.window.
// The server runs in this process with its store, as `tenure serve` does.
//
//   - group-commit: the server's writer, which persists everything queued
//     since its last write in one etcd transaction, up to four
//     transactions in flight;
//   - group-commit-serial: the same with one transaction in flight, as
//     the writer was before its pipeline;
//   - txn-per-commit: the same server writing one transaction per Ready,
//     the baseline group commit is measured against;
//   - memory: the same server on the memory store, which the durable
//     default is measured against (goal: group-commit at 0.7x its rate
//     or more).
//
// Reported: commits/s, the p50 and p99 round trip of a commit, and the
// records and Readies per store write; and, once every mode ran, the
// ratio of group-commit's rate to memory's, in the log.
//
//	go test -run '^$' -bench 'BenchmarkCommits1000' -benchtime 1x -tenure.window 10s ./coordinator/server/
func BenchmarkCommits1000(b *testing.B) {
	rates, cpus := map[string]float64{}, map[string]float64{}
	for _, mode := range []struct {
		name      string
		maxWrites int
		serial    bool
		memory    bool
	}{{"group-commit", 0, false, false}, {"group-commit-serial", 0, true, false}, {"txn-per-commit", 1, true, false}, {"memory", 0, false, true}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				rates[mode.name], cpus[mode.name] = benchCommits(b, mode.maxWrites, mode.serial, mode.memory)
			}
		})
	}
	if m := rates["memory"]; m > 0 {
		b.Logf("against memory's %.0f commits/s: group-commit %.2f, group-commit-serial %.2f, txn-per-commit %.2f",
			m, rates["group-commit"]/m, rates["group-commit-serial"]/m, rates["txn-per-commit"]/m)
	}
	if m := cpus["memory"]; m > 0 && cpus["group-commit"] > 0 {
		b.Logf("CPU per commit: group-commit %.2fx memory's (%.1f against %.1f µs)", cpus["group-commit"]/m, cpus["group-commit"], m)
	}
}

// benchCommits runs one mode and returns its rate and the process's CPU
// per commit in microseconds.
func benchCommits(b *testing.B, maxWrites int, serial, memory bool) (float64, float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var st store.Store = store.NewMemory()
	if !memory {
		emb, err := embedetcd.Start(ctx, b.TempDir(), zap.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		defer emb.Close()
		est, err := etcdstore.New(ctx, emb.Client(), emb.StoreOpts()...)
		if err != nil {
			b.Fatal(err)
		}
		defer est.Close()
		st = est
	}
	ts := startServerLogger(b, zap.NewNop(), func(c *Config) {
		c.Store = st
		c.PerGroupMetrics = false
		c.Core.ConsumerSessionTimeout = benchSession
		c.Core.ConsumerHeartbeatInterval = 5 * time.Second
	})
	defer ts.stop()
	wr := ts.term(b).writer
	wr.mu.Lock()
	wr.maxWrites = maxWrites
	if serial {
		wr.maxBatches = 1
	}
	wr.mu.Unlock()
	clients := newBenchClients(b, ts.addr, commitClients)
	if created, err := kadm.NewClient(clients[0]).CreateTopics(ctx, commitMembers, 1, nil, commitTopic); err != nil || created[commitTopic].Err != nil {
		b.Fatalf("CreateTopics: %v %v", err, created[commitTopic].Err)
	}
	members, err := setupConsumer(ctx, clients, commitGroup, commitTopic, commitMembers)
	if err != nil {
		b.Fatalf("setting up %d members: %v", commitMembers, err)
	}
	before := ts.histogram(b, "tenure_store_batch_records")
	beforeW := ts.histogram(b, "tenure_store_batch_readies")

	var (
		mu       sync.Mutex
		lat      []time.Duration
		failures int
		first    error
	)
	stop := time.Now().Add(*benchWindow)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), benchcpu.Process()
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clients[i%len(clients)]
			var mine []time.Duration
			offset := int64(0)
			for time.Now().Before(stop) {
				offset++
				t0 := time.Now()
				err := commitOwned(ctx, cl, m, offset)
				mine = append(mine, time.Since(t0))
				if err != nil {
					mu.Lock()
					failures++
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), benchcpu.Process()-cpu0
	if failures > 0 {
		b.Fatalf("%d commits failed, the first with: %v", failures, first)
	}
	slices.Sort(lat)
	pct := func(p int) float64 { return float64(lat[len(lat)*p/100].Microseconds()) / 1000 }
	after := ts.histogram(b, "tenure_store_batch_records")
	afterW := ts.histogram(b, "tenure_store_batch_readies")
	batches := after.count - before.count
	rate := float64(len(lat)) / elapsed.Seconds()
	cpuPer := float64(cpu.Microseconds()) / float64(len(lat))
	b.ReportMetric(rate, "commits/s")
	// The process's CPU per commit (server, store and the committers'
	// clients alike) does not depend on how much of the machine the
	// run got, as the rate does on a shared machine.
	b.ReportMetric(cpuPer, "cpu-us/commit")
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(99), "p99-ms")
	b.ReportMetric((after.sum-before.sum)/batches, "records/txn")
	b.ReportMetric((afterW.sum-beforeW.sum)/batches, "readies/txn")
	b.Logf("%d commits in %v by %d members: %.0f/s, p50 %.2f ms, p99 %.2f ms, %.0f store writes of %.1f records",
		len(lat), elapsed.Round(time.Millisecond), commitMembers, float64(len(lat))/elapsed.Seconds(), pct(50), pct(99),
		batches, (after.sum-before.sum)/batches)
	return rate, cpuPer
}

// commitOwned commits offset for every partition m owns and fails unless
// every one is accepted.
func commitOwned(ctx context.Context, cl *kgo.Client, m benchMember, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = commitGroup
	req.MemberID = m.id
	req.Generation = m.gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = commitTopic
	for _, t := range m.owned {
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	if len(rt.Partitions) == 0 {
		return errors.New("member owns no partition")
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return nil
}
