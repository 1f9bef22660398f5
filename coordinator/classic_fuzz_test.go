package coordinator

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeConsumerAssignment: assignment bytes come from the leader
// member, so they are network input: decoding must not panic, and yields a
// sorted set of non-negative partitions that are exactly those the bytes
// name (none if they do not decode).
func FuzzDecodeConsumerAssignment(f *testing.F) {
	var a kmsg.ConsumerMemberAssignment
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: []int32{3, 1, 1, -2}}, {Topic: "a", Partitions: []int32{0}}}
	f.Add(a.AppendTo(nil))
	f.Add(emptyConsumerAssignment)
	f.Add([]byte{0xde, 0xad, 0xbe, 0xef})
	f.Add([]byte{0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		tps := decodeConsumerAssignment(raw)
		if !slices.IsSortedFunc(tps, compareTP) {
			t.Fatalf("not sorted: %v", tps)
		}
		for i, tp := range tps {
			if tp.Partition < 0 || i > 0 && tps[i-1] == tp {
				t.Fatalf("bad partition %v in %v", tp, tps)
			}
		}
		var want kmsg.ConsumerMemberAssignment
		if want.ReadFrom(raw) != nil {
			if tps != nil {
				t.Fatalf("undecodable bytes gave %v", tps)
			}
			return
		}
		for _, at := range want.Topics {
			for _, p := range at.Partitions {
				if _, ok := slices.BinarySearchFunc(tps, TopicPartition{at.Topic, p}, compareTP); ok != (p >= 0) {
					t.Fatalf("%s[%d]: found %t in %v", at.Topic, p, ok, tps)
				}
			}
		}
	})
}

// FuzzClassicGroup drives a classic group with requests whose every field
// comes from the fuzzer (member IDs known and unknown, any generation, any
// version, timeouts in and out of bounds, arbitrary protocols, metadata and
// assignment bytes) and with time jumps. The group must never panic, must
// keep its invariants, must answer each request at most once and only
// with responses that encode at their version.
func FuzzClassicGroup(f *testing.F) {
	f.Add([]byte{0, 0, 9, 1, 0, 0, 9, 1, 5, 0, 1, 0, 3, 0, 2})
	f.Add([]byte{0, 1, 9, 2, 0, 1, 9, 2, 0, 2, 3, 1, 5, 200, 1, 1, 5, 0, 4, 0, 2, 5, 0})
	f.Add([]byte{0, 3, 4, 0, 7, 0, 0, 0, 5, 40, 2, 0, 0, 1, 3, 3, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		topics := NewStaticTopics()
		topics.Add("t", TopicID{15: 1}, 8)
		cfg := DefaultConfig()
		cfg.Topics = topics
		cfg.MaxGroupSize = 4
		g := NewGroup("g", &cfg, rand.New(rand.NewPCG(1, 2)))
		now := testEpoch
		r := classicFuzzReader{data: data}
		var ids []string
		answered := map[int]bool{}
		seq := 0
		member := func() string {
			switch i := int(r.byte()); {
			case i < len(ids):
				return ids[i]
			case i%7 == 0:
				return ""
			default:
				return "ghost"
			}
		}
		instance := func() *string {
			switch r.byte() % 4 {
			case 0:
				return kmsg.StringPtr("i1")
			case 1:
				return kmsg.StringPtr("i2")
			}
			return nil
		}
		store := newRestoreChecker()
		drain := func() {
			for _, rep := range g.Ready().Replies {
				n := rep.Ref.(int)
				if answered[n] {
					t.Fatalf("request %d answered twice", n)
				}
				answered[n] = true
				classicCheckEncodes(t, rep.Msg)
				if jr, ok := rep.Msg.(*kmsg.JoinGroupResponse); ok && jr.MemberID != "" && !slices.Contains(ids, jr.MemberID) {
					ids = append(ids, jr.MemberID)
				}
			}
			for _, rec := range g.Ready().Persist {
				if mr, ok := rec.(*MemberRecord); ok && !mr.Deleted && !slices.Contains(ids, mr.MemberID) {
					ids = append(ids, mr.MemberID)
				}
			}
			rd := g.Ready()
			g.Advance(rd)
			store.apply(t, rd)
			if err := classicInvariants(g); err != nil {
				t.Fatalf("%v\n%s", err, g)
			}
		}
		for ops := 0; r.more() && ops < 200; ops++ {
			var msg kmsg.Request
			switch r.byte() % 6 {
			case 0:
				req := kmsg.NewPtrJoinGroupRequest()
				req.Version = int16(r.byte() % 10)
				req.MemberID = member()
				req.InstanceID = instance()
				req.SessionTimeoutMillis = []int32{10000, 6000, -1, 1 << 30}[r.byte()%4]
				req.RebalanceTimeoutMillis = []int32{20000, 1, 0, -5}[r.byte()%4]
				req.ProtocolType = []string{"consumer", "connect", ""}[r.byte()%3]
				for range r.byte() % 3 {
					req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{
						Name:     []string{"range", "sticky", "x"}[r.byte()%3],
						Metadata: r.bytes(),
					})
				}
				msg = req
			case 1:
				req := kmsg.NewPtrSyncGroupRequest()
				req.Version = int16(r.byte() % 6)
				req.MemberID = member()
				req.InstanceID = instance()
				req.Generation = g.Epoch() - int32(r.byte()%3)
				if r.byte()%4 == 0 {
					req.Protocol = kmsg.StringPtr("range")
				}
				for range r.byte() % 4 {
					req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: member(), MemberAssignment: r.bytes()})
				}
				msg = req
			case 2:
				req := kmsg.NewPtrHeartbeatRequest()
				req.Version = int16(r.byte() % 5)
				req.MemberID = member()
				req.InstanceID = instance()
				req.Generation = g.Epoch() - int32(r.byte()%3)
				msg = req
			case 3:
				req := kmsg.NewPtrLeaveGroupRequest()
				req.Version = int16(r.byte() % 6)
				req.MemberID = member()
				for range r.byte() % 3 {
					req.Members = append(req.Members, kmsg.LeaveGroupRequestMember{MemberID: member(), InstanceID: instance()})
				}
				msg = req
			case 4:
				req := kmsg.NewPtrOffsetCommitRequest()
				req.MemberID = member()
				req.InstanceID = instance()
				req.Generation = g.Epoch() - int32(r.byte()%3)
				member, code := g.classicCommitMember(req)
				if code == 0 && member != "" && g.classic.members[member] == nil {
					t.Fatalf("commit accepted for %q, who is no member", member)
				}
				continue
			case 5:
				now = now.Add(time.Duration(r.byte()) * 250 * time.Millisecond)
				g.Step(now, Tick{})
			}
			if msg != nil {
				seq++
				g.Step(now, Request{Ref: seq, Msg: msg, ClientID: "c"})
			}
			drain()
			if next := g.Ready().NextTick; !next.IsZero() && !next.After(now) && r.byte()%2 == 0 {
				g.Step(now, Tick{})
				drain()
			}
		}
		// Whatever the fuzzer did, the group can be restored from what
		// it persisted.
		store.check(t, g, now)
	})
}

// classicFuzzReader hands out the fuzzer's bytes, then zeros.
type classicFuzzReader struct {
	data []byte
}

func (r *classicFuzzReader) more() bool { return len(r.data) > 0 }

func (r *classicFuzzReader) byte() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

func (r *classicFuzzReader) bytes() []byte {
	n := min(int(r.byte()%16), len(r.data))
	b := r.data[:n]
	r.data = r.data[n:]
	return b
}
