package check

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// consumerKey is a key of the stock consumers' group k in shard 3 of a
// sharded layout (docs/STORE.md).
func consumerKey(kind, m string) string {
	if kind == "group" {
		return testPrefix + "shards/3/groups/k/group"
	}
	return fmt.Sprintf("%sshards/3/groups/k/%s/%s", testPrefix, kind, m)
}

// consumerAssign writes member m's AssignmentRecord in group k.
func (b *builder) consumerAssign(m string, epoch int32, p int32, token int64) {
	b.kv(consumerKey("assignments", m), fmt.Sprintf(`{"e":%d,"o":[{"t":%q,"p":[%d],"k":[%d]}]}`, epoch, testTopic, p, token), false)
}

func (b *builder) callback(client, member, kind string, p int32) {
	b.in.Callbacks = append(b.in.Callbacks, Callback{Client: client, Group: "k", Member: member, Epoch: 1, Callback: kind, Partition: p, T: b.now})
}

// TestClients runs check 10 and the consumer groups' replay on a quiet
// workers' group (member A owns both partitions throughout) beside a stock
// consumers' group k in a shard's keys: clients c1 (member M1, partition
// 0) and c2 (M2, partition 1) settle at 2 s; a node is lost at 10 s (the
// first fault).
func TestClients(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name      string
		unnoticed bool
		edit      func(b *builder)
		want      []Kind
	}{
		{name: "clean/nothing after the fault", unnoticed: true},
		{name: "clean/a revoke in a run whose faults may be noticed", edit: func(b *builder) {
			b.at(12 * s)
			b.callback("c1", "M1", CallbackRevoked, 0)
		}},
		{name: "clean/leaving after the observation", unnoticed: true, edit: func(b *builder) {
			b.at(45 * s)
			b.callback("c1", "M1", CallbackRevoked, 0)
			b.kv(consumerKey("members", "M1"), "", true)
		}},
		{name: "noticed/a revoke after the fault", unnoticed: true, edit: func(b *builder) {
			b.at(12 * s)
			b.callback("c1", "M1", CallbackRevoked, 0)
		}, want: []Kind{Noticed}},
		{name: "noticed/a loss after the fault", unnoticed: true, edit: func(b *builder) {
			b.at(12 * s)
			b.callback("c2", "M2", CallbackLost, 1)
		}, want: []Kind{Noticed}},
		{name: "client-two-owners/assigned while another client holds it", unnoticed: true, edit: func(b *builder) {
			b.at(12 * s)
			b.callback("c2", "M2", CallbackAssigned, 0)
		}, want: []Kind{ClientTwoOwners}},
		{name: "expelled/a member deleted within the observation", unnoticed: true, edit: func(b *builder) {
			b.at(20 * s)
			b.tx(func() {
				b.kv(consumerKey("assignments", "M2"), "", true)
				b.kv(consumerKey("members", "M2"), "", true)
			})
		}, want: []Kind{Expelled}},
		{name: "two-owners/the coordinator gives a consumer's partition to another", edit: func(b *builder) {
			b.at(20 * s)
			b.consumerAssign("M2", 2, 0, 2)
		}, want: []Kind{TwoOwners}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(2)
			b.in.Run.ConsumerGroups = []string{"k"}
			b.in.Run.Unnoticed = tc.unnoticed
			b.at(0)
			b.group(1)
			b.member("A")
			b.assign("A", 1, map[int32]int64{0: 1, 1: 1})
			b.at(s)
			b.kv(consumerKey("group", ""), `{"t":2,"e":1,"p":"uniform"}`, false)
			for i, m := range []string{"M1", "M2"} {
				b.kv(consumerKey("members", m), `{"c":"kgo","st":6000000000,"rt":10000000000,"ts":["t"]}`, false)
				b.consumerAssign(m, 1, int32(i), 1)
			}
			b.at(2 * s)
			b.callback("c1", "M1", CallbackAssigned, 0)
			b.callback("c2", "M2", CallbackAssigned, 1)
			b.at(3 * s)
			// A revoke before the first fault (a rebalance of the
			// start-up), which check 10 leaves alone.
			b.callback("c1", "M1", CallbackRevoked, 0)
			b.at(3*s + s/2)
			b.callback("c1", "M1", CallbackAssigned, 0)
			b.fault("lose-node", "n1", 10*s, 10*s)
			if tc.edit != nil {
				tc.edit(b)
			}
			r := mustCheck(t, b.build(40*s), Options{})
			if got := kinds(r); !slices.Equal(got, tc.want) {
				t.Fatalf("violations %v, want %v:\n%s", got, tc.want, describe(r))
			}
			for _, v := range r.Violations {
				if v.Group != "k" {
					t.Errorf("%v: group %q, want k", v, v.Group)
				}
			}
		})
	}
}
