package check

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// sim generates a legal run: a KIP-848 group whose coordinator hands
// partitions from member to member at increasing tokens (one at a time,
// or all of a member's when it expires and rejoins), workers that admit
// their token, resume at the committed offset, append and commit, and
// zombies whose paused writes land if they were decided before the new
// owner's admit and are rejected by the fence after it. Everything is
// recorded as the runner would: history, rows, attempt logs, RevTimes.
type sim struct {
	t     *rapid.T
	b     *builder
	res   string // the resource every worker writes to
	named bool   // whether rows name their member
	n     int    // members
	epoch int32
	owner []int // per partition, -1 for none
	token []int64
	next  []int64 // the owner's next sequence number
	fence []int64 // the resource's newest admitted token
	reg   []int64 // the committed offset
	held  []map[int32]int64
	alive []bool
	// stale are the attempts the fence rejected (indexes in b.in.Attempts).
	stale []int
}

func member(i int) string { return fmt.Sprintf("m%d", i) }
func worker(i int) string { return fmt.Sprintf("w%d", i) }

func newSim(t *rapid.T) *sim {
	parts := int32(rapid.IntRange(1, 3).Draw(t, "partitions"))
	s := &sim{
		t: t, b: newBuilder(parts),
		res:   rapid.SampledFrom([]string{ResourceEtcd, ResourcePostgres}).Draw(t, "resource"),
		named: rapid.Bool().Draw(t, "rows name members"),
		n:     rapid.IntRange(2, 4).Draw(t, "members"),
		epoch: 1,
	}
	for range parts {
		s.owner = append(s.owner, -1)
		s.token = append(s.token, 0)
		s.next = append(s.next, 0)
		s.fence = append(s.fence, 0)
		s.reg = append(s.reg, -1)
	}
	for range s.n {
		s.held = append(s.held, make(map[int32]int64))
		s.alive = append(s.alive, true)
	}
	s.b.group(1)
	for i := range s.n {
		s.b.member(member(i))
	}
	for p := range parts {
		o := rapid.IntRange(0, s.n-1).Draw(t, "first owner")
		s.owner[p], s.token[p] = o, 1
		s.held[o][p] = 1
	}
	for i := range s.n {
		s.b.assign(member(i), 1, s.held[i])
	}
	for p := range parts {
		s.start(p)
	}
	return s
}

// tick advances the clock 100 to 500 ms.
func (s *sim) tick() {
	d := time.Duration(rapid.IntRange(1, 5).Draw(s.t, "ticks")) * 100 * time.Millisecond
	s.b.at(s.b.now.Sub(s.b.base) + d)
}

func (s *sim) rowMember(i int) string {
	if s.named {
		return member(i)
	}
	return ""
}

// start is the new owner's start: admit its token, read the committed
// offset.
func (s *sim) start(p int32) {
	o := s.owner[p]
	s.b.admit(s.res, p, s.token[p], worker(o), member(o), OutcomeOK)
	s.fence[p] = max(s.fence[p], s.token[p])
	s.b.at(s.b.now.Sub(s.b.base) + 10*time.Millisecond)
	s.b.fetch(p, s.reg[p], worker(o), member(o))
	s.next[p] = max(s.reg[p], 0)
}

// write is one append by member i under token t: accepted if the fence
// allows it.
func (s *sim) write(p int32, i int, t, seq int64, held bool) bool {
	a := Attempt{Op: OpAppend, Worker: worker(i), Member: member(i), Partition: p, Token: t, Seq: seq, Resource: s.res, Held: held}
	if t < s.fence[p] {
		a.Outcome = OutcomeStale
		s.stale = append(s.stale, len(s.b.in.Attempts))
		s.b.op(a)
		return false
	}
	s.fence[p] = t
	a.Outcome = OutcomeOK
	s.b.op(a)
	s.b.row(s.res, p, seq, t, worker(i), s.rowMember(i))
	return true
}

// work appends the owner's next record, maybe after an attempt of
// unknown outcome that landed or not.
func (s *sim) work(p int32) {
	o := s.owner[p]
	switch rapid.IntRange(0, 5).Draw(s.t, "append outcome") {
	case 0, 1:
		landed := rapid.Bool().Draw(s.t, "landed")
		s.b.op(Attempt{Op: OpAppend, Worker: worker(o), Member: member(o), Partition: p, Token: s.token[p], Seq: s.next[p], Resource: s.res, Outcome: OutcomeError, Err: "deadline exceeded"})
		if landed {
			s.b.row(s.res, p, s.next[p], s.token[p], worker(o), s.rowMember(o))
		}
		s.b.at(s.b.now.Sub(s.b.base) + 50*time.Millisecond)
		// The retry rewrites the same record: the resource keeps one.
		s.b.op(Attempt{Op: OpAppend, Worker: worker(o), Member: member(o), Partition: p, Token: s.token[p], Seq: s.next[p], Resource: s.res, Outcome: OutcomeOK})
		if !landed {
			s.b.row(s.res, p, s.next[p], s.token[p], worker(o), s.rowMember(o))
		}
	default:
		s.write(p, o, s.token[p], s.next[p], false)
	}
	s.next[p]++
}

// commit commits the owner's progress; of unknown outcome, it took effect
// or not.
func (s *sim) commit(p int32, unknown bool) {
	o := s.owner[p]
	outcome, applied := OutcomeOK, true
	if unknown {
		outcome, applied = OutcomeError, rapid.Bool().Draw(s.t, "commit applied")
	}
	s.b.commit(p, s.next[p], s.token[p], worker(o), member(o), outcome)
	if applied {
		s.reg[p] = s.next[p]
		s.b.offset(p, s.next[p], s.token[p], member(o))
	}
}

// handOff moves p from its owner to member n at a new epoch; the old
// owner's paused write may land before the new owner's admit (allowed)
// or after it (rejected).
func (s *sim) handOff(p int32, n int, zombieBefore, zombieAfter bool) {
	o, oldTok, oldNext := s.owner[p], s.token[p], s.next[p]
	s.epoch++
	s.b.group(s.epoch)
	if rapid.Bool().Draw(s.t, "graceful") {
		s.commit(p, false)
	}
	delete(s.held[o], p)
	s.b.assign(member(o), s.epoch, s.held[o])
	if zombieBefore && s.write(p, o, oldTok, oldNext, true) {
		oldNext++
	}
	s.b.at(s.b.now.Sub(s.b.base) + 100*time.Millisecond)
	s.owner[p], s.token[p] = n, int64(s.epoch)
	s.held[n][p] = int64(s.epoch)
	s.b.assign(member(n), s.epoch, s.held[n])
	s.start(p)
	if zombieAfter {
		s.b.at(s.b.now.Sub(s.b.base) + 20*time.Millisecond)
		s.write(p, o, oldTok, oldNext, true)
	}
}

// expire removes member o, gives its partitions to the others at a new
// epoch, and lets it rejoin with nothing.
func (s *sim) expire(o int) {
	parts := sortedKeys(s.held[o])
	oldTok := make(map[int32]int64)
	for _, p := range parts {
		oldTok[p] = s.token[p]
	}
	s.b.tx(func() {
		s.b.leave(member(o))
		s.epoch++
		s.b.group(s.epoch)
	})
	clear(s.held[o])
	s.b.at(s.b.now.Sub(s.b.base) + 100*time.Millisecond)
	others := make([]int, 0, s.n-1)
	for i := range s.n {
		if i != o {
			others = append(others, i)
		}
	}
	got := make(map[int]bool)
	for _, p := range parts {
		n := rapid.SampledFrom(others).Draw(s.t, "heir")
		s.owner[p], s.token[p] = n, int64(s.epoch)
		s.held[n][p] = int64(s.epoch)
		got[n] = true
	}
	s.b.tx(func() {
		for _, n := range sortedKeys(got) {
			s.b.assign(member(n), s.epoch, s.held[n])
		}
	})
	for _, p := range parts {
		s.start(p)
		if rapid.Bool().Draw(s.t, "zombie") {
			s.write(p, o, oldTok[p], 0, true)
		}
	}
	s.b.at(s.b.now.Sub(s.b.base) + 200*time.Millisecond)
	s.b.member(member(o))
	s.b.assign(member(o), s.epoch, nil)
}

// genRun generates a legal run, ending with a hand-off of partition 0
// whose zombie write is rejected, and a commit of partition 0 at offset 1
// or more.
func genRun(t *rapid.T) (*sim, time.Duration) {
	s := newSim(t)
	parts := int32(len(s.owner))
	steps := rapid.IntRange(5, 40).Draw(t, "steps")
	for range steps {
		s.tick()
		p := int32(rapid.IntRange(0, int(parts)-1).Draw(t, "partition"))
		switch rapid.IntRange(0, 9).Draw(t, "action") {
		case 0, 1, 2, 3:
			s.work(p)
		case 4:
			s.commit(p, rapid.Bool().Draw(t, "unknown"))
		case 5:
			o := s.owner[p]
			s.b.fetch(p, s.reg[p], worker(o), member(o))
		case 6, 7:
			n := (s.owner[p] + rapid.IntRange(1, s.n-1).Draw(t, "to")) % s.n
			s.handOff(p, n, rapid.Bool().Draw(t, "zombie before"), rapid.Bool().Draw(t, "zombie after"))
		case 8:
			s.expire(s.owner[p])
		case 9:
			at := s.b.now.Sub(s.b.base)
			s.b.fault(rapid.SampledFrom([]string{"kill", "pause", "netem"}).Draw(t, "fault"), worker(s.owner[p]), at, at+time.Duration(rapid.IntRange(1, 30).Draw(t, "fault tenths"))*100*time.Millisecond)
		}
	}
	s.tick()
	s.handOff(0, (s.owner[0]+1)%s.n, false, true)
	s.tick()
	s.work(0)
	s.commit(0, false)
	end := s.b.now.Sub(s.b.base) + 5*time.Second
	return s, end
}

// TestPropertyLegalRuns checks that generated legal runs pass, and that
// each of three mutations of them fails with the check it breaks: a
// zombie's write the fence rejected is accepted instead (check 1), an
// acknowledged row goes missing (check 3), an offset goes back by a
// commit of a member that does not own the partition (check 7).
func TestPropertyLegalRuns(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, end := genRun(t)
		r, err := Check(s.b.build(end), Options{})
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if !r.OK() {
			t.Fatalf("a legal run fails:\n%s", describe(r))
		}

		// A stale write accepted: the fence let a rejected zombie in.
		in := s.b.build(end)
		i := rapid.SampledFrom(s.stale).Draw(t, "stale attempt")
		a := &in.Attempts[i]
		a.Outcome = OutcomeOK
		var order int64
		for _, row := range in.Rows {
			if row.Resource == a.Resource {
				order = max(order, row.Order)
			}
		}
		m := ""
		if s.named {
			m = a.Member
		}
		in.Rows = append(in.Rows, Row{Resource: a.Resource, Partition: a.Partition, Seq: a.Seq, Token: a.Token, Worker: a.Worker, Member: m, Order: order + 1})
		expect(t, "a stale write accepted", in, TokenOrder)

		// An acknowledged row lost.
		in = s.b.build(end)
		var acked []Attempt
		for _, a := range in.Attempts {
			if a.Op == OpAppend && a.Outcome == OutcomeOK {
				acked = append(acked, a)
			}
		}
		lost := rapid.SampledFrom(acked).Draw(t, "lost append")
		in.Rows = dropRow(in.Rows, lost.Resource, lost.Partition, lost.Seq, lost.Token)
		expect(t, "an acknowledged row lost", in, LostWrite)

		// An offset moved back by a non-owner: the previous owner of
		// partition 0, at the current owner's token.
		s.b.at(end - time.Second)
		s.b.offset(0, s.reg[0]-1, s.token[0], member((s.owner[0]+s.n-1)%s.n))
		expect(t, "an offset moved back by a non-owner", s.b.build(end), OffsetRegression)
	})
}

// expect fails t unless in has a violation of kind k.
func expect(t *rapid.T, what string, in *Input, k Kind) {
	r, err := Check(in, Options{})
	if err != nil {
		t.Fatalf("%s: Check: %v", what, err)
	}
	if !slices.Contains(kinds(r), k) {
		t.Fatalf("%s: want %v, got %v\n%s", what, k, kinds(r), describe(r))
	}
}
