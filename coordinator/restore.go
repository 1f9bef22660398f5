package coordinator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// ErrCorruptRecords is wrapped by the errors of Restore: the records
// cannot describe a group (a member without a group, a classic member
// without protocols, a partition held twice under one token...).
var ErrCorruptRecords = errors.New("coordinator: records do not describe a group")

// Restore rebuilds the named group from its records: the latest record of
// each of its entities, as a store's Load returns them (records that a
// later one supersedes may be included; they are compacted as RecordSet
// does). cfg and rng are as for NewGroup. now is the time of the restore:
// every member's session, and a revoking member's rebalance timeout,
// starts again at now, so a coordinator restart or fail-over expels nobody
// and causes no rebalance; members keep their epochs and tokens.
//
// This is the one place where a group's epoch is decided when it comes
// back, and the rule is that it never goes below anything the name ever
// handed out: a group whose last record is a tombstone (it was deleted)
// comes back empty at the tombstone's epoch, so a group re-created under
// the same name continues above every token of the deleted one; and the
// epoch is raised to the highest member epoch and token in the records,
// should a store hold a partial write whose GroupRecord is missing.
//
// What is not durable does not come back: requests parked in the group
// (their clients retry), classic members told MEMBER_ID_REQUIRED that had
// not rejoined, and the last owner of a partition that nobody holds (so a
// hand-off commit racing the restart is refused). A classic group that was
// rebalancing comes back in its phase, with its deadlines starting at now:
// in PreparingRebalance its members must rejoin, in CompletingRebalance
// they must sync (and the leader send its plan) again. A KIP-848 member is
// sent its whole assignment with its next heartbeat.
//
// Restore never panics on bad records: it returns an error wrapping
// ErrCorruptRecords, and the caller keeps the group offline.
func Restore(name string, cfg *Config, rng *rand.Rand, now time.Time, recs []Record) (*Group, error) {
	g, err := Rebuild(name, cfg, rng, recs)
	if err != nil {
		return nil, err
	}
	g.Step(now, Resume{})
	return g, nil
}

// Rebuild is Restore without the clock: the group as its records describe
// it, with every deadline still to start. Stepping it with Resume starts
// them, and Restore(now) is exactly Rebuild then Step(now, Resume{}); a
// warm standby (package server) rebuilds the groups it may take over
// ahead of time, so that taking them over costs a Resume each. The group
// must not be stepped with any other input before Resume.
func Rebuild(name string, cfg *Config, rng *rand.Rand, recs []Record) (*Group, error) {
	set := NewRecordSet()
	for _, r := range recs {
		if gn, ok := GroupOf(r); !ok || gn != name {
			return nil, fmt.Errorf("%w: a %T of group %q among the records of %q", ErrCorruptRecords, r, gn, name)
		}
		if err := set.Apply(r); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptRecords, err)
		}
	}
	g := NewGroup(name, cfg, rng)
	rg := set.groups[name]
	if rg == nil {
		return g, nil
	}
	gr := rg.group
	if gr == nil {
		if len(rg.members) > 0 || len(rg.assignments) > 0 {
			return nil, fmt.Errorf("%w: group %q has members but no group record", ErrCorruptRecords, name)
		}
		// A group that only ever had admin commits.
		gr = &GroupRecord{Group: name, Type: Classic}
	}
	switch gr.Type {
	case Classic, Consumer:
	default:
		return nil, fmt.Errorf("%w: group %q has type %v", ErrCorruptRecords, name, gr.Type)
	}
	g.typ = gr.Type
	g.epoch = restoredEpoch(gr, rg)
	g.tombstone = gr.Deleted
	g.resume = &resumeState{}
	if err := checkTargets(gr); err != nil {
		return nil, err
	}
	for id, a := range rg.assignments {
		if _, ok := rg.members[id]; !ok {
			return nil, fmt.Errorf("%w: group %q has an assignment for %q, which is not a member", ErrCorruptRecords, name, id)
		}
		if err := checkAssignmentRecord(a); err != nil {
			return nil, err
		}
	}
	var err error
	switch g.typ {
	case Classic:
		err = g.restoreClassic(gr, rg)
	case Consumer:
		err = g.restoreConsumer(gr, rg)
	}
	if err != nil {
		return nil, err
	}
	g.offsets.restore(rg.offsets)
	return g, nil
}

// ErrNotRebuilt is RestoreOffsets' error for a group that is not one
// Rebuild returned, still to be resumed.
var ErrNotRebuilt = errors.New("coordinator: not a rebuilt group awaiting its Resume")

// RestoreOffsets replaces the committed offsets of a group Rebuild
// returned, before its Resume, with those recs hold (the group's
// OffsetRecords in load order; its other records are skipped): the group
// is then what Rebuild of its records of now would return, if only its
// offsets changed since it was rebuilt. A warm standby (package server)
// gives the copies it rebuilt ahead the offsets committed since, which
// consumers commit every few seconds, rather than rebuild them whole.
func (g *Group) RestoreOffsets(recs []Record) error {
	if g.resume == nil {
		return ErrNotRebuilt
	}
	// Straight into a table sized ahead: a takeover gives every
	// committing group's copy its offsets of now, and growing maps of
	// every group's partitions step by step cost more than the rest of
	// the install.
	n := 0
	for _, r := range recs {
		if _, ok := r.(*OffsetRecord); ok {
			n++
		}
	}
	m := make(map[TopicPartition]committed, n)
	for _, r := range recs {
		o, ok := r.(*OffsetRecord)
		if !ok {
			continue
		}
		if o.Group != g.name {
			return fmt.Errorf("%w: an offset of group %q among the records of %q", ErrCorruptRecords, o.Group, g.name)
		}
		// As RecordSet applies it.
		tp := TopicPartition{o.Topic, o.Partition}
		if o.Deleted {
			delete(m, tp)
			continue
		}
		m[tp] = committedOf(o)
	}
	g.offsets.m = m
	return nil
}

// restore makes the table the offsets recorded, and only those.
func (o *offsetTable) restore(recorded map[TopicPartition]*OffsetRecord) {
	if len(recorded) > len(o.m) {
		o.m = make(map[TopicPartition]committed, len(recorded))
	} else {
		clear(o.m)
	}
	for tp, r := range recorded {
		o.m[tp] = committedOf(r)
	}
}

// committedOf is what a recorded offset restores to.
func committedOf(r *OffsetRecord) committed {
	return committed{offset: r.Offset, leaderEpoch: r.LeaderEpoch, metadata: r.Metadata, token: r.Token, member: r.MemberID}
}

// resumeState is what Resume needs of a rebuilt group beyond its members.
type resumeState struct {
	// assigning: joins waited for a coalesced epoch bump; they get it at
	// the first Tick.
	assigning bool
	// unrevoked are the KIP-848 members still to revoke partitions:
	// their rebalance timeouts start at Resume; firstSession is how long
	// after Resume the first KIP-848 session ends (restoredSession).
	unrevoked    []*consumerMember
	firstSession time.Duration
}

// resumeClocks (input Resume) starts the clocks of a group that Rebuild
// returned: every
// member's session (with the takeover grace, and spread:
// restoredDeadline), and a revoking member's rebalance timeout, start at
// now, so that a fail-over expels nobody (Restore). Resume does nothing
// to a group that Rebuild made from no records, or once it has run.
func (g *Group) resumeClocks(now time.Time) {
	if g.resume == nil {
		return
	}
	g.log.restoredAt = now
	switch g.typ {
	case Classic:
		g.resumeClassic(now)
	case Consumer:
		g.resumeConsumer(now, g.resume.assigning)
	}
	g.resume = nil
}

// restoredEpoch is the epoch a restored group continues from: its
// GroupRecord's, raised to every member epoch and token its records hold.
func restoredEpoch(gr *GroupRecord, rg *recordGroup) int32 {
	e := max(gr.Epoch, 0)
	raise := func(t epoch.Token) {
		if t > epoch.Token(e) && t <= epoch.Token(1<<31-1) {
			e = int32(t)
		}
	}
	for _, a := range rg.assignments {
		e = max(e, a.MemberEpoch, a.PrevEpoch)
		for _, p := range a.Owned {
			raise(p.Token)
		}
	}
	for _, o := range rg.offsets {
		raise(o.Token)
	}
	return e
}

// checkAssignmentRecord checks that an AssignmentRecord's sets are sorted
// partition sets, as the group keeps them.
func checkAssignmentRecord(a *AssignmentRecord) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: group %q member %q: %s", ErrCorruptRecords, a.Group, a.MemberID, what)
	}
	for i := 1; i < len(a.Owned); i++ {
		if compareOwned(a.Owned[i-1], a.Owned[i]) >= 0 {
			return bad("owned partitions are not a sorted set")
		}
	}
	for _, s := range [][]TopicPartition{a.Pending, a.Revoking, a.Target} {
		for i := 1; i < len(s); i++ {
			if compareTP(s[i-1], s[i]) >= 0 {
				return bad("a partition set is not sorted")
			}
		}
	}
	for _, tp := range a.Revoking {
		if !containsOwned(a.Owned, tp) {
			return bad("a revoking partition is not owned")
		}
	}
	for _, p := range a.Owned {
		if p.Partition < 0 || p.Token < epoch.None {
			return bad("a partition or token is negative")
		}
	}
	return nil
}

// checkTargets checks that a GroupRecord's Targets are sorted by member,
// once each, and that each target is a sorted partition set. A member it
// names that is no longer in the group (one removed since) is ignored.
func checkTargets(gr *GroupRecord) error {
	if len(gr.Targets) > 0 && gr.Type != Consumer {
		return fmt.Errorf("%w: group %q of type %v has targets", ErrCorruptRecords, gr.Group, gr.Type)
	}
	for i, t := range gr.Targets {
		if i > 0 && gr.Targets[i-1].MemberID >= t.MemberID {
			return fmt.Errorf("%w: group %q: the targets are not sorted by member", ErrCorruptRecords, gr.Group)
		}
		for j := 1; j < len(t.Target); j++ {
			if compareTP(t.Target[j-1], t.Target[j]) >= 0 {
				return fmt.Errorf("%w: group %q member %q: the target is not a sorted set", ErrCorruptRecords, gr.Group, t.MemberID)
			}
		}
	}
	return nil
}

// claim is one member's claim on a partition in the restored records.
type claim struct {
	member string
	token  epoch.Token
}

// resolveClaims decides who owns each partition that the records give to
// more than one member. That happens only if the store holds part of a
// Ready (a write too large for one transaction, cut short): the group
// releases a partition before it gives it away, and gives it under a
// higher token, so the claim with the highest token is the later one and
// the others were released. Two claims under one token cannot come from
// the group and are corrupt. It returns, per member, the partitions it
// lost.
func resolveClaims(name string, claims map[TopicPartition][]claim) (map[string][]TopicPartition, error) {
	lost := make(map[string][]TopicPartition)
	for tp, cs := range claims {
		if len(cs) < 2 {
			continue
		}
		best := 0
		for i, c := range cs {
			if c.token > cs[best].token {
				best = i
			}
		}
		for i, c := range cs {
			switch {
			case i == best:
			case c.token == cs[best].token:
				return nil, fmt.Errorf("%w: group %q: %s[%d] is owned by %q and %q under token %v",
					ErrCorruptRecords, name, tp.Topic, tp.Partition, c.member, cs[best].member, c.token)
			default:
				lost[c.member] = append(lost[c.member], tp)
			}
		}
	}
	for _, tps := range lost {
		slices.SortFunc(tps, compareTP)
	}
	return lost, nil
}

// ownedClaims collects every member's owned partitions, for resolveClaims.
func ownedClaims(rg *recordGroup) map[TopicPartition][]claim {
	claims := make(map[TopicPartition][]claim)
	for id, a := range rg.assignments {
		for _, p := range a.Owned {
			tp := TopicPartition{p.Topic, p.Partition}
			claims[tp] = append(claims[tp], claim{id, p.Token})
		}
	}
	return claims
}
