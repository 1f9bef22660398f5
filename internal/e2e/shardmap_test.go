package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// shardsPrefix is where the shard owners' keys are, under the store's
// default prefix: <prefix>meta/ha/shards/<shard>, the owner's node ID.
const shardsPrefix = "/tenure/meta/ha/shards/"

// etcdClient connects to the HA set's etcd.
func (h *haSet) etcdClient() *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(h.endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cli.Close() })
	return cli
}

// shardOwners reads the shard owners' keys: node ID by shard, and the
// revision of the read.
func shardOwners(ctx context.Context, cli *clientv3.Client) (map[int]int32, int64, error) {
	resp, err := cli.Get(ctx, shardsPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	out := map[int]int32{}
	for _, kv := range resp.Kvs {
		s, err1 := strconv.Atoi(strings.TrimPrefix(string(kv.Key), shardsPrefix))
		id, err2 := strconv.ParseInt(string(kv.Value), 10, 32)
		if err1 != nil || err2 != nil {
			return nil, 0, fmt.Errorf("shard owner key %q = %q: not <shard> = <node ID>", kv.Key, kv.Value)
		}
		out[s] = int32(id)
	}
	return out, resp.Header.Revision, nil
}

// nodeIDs returns the node ID of each node of the set, by index, from
// the Metadata brokers of every live node, which must agree; -1 for a
// node that is down. Aliases of departed nodes are not a node's ID.
func (h *haSet) nodeIDs(ctx context.Context) ([]int32, error) {
	ids := make([]int32, len(h.nodes))
	for i := range ids {
		ids[i] = -1
	}
	for _, p := range h.nodes {
		if p == nil || p.Exited() {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
		if err != nil {
			return nil, err
		}
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.SeedBrokers()[0])
		cl.Close()
		if err != nil {
			return nil, err
		}
		// Live nodes come first; a departed node's broker ID follows, aliased
		// at its successor's address (docs/DESIGN.md, "What survivors tell
		// stock clients"), so an address's first ID is its node's own.
		seen := map[string]bool{}
		for _, b := range resp.Brokers {
			addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			if seen[addr] {
				continue
			}
			seen[addr] = true
			for j, q := range h.nodes {
				if q == nil || q.Addr != addr {
					continue
				}
				if ids[j] >= 0 && ids[j] != b.NodeID {
					return nil, fmt.Errorf("node %d at %s has ID %d and %d", j, addr, ids[j], b.NodeID)
				}
				ids[j] = b.NodeID
			}
		}
	}
	for i, p := range h.nodes {
		if p != nil && !p.Exited() && ids[i] < 0 {
			return nil, fmt.Errorf("node %d at %s is in no Metadata", i, p.Addr)
		}
	}
	return ids, nil
}

// shardsLed reads tenure_shards_led from node i's /metrics.
func (h *haSet) shardsLed(ctx context.Context, i int) (int, error) {
	f, err := h.metric(ctx, i, "tenure_shards_led")
	return int(f), err
}

// metric reads the series named (with its labels, as /metrics writes
// them: `name{label="value"}`) from node i's /metrics.
func (h *haSet) metric(ctx context.Context, i int, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.http[i]+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("node %d: no %s in /metrics", i, series)
}

// coordinatorsAt asks node addr alone for the coordinator of every group
// in one FindCoordinator v4: the node ID by group, or an error naming the
// first group it has none for.
func coordinatorsAt(ctx context.Context, addr string, groups []string) (map[string]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = groups
	resp, err := fc.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, c := range resp.Coordinators {
		if c.ErrorCode != 0 {
			return nil, fmt.Errorf("%s at %s: %w", c.Key, addr, kerr.ErrorForCode(c.ErrorCode))
		}
		out[c.Key] = c.NodeID
	}
	if len(out) != len(groups) {
		return nil, fmt.Errorf("%s answered %d of %d keys", addr, len(out), len(groups))
	}
	return out, nil
}

// createTopicOn creates a topic through node addr and returns its ID.
func createTopicOn(tb testing.TB, addr, name string, partitions int32) [16]byte {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		tb.Fatal(err)
	}
	st := resp.Topics[0]
	if st.ErrorCode != 0 || st.TopicID == [16]byte{} {
		tb.Fatalf("create topic %s: %v, ID %x", name, kerr.ErrorForCode(st.ErrorCode), st.TopicID)
	}
	return st.TopicID
}
