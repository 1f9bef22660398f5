package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// TestStandbyTakeover: a follower with a standby (an etcdstore.Mirror of
// the set's store) keeps the leader's groups rebuilt while it follows;
// when it wins the next term it serves them without loading the store:
// the groups it had rebuilt are resumed, one that changed just before the
// term ended comes from the mirror's current records, and every member
// goes on at its epoch, the member that joined last included.
func TestStandbyTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emb, err := embedetcd.Start(ctx, t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	cli := emb.Client()
	opts := append(emb.StoreOpts(), etcdstore.Prefix("/standby/"), etcdstore.Logger(zap.NewNop()))
	mirror, err := etcdstore.NewMirror(ctx, cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mirror.Close() })
	topics := etcdstore.NewTopics(cli, opts...)
	set := &fakeSet{leader: -1, nodes: []Node{{ID: 0}, {ID: 1}}}
	na, nb := set.node(0), set.node(1)
	start := func(n *fakeNode, sb Standby) *testServer {
		return startServer(t, func(c *Config) {
			c.Store = nil
			c.TopicStore = topics
			c.Cluster = n
			c.TopicRefresh = 50 * time.Millisecond
			c.Standby = sb
		})
	}
	a, b := start(na, nil), start(nb, mirror)
	set.advertise(a, b)
	term := func() *fakeTerm {
		st, err := etcdstore.New(ctx, cli, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return newFakeTerm(st)
	}

	ta := term()
	set.setLeader(0)
	na.terms <- ta
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil })
	ca := dial(t, a.addr)
	ca.roundTrip(metadataRequest(12, "jobs"))
	type member struct {
		group, id string
		epoch     int32
		owned     []kmsg.ConsumerGroupHeartbeatRequestTopic
	}
	join := func(group, id string) member {
		r := ca.roundTrip(cgHeartbeat(group, id, 0)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 || r.Assignment == nil {
			t.Fatalf("join %s to %s: error %d", id, group, r.ErrorCode)
		}
		m := member{group: group, id: id, epoch: r.MemberEpoch, owned: []kmsg.ConsumerGroupHeartbeatRequestTopic{}}
		for _, tp := range r.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
		return m
	}
	var members []member
	for g := range 3 {
		members = append(members, join(fmt.Sprintf("g%d", g), fmt.Sprintf("member-%d-000000000000000000", g)))
	}
	eventually(t, 20*time.Second, "b's standby to rebuild the three groups", func() bool {
		b.standby.mu.Lock()
		defer b.standby.mu.Unlock()
		n := 0
		for _, bg := range b.standby.built {
			if bg.g != nil {
				n++
			}
		}
		return n == 3
	})
	// A change the standby has not rebuilt yet: it rebuilds a group once
	// its records have stayed the same for a second.
	members = append(members, join("g2", "member-late-00000000000000000"))
	ta.end()
	eventually(t, 5*time.Second, "a to drop its groups", func() bool { return a.lead.Load() == nil })

	tb := term()
	set.setLeader(1)
	nb.terms <- tb
	eventually(t, 5*time.Second, "b to lead", func() bool { return b.lead.Load() != nil })
	cb := dial(t, b.addr)
	for _, m := range members {
		hb := cgHeartbeat(m.group, m.id, m.epoch)
		hb.Topics = m.owned
		if r := cb.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch < m.epoch {
			t.Fatalf("%s of %s on the new leader: error %d epoch %d, want to go on at %d", m.id, m.group, r.ErrorCode, r.MemberEpoch, m.epoch)
		}
	}
	standby := b.metric(t, "tenure_takeover_groups_total", "from", "standby")
	fromMirror := b.metric(t, "tenure_takeover_groups_total", "from", "mirror")
	if loaded := b.metric(t, "tenure_takeover_groups_total", "from", "store"); loaded != 0 || standby < 2 || standby+fromMirror != 3 {
		t.Fatalf("the takeover's groups: %v from the standby, %v from the mirror, %v from the store; want every group from the standby but g2, which may come from the mirror, and none from the store",
			standby, fromMirror, loaded)
	}
}
