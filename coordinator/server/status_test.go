package server

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// TestStatusViews: the status page's reads see the groups a client made,
// by any name, and tell a missing group from one this node cannot show.
func TestStatusViews(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.DefaultPartitions = 4 })
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	const odd = "a/b ../%2F?#<script>"
	for _, g := range []string{"g", odd} {
		if r := c.roundTrip(cgHeartbeat(g, "member-a-000000000000000", 0)).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("join %q: error %d", g, r.ErrorCode)
		}
	}

	if l := ts.Leadership(); !l.Leading || !l.LeaderKnown || l.Leader.ID != l.Self.ID || l.Leader.Addr != l.Self.Addr || l.Self.Addr != ts.addr || l.Self.Listeners["PLAINTEXT"] != ts.addr {
		t.Errorf("leadership of a single node: %+v", l)
	}
	sums, err := ts.Groups()
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 || sums[0].Name != odd || sums[1].Name != "g" {
		t.Fatalf("groups %+v, want %q and g, sorted", sums, odd)
	}
	for _, s := range sums {
		if s.Type != coordinator.Consumer || s.Members != 1 || s.Epoch != 1 || s.Owned != 4 || s.Unowned != 0 {
			t.Errorf("summary %+v", s)
		}
	}

	v, err := ts.GroupView(odd)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != odd || len(v.Members) != 1 || v.Members[0].ID != "member-a-000000000000000" || len(v.Partitions) != 4 {
		t.Errorf("view %+v", v)
	}
	for _, p := range v.Partitions {
		if p.Topic != "jobs" || p.Owner != "member-a-000000000000000" || p.Token != 1 || p.Target != p.Owner {
			t.Errorf("partition %+v: want owned by the member at token 1", p)
		}
	}
	if _, err := ts.GroupView("nope"); !errors.Is(err, ErrGroupNotFound) {
		t.Errorf("missing group: %v, want ErrGroupNotFound", err)
	}
	if n := len(ts.term(t).groups.snapshot()); n != 2 {
		t.Errorf("%d groups after reading a missing one; a read must not create it", n)
	}
}

// TestStatusFollower: a node of an HA set that does not lead shows no
// group and names the leader, or none during an election.
func TestStatusFollower(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}}}
	na, nb := set.node(0), set.node(1)
	a := startSetServer(t, set, na)
	b := startSetServer(t, set, nb)
	set.advertise(a, b)

	if l := b.Leadership(); l.Leading || l.LeaderKnown || l.Self.ID != 1 {
		t.Errorf("before any term: %+v", l)
	}
	set.setLeader(0)
	na.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.Leadership().Leading })

	l := b.Leadership()
	if l.Leading || !l.LeaderKnown || l.Leader.ID != 0 || l.Leader.Addr != a.addr {
		t.Errorf("follower: %+v, want node 0 at %s leading", l, a.addr)
	}
	if _, err := b.Groups(); !errors.Is(err, ErrNotLeading) {
		t.Errorf("Groups on a follower: %v, want ErrNotLeading", err)
	}
	if _, err := b.GroupView("g"); !errors.Is(err, ErrNotLeading) {
		t.Errorf("GroupView on a follower: %v, want ErrNotLeading", err)
	}
	if sums, err := a.Groups(); err != nil || len(sums) != 0 {
		t.Errorf("Groups on the leader: %v, %v", sums, err)
	}
}
