package check

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// builder writes synthetic runs: the coordinator's history in the etcd
// layout of docs/STORE.md (encoded here by hand, so the checker's decoding
// through etcdstore is tested too), resources' rows, attempt logs and
// consumers' offsets, on a virtual clock.
type builder struct {
	base, now time.Time
	rev       int64
	inTxn     bool
	revAt     []RevTime // when each revision happened
	in        Input
	order     map[string]int64 // each resource's acceptance counter
}

const (
	testPrefix = "/tenure/"
	testGroup  = "g"
	testTopic  = "t"
)

func newBuilder(partitions int32) *builder {
	base := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	return &builder{
		base: base, now: base,
		order: make(map[string]int64),
		in: Input{Run: Run{
			Seed: 1, Group: testGroup, Topic: testTopic, Partitions: partitions, Prefix: testPrefix,
			SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second,
		}},
	}
}

// at moves the clock to base + d.
func (b *builder) at(d time.Duration) *builder {
	b.now = b.base.Add(d)
	return b
}

// tx writes every key f writes in one revision.
func (b *builder) tx(f func()) {
	b.nextRev()
	b.inTxn = true
	f()
	b.inTxn = false
}

func (b *builder) nextRev() {
	b.rev++
	b.revAt = append(b.revAt, RevTime{Rev: b.rev, T: b.now})
}

func (b *builder) kv(key, value string, deleted bool) {
	if !b.inTxn {
		b.nextRev()
	}
	kv := KV{Rev: b.rev, Key: []byte(key), Deleted: deleted}
	if !deleted {
		kv.Value = []byte(value)
	}
	b.in.History = append(b.in.History, kv)
}

func groupKey() string          { return testPrefix + "groups/" + testGroup + "/group" }
func memberKey(m string) string { return testPrefix + "groups/" + testGroup + "/members/" + m }
func assignKey(m string) string { return testPrefix + "groups/" + testGroup + "/assignments/" + m }
func offsetKey(p int32) string {
	return fmt.Sprintf("%sgroups/%s/offsets/%s/%d", testPrefix, testGroup, testTopic, p)
}
func (b *builder) group(epoch int32) {
	b.kv(groupKey(), fmt.Sprintf(`{"t":2,"e":%d,"p":"uniform"}`, epoch), false)
}
func (b *builder) tombstone(epoch int32) {
	b.kv(groupKey(), fmt.Sprintf(`{"t":2,"e":%d,"p":"uniform","d":true}`, epoch), false)
}
func (b *builder) member(m string) {
	b.kv(memberKey(m), `{"c":"worker","st":6000000000,"rt":10000000000,"ts":["t"]}`, false)
}

// leave deletes a member's keys, as the store does, in one revision.
func (b *builder) leave(m string) {
	f := func() {
		b.kv(assignKey(m), "", true)
		b.kv(memberKey(m), "", true)
	}
	if b.inTxn {
		f()
		return
	}
	b.tx(f)
}

// assign writes m's AssignmentRecord: owned maps partitions to tokens.
func (b *builder) assign(m string, epoch int32, owned map[int32]int64) {
	v := fmt.Sprintf(`{"e":%d`, epoch)
	if len(owned) > 0 {
		ps := sortedKeys(owned)
		var pp, kk []string
		for _, p := range ps {
			pp = append(pp, fmt.Sprint(p))
			kk = append(kk, fmt.Sprint(owned[p]))
		}
		v += fmt.Sprintf(`,"o":[{"t":%q,"p":[%s],"k":[%s]}]`, testTopic, strings.Join(pp, ","), strings.Join(kk, ","))
	}
	b.kv(assignKey(m), v+"}", false)
}

func (b *builder) offset(p int32, offset, token int64, m string) {
	b.kv(offsetKey(p), fmt.Sprintf(`{"o":%d,"le":-1,"k":%d,"m":%q}`, offset, token, m), false)
}

// op logs an attempt lasting 5 ms from now.
func (b *builder) op(a Attempt) {
	a.T0, a.T1 = b.now, b.now.Add(5*time.Millisecond)
	b.in.Attempts = append(b.in.Attempts, a)
}

// row adds a row accepted now by res.
func (b *builder) row(res string, p int32, seq, token int64, worker, member string) {
	b.order[res]++
	b.in.Rows = append(b.in.Rows, Row{Resource: res, Partition: p, Seq: seq, Token: token, Worker: worker, Member: member, Order: b.order[res]})
}

// appendOK logs an acknowledged append and adds its row.
func (b *builder) appendOK(res string, p int32, seq, token int64, worker, member string) {
	b.op(Attempt{Op: OpAppend, Worker: worker, Member: member, Partition: p, Token: token, Seq: seq, Resource: res, Outcome: OutcomeOK})
	b.row(res, p, seq, token, worker, member)
}

func (b *builder) admit(res string, p int32, token int64, worker, member, outcome string) {
	b.op(Attempt{Op: OpAdmit, Worker: worker, Member: member, Partition: p, Token: token, Resource: res, Outcome: outcome})
}

func (b *builder) commit(p int32, offset, token int64, worker, member, outcome string) {
	b.op(Attempt{Op: OpCommit, Worker: worker, Member: member, Partition: p, Token: token, Offset: offset, Resource: ResourceCoordinator, Outcome: outcome})
}

func (b *builder) fetch(p int32, offset int64, worker, member string) {
	b.op(Attempt{Op: OpFetch, Worker: worker, Member: member, Partition: p, Offset: offset, Resource: ResourceCoordinator, Outcome: OutcomeOK})
}

// consumerOp logs a kgo consumer's commit or fetch lasting 5 ms from now.
func (b *builder) consumerOp(client string, p int32, kind string, offset int64, outcome string) {
	b.in.Offsets = append(b.in.Offsets, OffsetOp{Client: client, Partition: p, Kind: kind, Offset: offset,
		T0: b.now, T1: b.now.Add(5 * time.Millisecond), Outcome: outcome})
}

func (b *builder) fault(kind, target string, start, end time.Duration) {
	f := Fault{Kind: kind, Target: target, Start: b.base.Add(start)}
	if end > 0 {
		f.End = b.base.Add(end)
	}
	b.in.Run.Faults = append(b.in.Run.Faults, f)
}

// build samples the revision every 100 ms from base to base + end, as the
// runner does, and returns the input.
func (b *builder) build(end time.Duration) *Input {
	in := b.in
	in.History = slices.Clone(b.in.History)
	in.Rows = slices.Clone(b.in.Rows)
	in.Attempts = slices.Clone(b.in.Attempts)
	in.Offsets = slices.Clone(b.in.Offsets)
	in.Run.Faults = slices.Clone(b.in.Run.Faults)
	in.RevTimes = nil
	i := 0
	var rev int64
	for t := b.base; !t.After(b.base.Add(end)); t = t.Add(100 * time.Millisecond) {
		for i < len(b.revAt) && !b.revAt[i].T.After(t) {
			rev = b.revAt[i].Rev
			i++
		}
		in.RevTimes = append(in.RevTimes, RevTime{Rev: rev, T: t})
	}
	return &in
}

// hooks insert events into the baseline at its stages, keeping the
// revisions in time order.
type hooks struct {
	// beforeLeave runs at 15 s, while A still owns both partitions.
	beforeLeave func(b *builder)
	// handoff runs at 16.1 s, after A's expiry and before B's grant.
	handoff func(b *builder)
	// zombie replaces A's rejected zombie write at 17.5 s.
	zombie func(b *builder)
	// end runs at 30 s, after everything else.
	end func(b *builder)
}

// baseline is a clean run of two partitions: member A (worker wa) owns
// both at token 1 and writes to etcd; at 10 s worker wa is killed (healed
// at 12 s, a new process with member C that gets nothing); B joins; A
// expires at 16 s and B gets both partitions at token 2 at 16.2 s. A's
// paused write after B's admit is rejected. The consumers commit and fetch
// partition 1. Observed to 40 s.
func baseline(h hooks) *builder {
	b := newBuilder(2)
	s := time.Second
	b.at(0)
	b.group(1)
	b.member("A")
	b.assign("A", 1, map[int32]int64{0: 1, 1: 1})
	b.at(s / 2)
	b.admit(ResourceEtcd, 0, 1, "wa", "A", OutcomeOK)
	b.fetch(0, -1, "wa", "A")
	for seq := range int64(3) {
		b.at(s + time.Duration(seq)*s)
		b.appendOK(ResourceEtcd, 0, seq, 1, "wa", "A")
	}
	b.at(4 * s)
	b.commit(0, 3, 1, "wa", "A", OutcomeOK)
	b.offset(0, 3, 1, "A")
	b.at(5 * s)
	b.consumerOp("c1", 1, KindFetch, -1, OffsetOK)
	b.at(6 * s)
	b.consumerOp("c1", 1, KindCommit, 7, OffsetOK)
	b.offset(1, 7, 1, "A")
	b.fault("kill", "wa", 10*s, 12*s)
	b.at(11 * s)
	b.tx(func() {
		b.group(2)
		b.member("B")
		b.assign("B", 2, nil)
	})
	b.at(12 * s)
	b.member("C")
	b.assign("C", 2, nil)
	if h.beforeLeave != nil {
		b.at(15 * s)
		h.beforeLeave(b)
	}
	b.at(16 * s)
	b.leave("A")
	if h.handoff != nil {
		b.at(16*s + 100*time.Millisecond)
		h.handoff(b)
	}
	b.at(16*s + 200*time.Millisecond)
	b.assign("B", 2, map[int32]int64{0: 2, 1: 2})
	b.at(17 * s)
	b.admit(ResourceEtcd, 0, 2, "wb", "B", OutcomeOK)
	b.fetch(0, 3, "wb", "B")
	b.at(17*s + 500*time.Millisecond)
	if h.zombie != nil {
		h.zombie(b)
	} else {
		// A zombie's write, held by a pause since before the kill: rejected.
		b.op(Attempt{Op: OpAppend, Worker: "wa", Member: "A", Partition: 0, Token: 1, Seq: 3, Resource: ResourceEtcd, Outcome: OutcomeStale, Held: true})
	}
	for seq := int64(3); seq < 5; seq++ {
		b.at(18*s + time.Duration(seq-3)*s)
		b.appendOK(ResourceEtcd, 0, seq, 2, "wb", "B")
	}
	b.at(20 * s)
	b.commit(0, 5, 2, "wb", "B", OutcomeOK)
	b.offset(0, 5, 2, "B")
	b.at(21 * s)
	b.consumerOp("c2", 1, KindFetch, 7, OffsetOK)
	b.at(22 * s)
	b.consumerOp("c2", 1, KindCommit, 9, OffsetOK)
	b.offset(1, 9, 2, "B")
	b.at(25 * s)
	b.fetch(0, 5, "wb", "B")
	if h.end != nil {
		b.at(30 * s)
		h.end(b)
	}
	return b
}
