package check

import (
	"fmt"
	"slices"
)

// Check 9, the forging variant's: a client that forges tokens (workload's
// Forger, op "forge" in its attempt log, records with negative sequence
// numbers) gets none accepted, and the honest owners are not refused as
// unverified (with no key rotation in a run, every token they hold is
// signed by the key their verifiers have).
//
//   - ForgedAccepted: a forge attempt a resource answered ok, or a row
//     with a negative sequence number (a forgery that landed, whatever its
//     attempt line says: one of unknown outcome may have).
//   - HonestRefused: an honest append or admit refused as unverified.
//
// Runs without forging have no such lines and rows, and pass it
// trivially.
func checkForgeries(rows []Row, attempts []Attempt) []Violation {
	var vs []Violation
	for _, a := range attempts {
		switch {
		case a.Op == OpForge && a.Outcome == OutcomeOK:
			vs = append(vs, Violation{Kind: ForgedAccepted, Resource: a.Resource, Partition: a.Partition,
				Evidence: fmt.Sprintf("forgery %s by %s (token %d, member %q, seq %d) accepted at %s",
					a.Cause, a.Worker, a.Token, a.Member, a.Seq, stamp(a.T1))})
		case (a.Op == OpAppend || a.Op == OpAdmit) && a.Outcome == OutcomeUnverified:
			vs = append(vs, Violation{Kind: HonestRefused, Resource: a.Resource, Partition: a.Partition,
				Evidence: fmt.Sprintf("%s by %s (token %d, member %q) refused at %s: %s",
					a.Op, a.Worker, a.Token, a.Member, stamp(a.T1), a.Err)})
		}
	}
	for _, r := range rows {
		if r.Seq < 0 {
			vs = append(vs, Violation{Kind: ForgedAccepted, Resource: r.Resource, Partition: r.Partition,
				Evidence: fmt.Sprintf("row of a forged record: seq %d, token %d, worker %s, member %q, order %d",
					r.Seq, r.Token, r.Worker, r.Member, r.Order)})
		}
	}
	return vs
}

// countForgeries counts the forge attempts by kind and outcome.
func countForgeries(attempts []Attempt, st *Stats) {
	byKind := make(map[string]*ForgeryStats)
	for _, a := range attempts {
		if a.Op != OpForge {
			continue
		}
		fs := byKind[a.Cause]
		if fs == nil {
			fs = &ForgeryStats{Kind: a.Cause}
			byKind[a.Cause] = fs
		}
		fs.Tried++
		switch a.Outcome {
		case OutcomeOK:
			fs.Accepted++
		case OutcomeUnverified:
			fs.Unverified++
		case OutcomeStale:
			fs.Stale++
		default:
			fs.Errors++
		}
	}
	for _, k := range slices.Sorted(mapKeys(byKind)) {
		st.Forgeries = append(st.Forgeries, *byKind[k])
	}
}

func mapKeys[V any](m map[string]V) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
