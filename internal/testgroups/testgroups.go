// Package testgroups makes realistic group state for tests and benchmarks:
// the records of real groups, produced by driving the real group core, so
// that stores and restarts are measured on what a server really writes.
// It is for tests only.
package testgroups

import (
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// Topic is the topic every group made here subscribes to: 64 partitions.
var Topic = coordinator.TopicRecord{Name: "orders", ID: coordinator.TopicID{0: 0x5e, 15: 7}, Partitions: 64}

// Member is a member of a group made here, as its client knows itself.
type Member struct {
	ID         string
	Epoch      int32
	Partitions []int32
}

// Stable returns the snapshot (coordinator.Group.Snapshot) of a real
// KIP-848 group named name: 16 members with IDs as clients make them (22
// characters of base64url), subscribed to Topic, reconciled to a stable
// assignment of 4 partitions each, and an offset committed for every
// partition; and its members.
func Stable(tb testing.TB, name string) ([]coordinator.Record, []Member) {
	tb.Helper()
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add(Topic.Name, Topic.ID, Topic.Partitions)
	cfg.Topics = topics
	rng := rand.New(rand.NewPCG(1, 2))
	g := coordinator.NewGroup(name, &cfg, rng)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	members := make([]Member, 16)
	for i := range members {
		var id [16]byte
		for j := range id {
			id[j] = byte(rng.Uint32())
		}
		members[i].ID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	step := func(req kmsg.Request, resp kmsg.Response) {
		g.Step(now, coordinator.Request{Msg: req, Resp: resp, ClientID: "orders-worker", ClientHost: "/10.1.2.3"})
		for g.HasReady() {
			g.Advance(g.Ready())
		}
	}
	for range 10 {
		for i := range members {
			m := &members[i]
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version = 1
			req.Group = name
			req.MemberID = m.ID
			req.MemberEpoch = m.Epoch
			if m.Epoch == 0 {
				req.RebalanceTimeoutMillis = 60000
				req.SubscribedTopicNames = []string{Topic.Name}
			}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			if len(m.Partitions) > 0 {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: Topic.ID, Partitions: m.Partitions})
			}
			resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			step(req, resp)
			if resp.ErrorCode != 0 {
				tb.Fatalf("heartbeat of %s: error %d", m.ID, resp.ErrorCode)
			}
			m.Epoch = resp.MemberEpoch
			if resp.Assignment != nil {
				m.Partitions = nil
				for _, at := range resp.Assignment.Topics {
					m.Partitions = append(m.Partitions, at.Partitions...)
				}
			}
			now = now.Add(10 * time.Millisecond)
		}
	}
	for _, m := range members {
		if len(m.Partitions) != 4 {
			tb.Fatalf("member holds %d partitions after reconciling, want 4", len(m.Partitions))
		}
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group = name
		req.Generation = m.Epoch
		req.MemberID = m.ID
		rt := kmsg.OffsetCommitRequestTopic{Topic: Topic.Name}
		for _, p := range m.Partitions {
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Partition = p
			op.Offset = 1_234_567 + int64(p)
			op.LeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, op)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		step(req, kmsg.NewPtrOffsetCommitResponse())
	}
	return g.Snapshot(), members
}

// Renamed returns copies of a group's records under another group name.
func Renamed(recs []coordinator.Record, name string) []coordinator.Record {
	out := make([]coordinator.Record, len(recs))
	for i, r := range recs {
		switch r := r.(type) {
		case *coordinator.GroupRecord:
			c := *r
			c.Group = name
			out[i] = &c
		case *coordinator.MemberRecord:
			c := *r
			c.Group = name
			out[i] = &c
		case *coordinator.AssignmentRecord:
			c := *r
			c.Group = name
			out[i] = &c
		case *coordinator.OffsetRecord:
			c := *r
			c.Group = name
			out[i] = &c
		default:
			out[i] = r
		}
	}
	return out
}

// Decoded returns Renamed(recs, name) with each record holding its own
// copy of its topic names, as records decoded from the store do (one
// copy per record, shared by its lists): a group rebuilt from them starts
// with as many copies as the store's records have.
func Decoded(recs []coordinator.Record, name string) []coordinator.Record {
	out := Renamed(recs, name)
	for _, r := range out {
		switch r := r.(type) {
		case *coordinator.MemberRecord:
			r.Topics = slices.Clone(r.Topics)
			for i := range r.Topics {
				r.Topics[i] = strings.Clone(r.Topics[i])
			}
		case *coordinator.AssignmentRecord:
			var last, copied string
			topic := func(t string) string {
				if t != last {
					last, copied = t, strings.Clone(t)
				}
				return copied
			}
			r.Owned = slices.Clone(r.Owned)
			for i := range r.Owned {
				r.Owned[i].Topic = topic(r.Owned[i].Topic)
			}
			r.Provisional = slices.Clone(r.Provisional)
			for i := range r.Provisional {
				r.Provisional[i].Topic = topic(r.Provisional[i].Topic)
			}
			for _, l := range []*[]coordinator.TopicPartition{&r.Pending, &r.Revoking, &r.Target} {
				*l = slices.Clone(*l)
				for i := range *l {
					(*l)[i].Topic = topic((*l)[i].Topic)
				}
			}
		}
	}
	return out
}
