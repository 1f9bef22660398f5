package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// resPart names one partition of one resource.
type resPart struct {
	Resource  string
	Partition int32
}

func compareResPart(a, b resPart) int {
	return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Partition, b.Partition))
}

// writer names who wrote a row or made an attempt: the member if known,
// else the worker.
func writer(member, worker string) string {
	if member != "" {
		return member
	}
	return "worker " + worker
}

// checkTokenOrder is check 1. Rows: per resource and partition, in
// acceptance order, a token below the highest accepted before. Attempts:
// an append acknowledged ok whose call began after the resource had
// acknowledged a higher token for the partition (an admit or an append):
// the fence should have rejected it.
func checkTokenOrder(rows []Row, attempts []Attempt) []Violation {
	var vs []Violation
	byRP := make(map[resPart][]Row)
	for _, r := range rows {
		k := resPart{r.Resource, r.Partition}
		byRP[k] = append(byRP[k], r)
	}
	keys := make([]resPart, 0, len(byRP))
	for k := range byRP {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareResPart)
	for _, k := range keys {
		rs := byRP[k]
		slices.SortStableFunc(rs, func(a, b Row) int { return cmp.Compare(a.Order, b.Order) })
		var top Row
		for i, r := range rs {
			if i > 0 && r.Token < top.Token {
				vs = append(vs, Violation{Kind: TokenOrder, Resource: k.Resource, Partition: k.Partition,
					Evidence: fmt.Sprintf("row seq %d token %d by %s accepted at order %d, after token %d (seq %d by %s, order %d)",
						r.Seq, r.Token, writer(r.Member, r.Worker), r.Order, top.Token, top.Seq, writer(top.Member, top.Worker), top.Order)})
			}
			if i == 0 || r.Token > top.Token {
				top = r
			}
		}
	}

	// What each resource acknowledged, by the time it returned.
	type ack struct {
		t1    time.Time
		token int64
		a     *Attempt
	}
	acks := make(map[resPart][]ack)
	for i := range attempts {
		a := &attempts[i]
		if (a.Op == OpAdmit || a.Op == OpAppend) && a.Outcome == OutcomeOK && a.Resource != ResourceCoordinator {
			k := resPart{a.Resource, a.Partition}
			acks[k] = append(acks[k], ack{a.T1, a.Token, a})
		}
	}
	// best[k][i] is the ack with the highest token among acks[k][:i+1].
	best := make(map[resPart][]int)
	for k, as := range acks {
		slices.SortStableFunc(as, func(a, b ack) int { return a.t1.Compare(b.t1) })
		b := make([]int, len(as))
		for i := range as {
			b[i] = i
			if i > 0 && as[b[i-1]].token >= as[i].token {
				b[i] = b[i-1]
			}
		}
		best[k] = b
	}
	for i := range attempts {
		a := &attempts[i]
		if a.Op != OpAppend || a.Outcome != OutcomeOK || a.Resource == ResourceCoordinator {
			continue
		}
		k := resPart{a.Resource, a.Partition}
		as := acks[k]
		// The acks that returned strictly before a was called.
		n, _ := slices.BinarySearchFunc(as, a.T0, func(x ack, t time.Time) int {
			if x.t1.Before(t) {
				return -1
			}
			return 1
		})
		if n == 0 {
			continue
		}
		hi := as[best[k][n-1]]
		if hi.token > a.Token {
			vs = append(vs, Violation{Kind: TokenOrder, Resource: k.Resource, Partition: k.Partition,
				Evidence: fmt.Sprintf("append seq %d token %d by %s acknowledged [%s, %s], after the resource acknowledged token %d (%s by %s at %s)",
					a.Seq, a.Token, writer(a.Member, a.Worker), stamp(a.T0), stamp(a.T1), hi.token, hi.a.Op, writer(hi.a.Member, hi.a.Worker), stamp(hi.t1))})
		}
	}
	return vs
}

// members maps each worker to the members its attempts named.
func members(attempts []Attempt) map[string][]string {
	out := make(map[string][]string)
	for _, a := range attempts {
		if a.Member != "" && a.Worker != "" && !slices.Contains(out[a.Worker], a.Member) {
			out[a.Worker] = append(out[a.Worker], a.Member)
		}
	}
	for _, ms := range out {
		slices.Sort(ms)
	}
	return out
}

// checkGranted is check 2 for the resources: every row and every
// acknowledged admit carries a (partition, member, token) that some
// ownership had. A row without a member is checked against the members
// its worker's attempts named, or, if they named none, against any
// member.
func checkGranted(h *history, rows []Row, attempts []Attempt) []Violation {
	var vs []Violation
	byWorker := members(attempts)
	ok := func(p int32, member, worker string, t int64) (bool, string) {
		if member != "" {
			return h.granted(p, member, t), member
		}
		cands := byWorker[worker]
		if len(cands) == 0 {
			return len(h.holders(p, t)) > 0, "worker " + worker + " (member unknown)"
		}
		for _, m := range cands {
			if h.granted(p, m, t) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("worker %s (members %v)", worker, cands)
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b Row) int {
		return cmp.Or(compareResPart(resPart{a.Resource, a.Partition}, resPart{b.Resource, b.Partition}), cmp.Compare(a.Order, b.Order))
	})
	seen := make(map[string]bool)
	for _, r := range sorted {
		good, who := ok(r.Partition, r.Member, r.Worker, r.Token)
		if good {
			continue
		}
		// One violation per resource, partition, writer and token.
		key := fmt.Sprint(r.Resource, "|", r.Partition, "|", who, "|", r.Token)
		if seen[key] {
			continue
		}
		seen[key] = true
		vs = append(vs, Violation{Kind: Unauthorised, Resource: r.Resource, Partition: r.Partition,
			Evidence: fmt.Sprintf("row seq %d token %d (order %d) by %s, which never held it at that token; holders at token %d: %v",
				r.Seq, r.Token, r.Order, who, r.Token, h.describeOwners(r.Partition, r.Token))})
	}
	for _, a := range attempts {
		if a.Op != OpAdmit || a.Outcome != OutcomeOK || a.Resource == ResourceCoordinator {
			continue
		}
		good, who := ok(a.Partition, a.Member, a.Worker, a.Token)
		if good {
			continue
		}
		vs = append(vs, Violation{Kind: Unauthorised, Resource: a.Resource, Partition: a.Partition,
			Evidence: fmt.Sprintf("admit of token %d by %s acknowledged [%s, %s], which never held it at that token; holders at token %d: %v",
				a.Token, who, stamp(a.T0), stamp(a.T1), a.Token, h.describeOwners(a.Partition, a.Token))})
	}
	return vs
}

// rowKey identifies a record in a resource: its partition, sequence
// number and token are unique there.
type rowKey struct {
	Resource  string
	Partition int32
	Seq       int64
	Token     int64
}

// checkLost is check 3: every append acknowledged as ok has its row, from
// the same writer.
func checkLost(rows []Row, attempts []Attempt) []Violation {
	var vs []Violation
	idx := make(map[rowKey][]Row)
	for _, r := range rows {
		k := rowKey{r.Resource, r.Partition, r.Seq, r.Token}
		idx[k] = append(idx[k], r)
	}
	for _, a := range attempts {
		if a.Op != OpAppend || a.Outcome != OutcomeOK || a.Resource == ResourceCoordinator {
			continue
		}
		rs := idx[rowKey{a.Resource, a.Partition, a.Seq, a.Token}]
		found := false
		for _, r := range rs {
			if sameWriter(r, a) {
				found = true
				break
			}
		}
		if found {
			continue
		}
		ev := fmt.Sprintf("append seq %d token %d by %s acknowledged at %s has no row", a.Seq, a.Token, writer(a.Member, a.Worker), stamp(a.T1))
		if len(rs) > 0 {
			ev += fmt.Sprintf("; the row there is by %s (order %d)", writer(rs[0].Member, rs[0].Worker), rs[0].Order)
		}
		vs = append(vs, Violation{Kind: LostWrite, Resource: a.Resource, Partition: a.Partition, Evidence: ev})
	}
	return vs
}

// sameWriter reports whether row r can be a's: the same member if both
// name one, else the same worker.
func sameWriter(r Row, a Attempt) bool {
	if r.Member != "" && a.Member != "" {
		return r.Member == a.Member
	}
	return r.Worker == a.Worker
}

// ownKey identifies the rows of one ownership at one resource.
type ownKey struct {
	Resource  string
	Partition int32
	Token     int64
	Writer    string
}

// checkSeqs is check 4: the sequence numbers of one ownership's rows in
// one resource form a contiguous range (duplicates are allowed: one
// record redone).
func checkSeqs(rows []Row) []Violation {
	var vs []Violation
	seqs := make(map[ownKey][]int64)
	for _, r := range rows {
		k := ownKey{r.Resource, r.Partition, r.Token, writer(r.Member, r.Worker)}
		seqs[k] = append(seqs[k], r.Seq)
	}
	keys := make([]ownKey, 0, len(seqs))
	for k := range seqs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ownKey) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Partition, b.Partition),
			cmp.Compare(a.Token, b.Token), cmp.Compare(a.Writer, b.Writer))
	})
	for _, k := range keys {
		s := seqs[k]
		slices.Sort(s)
		s = slices.Compact(s)
		var missing []string
		holes := 0
		for i := 1; i < len(s); i++ {
			if s[i] == s[i-1]+1 {
				continue
			}
			holes++
			if len(missing) < 5 {
				if s[i] == s[i-1]+2 {
					missing = append(missing, fmt.Sprint(s[i-1]+1))
				} else {
					missing = append(missing, fmt.Sprintf("%d-%d", s[i-1]+1, s[i]-1))
				}
			}
		}
		if holes > 0 {
			vs = append(vs, Violation{Kind: SeqGap, Resource: k.Resource, Partition: k.Partition,
				Evidence: fmt.Sprintf("%s at token %d wrote seq %d to %d with %d holes: missing %v", k.Writer, k.Token, s[0], s[len(s)-1], holes, missing)})
		}
	}
	return vs
}
