package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// checkConsumerGroups replays the history once more for each of
// Run.ConsumerGroups and keeps what the replay finds about the group
// itself: two owners at once and, for KIP-848 groups, tokens that do not
// grow (check 2 for the stock consumers' groups). Epoch regressions are
// the first replay's, which sees every group.
func checkConsumerGroups(run *Run, kvs []KV) ([]Violation, error) {
	var vs []Violation
	for _, g := range run.ConsumerGroups {
		if g == run.Group {
			continue
		}
		r := *run
		r.Group = g
		h, err := replay(&r, kvs)
		if err != nil {
			return nil, err
		}
		for _, v := range h.violations {
			if v.Kind == TwoOwners || v.Kind == GrantOrder {
				v.Group = g
				vs = append(vs, v)
			}
		}
	}
	return vs, nil
}

// checkClients is check 10, for a run whose faults stock consumers must
// not notice (Run.Unnoticed): no OnPartitionsRevoked or OnPartitionsLost
// from the first fault to the end of the observation; no partition held
// by two consumers of one group at once, as their callbacks tell it, at
// any time of the observation; and no member of a consumer group deleted
// by the coordinator while the run was observed (the consumers leave only
// after it). lastRev is the last revision the observation saw.
func checkClients(run *Run, kvs []KV, cbs []Callback, observedTo time.Time, lastRev int64) ([]Violation, error) {
	if !run.Unnoticed {
		return nil, nil
	}
	var vs []Violation
	var firstFault time.Time
	for _, f := range run.Faults {
		if firstFault.IsZero() || f.Start.Before(firstFault) {
			firstFault = f.Start
		}
	}
	cbs = slices.Clone(cbs)
	slices.SortStableFunc(cbs, func(a, b Callback) int { return a.T.Compare(b.T) })
	type gp struct {
		group string
		p     int32
	}
	holder := make(map[gp]Callback)
	for _, cb := range cbs {
		if cb.T.After(observedTo) {
			break
		}
		k := gp{cb.Group, cb.Partition}
		switch cb.Callback {
		case CallbackAssigned:
			if h, ok := holder[k]; ok && h.Client != cb.Client {
				vs = append(vs, Violation{Kind: ClientTwoOwners, Group: cb.Group, Partition: cb.Partition,
					Evidence: fmt.Sprintf("assigned to %s (member %s, epoch %d) at %s while %s (member %s) held it since %s",
						cb.Client, cb.Member, cb.Epoch, stamp(cb.T), h.Client, h.Member, stamp(h.T))})
			}
			holder[k] = cb
		case CallbackRevoked, CallbackLost:
			if h, ok := holder[k]; ok && h.Client == cb.Client {
				delete(holder, k)
			}
			if !firstFault.IsZero() && !cb.T.Before(firstFault) {
				vs = append(vs, Violation{Kind: Noticed, Group: cb.Group, Partition: cb.Partition,
					Evidence: fmt.Sprintf("%s's %s at %s (member %s, epoch %d), %v after the first fault",
						cb.Client, callbackNames[cb.Callback], stamp(cb.T), cb.Member, cb.Epoch,
						cb.T.Sub(firstFault).Round(time.Millisecond))})
			}
		}
	}

	groups := make(map[string]bool)
	for _, g := range run.ConsumerGroups {
		groups[g] = true
	}
	kvs = slices.Clone(kvs)
	slices.SortStableFunc(kvs, func(a, b KV) int { return cmp.Compare(a.Rev, b.Rev) })
	for _, kv := range kvs {
		if !kv.Deleted || kv.Rev > lastRev {
			continue
		}
		rec, ok, err := etcdstore.DeletedRecord(run.Prefix, kv.Key)
		if err != nil {
			return nil, fmt.Errorf("check: history revision %d: %w", kv.Rev, err)
		}
		m, isMember := rec.(*coordinator.MemberRecord)
		if !ok || !isMember || !groups[m.Group] {
			continue
		}
		vs = append(vs, Violation{Kind: Expelled, Group: m.Group, Partition: NoPartition,
			Evidence: fmt.Sprintf("member %s deleted at revision %d, within the observation (last revision %d)", m.MemberID, kv.Rev, lastRev)})
	}
	return vs, nil
}

var callbackNames = map[string]string{CallbackRevoked: "OnPartitionsRevoked", CallbackLost: "OnPartitionsLost"}
