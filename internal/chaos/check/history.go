package check

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// ownership is one member's holding of one partition of Run.Topic in
// Run.Group, as the coordinator's history shows it: from the revision at
// which the member's AssignmentRecord first listed the partition in Owned
// to the revision at which a record stopped it (its AssignmentRecord
// without the partition, its MemberRecord's deletion, the group's
// tombstone). A provisional token may change while the member holds the
// partition (consumer_tokens.go): Tokens are all it had.
type ownership struct {
	Member string
	// From is the first revision of the holding; To the revision that
	// ended it, 0 while it lasted to the end of History.
	From, To int64
	// Tokens are sorted and distinct.
	Tokens []int64
}

func (o *ownership) hasToken(t int64) bool {
	_, ok := slices.BinarySearch(o.Tokens, t)
	return ok
}

func (o *ownership) addToken(t int64) {
	if i, ok := slices.BinarySearch(o.Tokens, t); !ok {
		o.Tokens = slices.Insert(o.Tokens, i, t)
	}
}

func (o *ownership) String() string {
	to := "end"
	if o.To != 0 {
		to = fmt.Sprint(o.To)
	}
	return fmt.Sprintf("%s tokens %v revisions [%d, %s]", o.Member, o.Tokens, o.From, to)
}

// transition is a change of whether a partition has an owner, at the end
// of a revision.
type transition struct {
	Rev   int64
	Owned bool
}

// offsetAt is an OffsetRecord of Run.Group and Run.Topic with its
// revision.
type offsetAt struct {
	Rev int64
	Rec *coordinator.OffsetRecord
}

// history is what the replay of History found.
type history struct {
	// owns holds every ownership of each partition, in order of From.
	owns map[int32][]*ownership
	// transitions are the changes of each partition's having an owner.
	transitions map[int32][]transition
	// firstRev is the first revision with a record of Run.Group; 0 if
	// none.
	firstRev int64
	// formedRev is the first revision at whose end every partition had
	// an owner; 0 if none.
	formedRev int64
	offsets   []offsetAt
	revisions int
	// violations are TwoOwners, GrantOrder and EpochRegression.
	violations []Violation
}

// replayer builds a history.
type replayer struct {
	run *Run
	h   *history
	// typ is Run.Group's type, from its GroupRecord.
	typ coordinator.GroupType
	// open are the ongoing ownerships: by partition, then member.
	open map[int32]map[string]*ownership
	// byMember are the partitions each member holds.
	byMember map[string]map[int32]bool
	// prevMax is the highest token of each partition's ended ownerships.
	prevMax map[int32]int64
	// owned says whether each partition had an owner at the end of the
	// last revision; twoOwners whether it had more than one.
	owned, twoOwners map[int32]bool
	// epochs is each group's last epoch and its revision.
	epochs map[string][2]int64
	// touched are the partitions the current revision changed.
	touched map[int32]bool
	// offsetOrder is the order of each partition's last offset write
	// (etcdstore.OffsetWrite): a fold rewrites a partition key with a
	// write already replayed, at its order.
	offsetOrder map[int32]int64
}

// replay decodes History, which must be in revision order (a stable sort
// fixes one that is not), and rebuilds the ownerships.
func replay(run *Run, kvs []KV) (*history, error) {
	kvs = slices.Clone(kvs)
	slices.SortStableFunc(kvs, func(a, b KV) int { return cmp.Compare(a.Rev, b.Rev) })
	r := &replayer{
		run:       run,
		h:         &history{owns: make(map[int32][]*ownership), transitions: make(map[int32][]transition)},
		open:      make(map[int32]map[string]*ownership),
		byMember:  make(map[string]map[int32]bool),
		prevMax:   make(map[int32]int64),
		owned:     make(map[int32]bool),
		twoOwners: make(map[int32]bool),
		epochs:    make(map[string][2]int64),
		touched:   make(map[int32]bool),

		offsetOrder: make(map[int32]int64),
	}
	for i := 0; i < len(kvs); {
		rev := kvs[i].Rev
		j := i
		for j < len(kvs) && kvs[j].Rev == rev {
			if err := r.apply(&kvs[j]); err != nil {
				return nil, err
			}
			j++
		}
		r.endRevision(rev)
		r.h.revisions++
		i = j
	}
	return r.h, nil
}

func (r *replayer) apply(kv *KV) error {
	var (
		rec coordinator.Record
		ok  bool
		err error
	)
	if !kv.Deleted {
		writes, isOffset, err := etcdstore.OffsetWrites(r.run.Prefix, kv.Key, kv.Value, kv.Rev)
		if err != nil {
			return fmt.Errorf("check: history revision %d: %w", kv.Rev, err)
		}
		if isOffset {
			for _, w := range writes {
				r.offset(kv.Rev, w)
			}
			return nil
		}
	}
	if kv.Deleted {
		rec, ok, err = etcdstore.DeletedRecord(r.run.Prefix, kv.Key)
	} else {
		rec, ok, err = etcdstore.Decode(r.run.Prefix, kv.Key, kv.Value)
	}
	if err != nil {
		return fmt.Errorf("check: history revision %d: %w", kv.Rev, err)
	}
	if !ok {
		// A meta key, or the deletion of an assignment key, which goes
		// with its member's.
		return nil
	}
	if g, _ := coordinator.GroupOf(rec); g == r.run.Group && r.h.firstRev == 0 {
		r.h.firstRev = kv.Rev
	}
	switch rec := rec.(type) {
	case *coordinator.GroupRecord:
		r.group(kv.Rev, rec)
	case *coordinator.MemberRecord:
		if rec.Group == r.run.Group && rec.Deleted {
			r.endMember(kv.Rev, rec.MemberID)
		}
	case *coordinator.AssignmentRecord:
		if rec.Group == r.run.Group {
			r.assignment(kv.Rev, rec)
		}
	case *coordinator.OffsetRecord:
		if rec.Group == r.run.Group && rec.Topic == r.run.Topic {
			r.h.offsets = append(r.h.offsets, offsetAt{kv.Rev, rec})
			delete(r.offsetOrder, rec.Partition)
		}
	}
	return nil
}

// offset takes an offset write of a partition key or batch, unless its
// order is not above the partition's last (a fold's rewrite).
func (r *replayer) offset(rev int64, w etcdstore.OffsetWrite) {
	rec := w.Rec
	if rec.Group != r.run.Group || rec.Topic != r.run.Topic {
		return
	}
	if last, ok := r.offsetOrder[rec.Partition]; ok && w.Order <= last {
		return
	}
	r.offsetOrder[rec.Partition] = w.Order
	r.h.offsets = append(r.h.offsets, offsetAt{rev, rec})
}

// group checks that the group's epoch does not go down (check 6), and ends
// every ownership of Run.Group at its tombstone.
func (r *replayer) group(rev int64, rec *coordinator.GroupRecord) {
	if last, ok := r.epochs[rec.Group]; ok && int64(rec.Epoch) < last[0] {
		v := Violation{Kind: EpochRegression, Partition: NoPartition,
			Evidence: fmt.Sprintf("group epoch %d at revision %d after %d at revision %d", rec.Epoch, rev, last[0], last[1])}
		if rec.Deleted {
			v.Evidence += " (tombstone)"
		}
		if rec.Group != r.run.Group {
			v.Group = rec.Group
		}
		r.h.violations = append(r.h.violations, v)
	}
	r.epochs[rec.Group] = [2]int64{int64(rec.Epoch), rev}
	if rec.Group != r.run.Group {
		return
	}
	r.typ = rec.Type
	if rec.Deleted {
		for _, m := range sortedKeys(r.byMember) {
			r.endMember(rev, m)
		}
		// The deletion takes the offsets with it, those in batches
		// included, whose keys' deletions say nothing of them.
		for _, p := range sortedKeys(r.offsetOrder) {
			r.h.offsets = append(r.h.offsets, offsetAt{rev, &coordinator.OffsetRecord{
				Group: rec.Group, Topic: r.run.Topic, Partition: p, Deleted: true}})
		}
		clear(r.offsetOrder)
	}
}

// assignment applies a member's AssignmentRecord: the partitions of
// Run.Topic in Owned, with their tokens.
func (r *replayer) assignment(rev int64, rec *coordinator.AssignmentRecord) {
	now := make(map[int32]int64)
	for _, o := range rec.Owned {
		if o.Topic == r.run.Topic {
			now[o.Partition] = int64(o.Token)
		}
	}
	held := r.byMember[rec.MemberID]
	for _, p := range sortedKeys(held) {
		if _, ok := now[p]; !ok {
			r.end(rev, p, rec.MemberID)
		}
	}
	for _, p := range sortedKeys(now) {
		t := now[p]
		o := r.open[p][rec.MemberID]
		if o == nil {
			o = &ownership{Member: rec.MemberID, From: rev}
			if r.open[p] == nil {
				r.open[p] = make(map[string]*ownership)
			}
			r.open[p][rec.MemberID] = o
			if r.byMember[rec.MemberID] == nil {
				r.byMember[rec.MemberID] = make(map[int32]bool)
			}
			r.byMember[rec.MemberID][p] = true
			r.h.owns[p] = append(r.h.owns[p], o)
			r.touched[p] = true
		}
		if !o.hasToken(t) {
			// Tokens grow from owner to owner: a token given now must be
			// above every token an earlier ownership had (DESIGN.md,
			// "Tokens"). Classic static members keep their predecessor's
			// tokens, so only KIP-848 groups are held to it.
			if max, ok := r.prevMax[p]; ok && t <= max && r.typ == coordinator.Consumer {
				r.h.violations = append(r.h.violations, Violation{Kind: GrantOrder, Partition: p,
					Evidence: fmt.Sprintf("member %s holds it at token %d from revision %d, not above token %d of an earlier owner", rec.MemberID, t, rev, max)})
			}
			o.addToken(t)
		}
	}
}

// endMember ends every ownership of member m.
func (r *replayer) endMember(rev int64, m string) {
	for _, p := range sortedKeys(r.byMember[m]) {
		r.end(rev, p, m)
	}
	delete(r.byMember, m)
}

// end ends m's ownership of p at rev.
func (r *replayer) end(rev int64, p int32, m string) {
	o := r.open[p][m]
	if o == nil {
		return
	}
	o.To = rev
	delete(r.open[p], m)
	delete(r.byMember[m], p)
	if len(o.Tokens) > 0 {
		r.prevMax[p] = max(r.prevMax[p], o.Tokens[len(o.Tokens)-1])
	}
	r.touched[p] = true
}

// endRevision records which partitions have an owner once every key of
// revision rev is applied (one transaction may hand a partition from one
// member to another in any key order).
func (r *replayer) endRevision(rev int64) {
	for _, p := range sortedKeys(r.touched) {
		n := len(r.open[p])
		if owned := n > 0; owned != r.owned[p] {
			r.owned[p] = owned
			r.h.transitions[p] = append(r.h.transitions[p], transition{rev, owned})
		}
		two := n > 1
		if two && !r.twoOwners[p] {
			var who []string
			for _, m := range sortedKeys(r.open[p]) {
				who = append(who, r.open[p][m].String())
			}
			r.h.violations = append(r.h.violations, Violation{Kind: TwoOwners, Partition: p,
				Evidence: fmt.Sprintf("at revision %d held by %v", rev, who)})
		}
		r.twoOwners[p] = two
	}
	clear(r.touched)
	if r.h.formedRev == 0 && r.allOwned() {
		r.h.formedRev = rev
	}
}

func (r *replayer) allOwned() bool {
	for p := range r.run.Partitions {
		if !r.owned[p] {
			return false
		}
	}
	return true
}

// granted reports whether member m held p at token t at some revision.
func (h *history) granted(p int32, m string, t int64) bool {
	for _, o := range h.owns[p] {
		if o.Member == m && o.hasToken(t) {
			return true
		}
	}
	return false
}

// holders lists the members that held p at token t, sorted.
func (h *history) holders(p int32, t int64) []string {
	var ms []string
	for _, o := range h.owns[p] {
		if o.hasToken(t) && !slices.Contains(ms, o.Member) {
			ms = append(ms, o.Member)
		}
	}
	slices.Sort(ms)
	return ms
}

// mayCommit reports whether member m could commit p at token t in
// revision rev: it held p at t then, or it was the last owner at t and
// nobody was given p between its ownership's end and rev (the hand-off
// commit, offsets.go). Both ends are inclusive: one revision may hold the
// commit and the ownership's start or end in either order.
func (h *history) mayCommit(p int32, m string, t int64, rev int64) bool {
	owns := h.owns[p]
	for _, o := range owns {
		if o.Member != m || !o.hasToken(t) || o.From > rev {
			continue
		}
		if o.To == 0 || rev <= o.To {
			return true
		}
		next := int64(-1)
		for _, n := range owns {
			if n != o && n.From >= o.To && (next < 0 || n.From < next) {
				next = n.From
			}
		}
		if next < 0 || rev <= next {
			return true
		}
	}
	return false
}

// checkOffsets is check 7: in revision order, an offset lower than the
// partition's previous one must come from a commit its owner could make.
func (h *history) checkOffsets() []Violation {
	var vs []Violation
	last := make(map[int32]offsetAt)
	for _, oa := range h.offsets {
		rec := oa.Rec
		if rec.Deleted {
			delete(last, rec.Partition)
			continue
		}
		prev, ok := last[rec.Partition]
		last[rec.Partition] = oa
		if !ok || rec.Offset >= prev.Rec.Offset {
			continue
		}
		if rec.MemberID != "" && h.mayCommit(rec.Partition, rec.MemberID, int64(rec.Token), oa.Rev) {
			continue
		}
		by := rec.MemberID
		if by == "" {
			by = "an admin commit"
		}
		vs = append(vs, Violation{Kind: OffsetRegression, Partition: rec.Partition,
			Evidence: fmt.Sprintf("offset %d at revision %d by %s at token %d, after %d at revision %d by %s at token %d; owners at token %d: %v",
				rec.Offset, oa.Rev, by, rec.Token, prev.Rec.Offset, prev.Rev, prev.Rec.MemberID, prev.Rec.Token, rec.Token, h.describeOwners(rec.Partition, int64(rec.Token)))})
	}
	return vs
}

// describeOwners lists p's ownerships at token t, or all of them if none.
func (h *history) describeOwners(p int32, t int64) []string {
	var out []string
	for _, o := range h.owns[p] {
		if o.hasToken(t) {
			out = append(out, o.String())
		}
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}
