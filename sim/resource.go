package sim

import (
	"github.com/tenure-dev/tenure/epoch"
)

// resource is the downstream resource the members' workers write to, kept
// twice: once behind the real epoch.MemFence, once accepting everything,
// so that the report can show what fencing prevented.
//
// Every write is judged against the coordinator's view at that instant (as
// the store's records give it):
//
//   - It is stale if its writer is not the partition's owner in the
//     coordinator's view, or if a higher token was already written (to the
//     unfenced copy, which sees every write).
//   - The fenced copy admits or rejects it with MemFence. An admitted write
//     is a safety violation if a higher token had been admitted before (a
//     broken fence) or if the coordinator never let that writer own that
//     partition at a group epoch equal to the token (a member writing
//     under a token it had no right to). Both must never happen. A write
//     by the owner under another token than the one the coordinator
//     recorded for it is counted apart (a token mismatch between the
//     cores). An admitted write by a former
//     owner before anyone wrote under a newer token is not a violation:
//     the tokens the resource sees still only grow, and the newer owner's
//     writes will supersede it; it is counted apart, as a gap write.
//   - The unfenced copy accepts everything: each stale write it accepts is
//     damage that fencing prevents, and a write under a token lower than
//     one already written (superseded) is the worst kind, an old owner
//     overwriting a newer one.
type resource struct {
	fence       epoch.MemFence
	fencedMax   []epoch.Token
	unfencedMax []epoch.Token

	writes             int64
	staleAttempted     int64
	fencedRejected     int64
	fencedAcceptedBad  int64
	fencedGap          int64
	unfencedStale      int64
	unfencedSuperseded int64
	tokenMismatch      int64
}

func (r *resource) init(n int) {
	r.fencedMax = make([]epoch.Token, n)
	r.unfencedMax = make([]epoch.Token, n)
}

// write applies one write by n's process to partition p under token, to
// both copies of the resource.
func (w *world) write(n *memberNode, p int32, token epoch.Token) {
	r := &w.res
	r.writes++
	if w.steady(n, p, token) {
		return
	}
	ref := memberRef{n.id, n.inc}
	v := &w.coord.view[p]
	owner := v.set && v.ref == ref
	if owner && v.token != token {
		r.tokenMismatch++
	}
	superseded := token < r.unfencedMax[p]
	stale := !owner || superseded
	if stale {
		r.staleAttempted++
		w.tr.record(128+uint8(noteWrite), w.clock.now, n.id, int64(p), int64(token))
		if w.tr.text() {
			w.traceLine(n.name, "stale write %s token %v (coordinator: %s)", w.layout.name(p), token, w.describeOwner(p))
		}
	}

	if err := r.fence.Admit(bg, epoch.Partition(p), token); err != nil {
		r.fencedRejected++
	} else {
		switch {
		case token < r.fencedMax[p]:
			r.fencedAcceptedBad++
		case owner && v.token == token:
			// The owner under its own token: the steady state.
		case !w.coord.granted(p, ref, token):
			r.fencedAcceptedBad++
		case !owner:
			r.fencedGap++
		}
		r.fencedMax[p] = max(r.fencedMax[p], token)
	}

	if stale {
		r.unfencedStale++
	}
	if superseded {
		r.unfencedSuperseded++
	}
	r.unfencedMax[p] = max(r.unfencedMax[p], token)
}

// steady reports whether a write by n to p under token is the steady
// state, nearly every write of a run: the owner in the coordinator's view
// writes under the token it was recorded with, which both copies of the
// resource already hold as their highest. Such a write changes nothing
// but the count: the fence admits a token equal to the one it holds
// (fencedMax is what it holds), nothing is stale or superseded, and no
// maximum moves.
func (w *world) steady(n *memberNode, p int32, token epoch.Token) bool {
	v := &w.coord.view[p]
	return token > 0 && token == v.token && token == w.res.fencedMax[p] && token == w.res.unfencedMax[p] &&
		v.set && v.ref.node == n.id && v.ref.inc == n.inc
}

// describeOwner renders the coordinator's owner of p for the trace.
func (w *world) describeOwner(p int32) string {
	v := w.coord.view[p]
	if !v.set {
		return "no owner"
	}
	return w.nodes[v.ref.node].name + "#" + itoa(int(v.ref.inc)) + " token " + v.token.String()
}
