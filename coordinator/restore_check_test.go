package coordinator

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// restoreChecker follows a group's persisted records in a RecordSet, as a
// store would, and checks after every Ready that the store is complete
// and Restore faithful: the records the store holds describe the group
// exactly as it is (its Snapshot), and a group restored from them has the
// same snapshot and keeps every invariant. The datadriven scripts, the
// randomized runs and the fuzz targets all run it, so every scenario they
// cover is also a restart test.
type restoreChecker struct {
	set *RecordSet
}

func newRestoreChecker() *restoreChecker { return &restoreChecker{set: NewRecordSet()} }

// apply takes the records of one Ready.
func (c *restoreChecker) apply(t testing.TB, rd Ready) {
	t.Helper()
	for _, r := range rd.Persist {
		if err := c.set.Apply(r); err != nil {
			t.Fatalf("record %s: %v", renderRecord(r), err)
		}
	}
}

// check compares the store's records with the group, and the group with
// its restored copy. Call it only once every Ready the group produced so
// far was applied.
func (c *restoreChecker) check(t testing.TB, g *Group, now time.Time) {
	t.Helper()
	if err := c.checkErr(g, now); err != nil {
		t.Fatalf("%v\n%s", err, g)
	}
}

func (c *restoreChecker) checkErr(g *Group, now time.Time) error {
	stored := c.set.Group(g.name)
	snap := g.Snapshot()
	for _, r := range snap {
		if gr, ok := r.(*GroupRecord); ok && gr.Targets != nil {
			return fmt.Errorf("the snapshot's GroupRecord has targets: %+v", *gr)
		}
	}
	if gr, ok := first(stored).(*GroupRecord); ok && gr.Deleted && !g.deleted {
		// Restored from its tombstone and not used since.
		if len(snap) != 1 || !g.Empty() || g.epoch != gr.Epoch {
			return fmt.Errorf("the store holds a tombstone at epoch %d for a group at epoch %d with %d records", gr.Epoch, g.epoch, len(snap))
		}
		return nil
	}
	want := snap
	if _, ok := first(stored).(*GroupRecord); !ok {
		// Nothing ever needed a GroupRecord: the group must be as
		// NewGroup made it, offsets aside.
		fresh := GroupRecord{Group: g.name, Type: Classic, State: classicEmpty.String()}
		if gr := snap[0].(*GroupRecord); !reflect.DeepEqual(*gr, fresh) {
			return fmt.Errorf("the store has no GroupRecord for a group at %+v", *gr)
		}
		want = snap[1:]
	}
	if got, live := renderSnapshot(withTargets(stored)), renderSnapshot(want); got != live {
		return fmt.Errorf("the store does not hold the group's state:\nstored:\n%slive:\n%s", got, live)
	}
	r, err := Restore(g.name, g.cfg, rand.New(rand.NewPCG(3, 4)), now, stored)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if g.deleted {
		// A deleted group comes back empty at its epoch: the name's
		// next group continues above every token it gave.
		if !r.Empty() || r.Epoch() != g.Epoch() || r.deleted {
			return fmt.Errorf("a deleted group at epoch %d restored as %s", g.Epoch(), r)
		}
		return nil
	}
	if got, live := renderSnapshot(r.Snapshot()), renderSnapshot(snap); got != live {
		return fmt.Errorf("the restored group differs:\nrestored:\n%slive:\n%s", got, live)
	}
	if err := groupInvariants(r); err != nil {
		return fmt.Errorf("restored group: %w\n%s", err, r)
	}
	return nil
}

// withTargets returns a group's records as a snapshot has them: each
// member's AssignmentRecord with the target the GroupRecord's Targets give
// it (a member with none gets one), and the GroupRecord without Targets.
func withTargets(recs []Record) []Record {
	gr, ok := first(recs).(*GroupRecord)
	if !ok || gr.Targets == nil {
		return recs
	}
	targets := make(map[string][]TopicPartition, len(gr.Targets))
	for _, t := range gr.Targets {
		targets[t.MemberID] = t.Target
	}
	bare := *gr
	bare.Targets = nil
	out := []Record{&bare}
	var members []string
	assigned := make(map[string]bool)
	for _, r := range recs[1:] {
		switch r := r.(type) {
		case *MemberRecord:
			members = append(members, r.MemberID)
		case *AssignmentRecord:
			assigned[r.MemberID] = true
			if t, ok := targets[r.MemberID]; ok {
				a := *r
				a.Target = t
				out = append(out, &a)
				continue
			}
		case *OffsetRecord:
			// The assignments end here; add those of the members that
			// have none.
			for _, id := range members {
				if t, ok := targets[id]; ok && !assigned[id] {
					out = append(out, &AssignmentRecord{Group: gr.Group, MemberID: id, Target: t})
					assigned[id] = true
				}
			}
		}
		out = append(out, r)
	}
	for _, id := range members {
		if t, ok := targets[id]; ok && !assigned[id] {
			out = append(out, &AssignmentRecord{Group: gr.Group, MemberID: id, Target: t})
		}
	}
	return out
}

func first(recs []Record) Record {
	if len(recs) == 0 {
		return nil
	}
	return recs[0]
}

// groupInvariants checks the invariants of whichever protocol g speaks.
func groupInvariants(g *Group) error {
	switch g.typ {
	case Classic:
		return classicInvariants(g)
	case Consumer:
		return consumerInvariantError(g)
	}
	return nil
}

// renderSnapshot renders records with every field, one per line.
func renderSnapshot(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		switch r := r.(type) {
		case *GroupRecord:
			fmt.Fprintf(&b, "%+v\n", *r)
		case *MemberRecord:
			fmt.Fprintf(&b, "member %s instance=%q client=%q host=%q rack=%q session=%v rebalance=%v topics=%q regex=%q assignor=%q deleted=%v",
				r.MemberID, r.InstanceID, r.ClientID, r.ClientHost, r.RackID, r.SessionTimeout, r.RebalanceTimeout,
				r.Topics, r.TopicRegex, r.ServerAssignor, r.Deleted)
			for _, p := range r.Protocols {
				fmt.Fprintf(&b, " %s=%x", p.Name, p.Metadata)
			}
			b.WriteByte('\n')
		case *AssignmentRecord:
			fmt.Fprintf(&b, "assignment %s epoch=%d prev=%d owned=%s provisional=%v pending=%s revoking=%s target=%s raw=%x\n",
				r.MemberID, r.MemberEpoch, r.PrevEpoch, renderOwnedTPs(r.Owned), r.Provisional,
				renderTPList(r.Pending), renderTPList(r.Revoking), renderTPList(r.Target), r.Raw)
		case *OffsetRecord:
			md := "<nil>"
			if r.Metadata != nil {
				md = fmt.Sprintf("%q", *r.Metadata)
			}
			fmt.Fprintf(&b, "offset %s[%d]=%d leader-epoch=%d metadata=%s token=%v by=%q deleted=%v\n",
				r.Topic, r.Partition, r.Offset, r.LeaderEpoch, md, r.Token, r.MemberID, r.Deleted)
		default:
			fmt.Fprintf(&b, "%T %+v\n", r, r)
		}
	}
	return b.String()
}
