package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// BenchmarkRestart1000Groups measures a restart of `tenure serve` on the
// embedded etcd holding 1,000 KIP-848 groups of 16 members and 64
// partitions with committed offsets (97,000 keys): from starting the
// process to the first heartbeat answered (the member keeps its epoch), as
// after a kill -9. Each iteration kills the server with SIGKILL and starts
// it again on the same data.
func BenchmarkRestart1000Groups(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	group, members := testgroups.Stable(b, "template")
	emb, err := embedetcd.Start(ctx, dir, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	st, err := etcdstore.New(ctx, emb.Client(), emb.StoreOpts()...)
	if err != nil {
		b.Fatal(err)
	}
	topic := testgroups.Topic
	recs := []coordinator.Record{&topic}
	for i := range 1000 {
		recs = append(recs, testgroups.Renamed(group, fmt.Sprintf("group-%04d", i))...)
		if len(recs) > 20000 || i == 999 {
			if err := st.Persist(ctx, recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	st.Close()
	emb.Close()

	bin := build(b, "github.com/tenure-dev/tenure/cmd/tenure")[0]
	m := members[0]
	beat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	beat.Version = 1
	beat.Group = "group-0999"
	beat.MemberID = m.ID
	beat.MemberEpoch = m.Epoch
	beat.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topic.ID, Partitions: m.Partitions}}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		p := proctest.Start(b, "tenure", bin, "serve", "--listen", "{addr}", "--data-dir", dir, "--log-level", "warn")
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
		if err != nil {
			b.Fatal(err)
		}
		resp, err := beat.RequestWith(ctx, cl)
		elapsed := time.Since(start)
		cl.Close()
		if err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != m.Epoch {
			b.Fatalf("first heartbeat after the restart: %v %+v", err, resp)
		}
		total += elapsed
		p.Kill()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/restart")
}
