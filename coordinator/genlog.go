package coordinator

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

// The generation log answers the operator's "why did the group rebalance,
// and what did it cost": every new epoch of a group gets an entry with the
// reasons, the members who came and went, each partition that changed
// owner with its old and new token, how that compares with the fewest
// moves the change needed, and, once the hand-off is over, how long the
// moved partitions went without an owner.
//
// Entries go out as GenerationRecords in Ready.Persist, so they are as
// durable as the state they explain and written by the same pipelined
// writes. Restore never reads them (a store keeps them apart from what it
// loads), so a fail-over loses only the hand-off timing of the entries
// that were still open; the next entry notes the fail-over instead.

// DefaultGenerationLogRetention is how many entries a group's log keeps
// when Config.GenerationLogRetention is zero.
const DefaultGenerationLogRetention = 1000

// GenerationRecord is one entry of a group's generation log. A group
// writes it when its epoch changes, and again under the same (Group, Epoch)
// when something of it is learnt later (a classic group's moves at sync,
// the hand-off's end): a store keeps the newest record per (Group, Epoch).
type GenerationRecord struct {
	Group string
	Epoch int32
	Type  GroupType
	// Time is when the epoch began (the time given to Step).
	Time time.Time
	// Reason says why, as the group's events name it (member-joined,
	// member-left, member-expired, subscription-changed, topics-changed,
	// drain, admin-removal, ...); several are joined with commas.
	Reason string
	// Members is the member count at the new epoch; Joined and Left are
	// the members added and removed since the previous entry, sorted.
	Members int
	Joined  []string
	Left    []string
	// Moves are the partitions whose owner changes, sorted.
	Moves []Move
	// MinMoves is the fewest owner changes any balanced assignment of the
	// new membership needed, from the ownership at the start of the epoch;
	// -1 when the members' subscriptions differ (or a classic group's
	// cannot be read), where no single figure is meaningful.
	MinMoves int
	// Assigned is set once the moves are known: at once for KIP-848, at
	// the leader's SyncGroup for classic groups.
	Assigned bool
	Handoff  Handoff
	// AfterFailover is when the group was restored from the store (a
	// coordinator fail-over or restart, or a reload after a failed
	// write), if that was within one session timeout before the epoch
	// began: members that did not follow the coordinator in time explain
	// such an entry.
	AfterFailover time.Time
	// Trim tells the store it may drop this group's entries at or below
	// that epoch (the log's retention).
	Trim int32
}

// Move is one partition changing owner.
type Move struct {
	Topic     string
	Partition int32
	// From is the owner before ("" if it had none); OldToken its token.
	From     string
	OldToken epoch.Token
	// To is the new owner ("" if nobody is assigned it any more);
	// NewToken the epoch at which it is given (a KIP-848 token is fixed at
	// or above it when the owner reports it).
	To       string
	NewToken epoch.Token
}

// Handoff is how the moves of an entry played out: each moved partition
// is unowned from its release by the old owner (or the start of the epoch,
// if it had none) until the coordinator grants it to the new owner.
type Handoff struct {
	// Done is set when every move ended: granted, superseded by a later
	// epoch's move, or dropped with its topic.
	Done bool
	// Completed is when the last move ended.
	Completed time.Time
	// Granted counts the moves that ended with the grant; Superseded those
	// a later epoch moved again before the grant (counted there).
	Granted    int
	Superseded int
	// Unowned is the sum over granted moves of the time each partition had
	// no owner (partition-time); MaxUnowned the longest of them.
	Unowned    time.Duration
	MaxUnowned time.Duration
}

func (*GenerationRecord) record() {}

// genLog is a group's bookkeeping for its generation log.
type genLog struct {
	// joined and left collect membership changes since the last entry.
	joined, left map[string]struct{}
	// reasons collects why a classic rebalance runs, from its start to the
	// new generation.
	reasons []string
	// open are the entries whose hand-off is in progress, by epoch;
	// moving the partitions on their way, with the entry they belong to.
	open   map[int32]*openEntry
	moving map[TopicPartition]*movingPartition
	// movingTo lists, by new owner, the partitions moving to it (entries
	// may be stale: moving says whether a move is still on), so that a
	// member that leaves ends its moves without a walk over every move.
	movingTo map[string][]TopicPartition
	// released is when each partition that has no owner lost its last
	// one: a move that starts later (a cooperative rebalance's second
	// generation) counts its unowned time from then.
	released map[TopicPartition]time.Time
	// restoredAt is when Restore rebuilt the group (zero if never).
	restoredAt time.Time
}

type openEntry struct {
	rec     GenerationRecord
	pending int
}

type movingPartition struct {
	epoch int32
	to    string
	// unownedSince is when the partition lost its owner (zero while the
	// old owner still holds it).
	unownedSince time.Time
}

func (l *genLog) init() {
	l.joined = make(map[string]struct{})
	l.left = make(map[string]struct{})
	l.open = make(map[int32]*openEntry)
	l.moving = make(map[TopicPartition]*movingPartition)
	l.movingTo = make(map[string][]TopicPartition)
	l.released = make(map[TopicPartition]time.Time)
}

// noteMember records a membership change for the next entry.
func (l *genLog) noteMember(id string, joined bool) {
	if joined {
		if _, ok := l.left[id]; ok {
			delete(l.left, id) // left and came back under its ID (static)
			return
		}
		l.joined[id] = struct{}{}
		return
	}
	if _, ok := l.joined[id]; ok {
		delete(l.joined, id) // came and went between two entries
		return
	}
	l.left[id] = struct{}{}
}

// beginGeneration opens the log entry of the epoch the group just moved
// to. moves may be nil when they are not known yet (classic, until sync).
func (g *Group) beginGeneration(now time.Time, reason string, members int, minMoves int) *openEntry {
	l := &g.log
	rec := GenerationRecord{
		Group: g.name, Epoch: g.epoch, Type: g.typ, Time: now, Reason: reason,
		Members: members, MinMoves: minMoves,
		Joined: sortedKeys(l.joined), Left: sortedKeys(l.left),
	}
	clear(l.joined)
	clear(l.left)
	if !l.restoredAt.IsZero() && now.Sub(l.restoredAt) <= g.maxSessionTimeout() {
		rec.AfterFailover = l.restoredAt
	}
	keep := int32(g.cfg.GenerationLogRetention)
	if keep == 0 {
		keep = DefaultGenerationLogRetention
	}
	if g.epoch > keep {
		rec.Trim = g.epoch - keep
	}
	e := &openEntry{rec: rec}
	l.open[g.epoch] = e
	g.event(Event{Kind: EventNewGeneration, Reason: reason, Members: members})
	return e
}

// setMoves fills e with its moves: each partition of to whose owner (or,
// if unowned, last owner) is not its new owner. The partitions still held
// by their old owner wait for the release; the others are unowned from
// now. It persists the entry, which stays open until its moves end.
func (g *Group) setMoves(now time.Time, e *openEntry, moves []Move) {
	l := &g.log
	slices.SortFunc(moves, func(a, b Move) int { return compareTP(a.tp(), b.tp()) })
	e.rec.Moves = moves
	e.rec.Assigned = true
	for _, m := range moves {
		tp := m.tp()
		if prev, ok := l.moving[tp]; ok {
			g.endMove(now, tp, prev, false)
		}
		if m.To == "" {
			continue // unassigned: nothing to wait for
		}
		mp := &movingPartition{epoch: e.rec.Epoch, to: m.To}
		if _, owned := g.owners.owner(tp); !owned {
			mp.unownedSince = now
			if t, ok := l.released[tp]; ok {
				mp.unownedSince = t
			}
		}
		l.moving[tp] = mp
		l.movingTo[m.To] = append(l.movingTo[m.To], tp)
		e.pending++
	}
	g.emitEntry(now, e)
}

func (m Move) tp() TopicPartition { return TopicPartition{m.Topic, m.Partition} }

// emitEntry persists e as it is now, and closes it if no move is pending.
func (g *Group) emitEntry(now time.Time, e *openEntry) {
	if e.pending == 0 && e.rec.Assigned {
		e.rec.Handoff.Done = true
		if e.rec.Handoff.Completed.IsZero() {
			e.rec.Handoff.Completed = now
		}
		delete(g.log.open, e.rec.Epoch)
	}
	rec := e.rec // records are immutable once handed out: persist a copy
	g.persist(&rec)
}

// endMove ends the move of tp: granted (the new owner got it) or
// superseded (a later epoch moves it again, or it stopped being assigned).
func (g *Group) endMove(now time.Time, tp TopicPartition, mp *movingPartition, granted bool) {
	delete(g.log.moving, tp)
	if len(g.log.moving) == 0 && len(g.log.movingTo) > 0 {
		// Nothing moves: drop the stale lists at once (a new map: a
		// cleared one keeps its largest size).
		g.log.movingTo = make(map[string][]TopicPartition)
	}
	e, ok := g.log.open[mp.epoch]
	if !ok {
		return
	}
	e.pending--
	h := &e.rec.Handoff
	if granted {
		h.Granted++
		var d time.Duration
		if !mp.unownedSince.IsZero() {
			d = now.Sub(mp.unownedSince)
		}
		h.Unowned += d
		h.MaxUnowned = max(h.MaxUnowned, d)
		g.event(Event{Kind: EventPartitionHandedOff, MemberID: mp.to, Partition: tp, Duration: d})
	} else {
		h.Superseded++
	}
	if e.pending == 0 {
		h.Completed = now
		g.emitEntry(now, e)
	}
}

// memberGone ends the moves to a member that left before their grant:
// they are superseded (the next epoch moves those partitions elsewhere).
func (g *Group) memberGone(id string) {
	l := &g.log
	tps := l.movingTo[id]
	delete(l.movingTo, id)
	slices.SortFunc(tps, compareTP) // entries go out in a deterministic order
	for _, tp := range tps {
		if mp, ok := l.moving[tp]; ok && mp.to == id {
			g.endMove(g.now, tp, mp, false)
		}
	}
}

// ownerChanged is called by the ownership table on every grant and
// release, to time the hand-offs in flight.
func (g *Group) ownerChanged(tp TopicPartition, member string, granted bool) {
	if granted {
		delete(g.log.released, tp)
	} else {
		g.log.released[tp] = g.now
	}
	mp, ok := g.log.moving[tp]
	if !ok {
		return
	}
	if !granted {
		if mp.unownedSince.IsZero() {
			mp.unownedSince = g.now
		}
		return
	}
	// Granted to its new owner, or to someone else: a later epoch's move
	// would have replaced this one, so either way the hand-off is over.
	g.endMove(g.now, tp, mp, member == mp.to)
}

// maxSessionTimeout is the longest session of the group's members.
func (g *Group) maxSessionTimeout() time.Duration {
	d := g.cfg.ConsumerSessionTimeout
	if g.typ == Classic {
		for _, m := range g.classic.members {
			d = max(d, m.session)
		}
	}
	return d
}

// minMoves returns the fewest owner changes that reach an assignment of
// partitions over members balanced within one, from what the members hold
// now (their targets, for KIP-848): members keep as much as they can, and
// the larger quotas go to those holding most. byCount is a histogram (size
// -> members holding that many), so the cost is in the number of distinct
// sizes, not of members.
func minMoves(partitions, members int, byCount map[int]int) int {
	if members <= 0 || partitions <= 0 {
		return 0
	}
	q, r := partitions/members, partitions%members
	stay, seats := 0, members
	counts := slices.Sorted(maps.Keys(byCount))
	for i := len(counts) - 1; i >= 0 && seats > 0; i-- {
		c := counts[i]
		k := min(byCount[c], seats) // owners beyond the members keep nothing
		big := min(k, r)            // the larger quotas go to the largest owners
		stay += big*min(c, q+1) + (k-big)*min(c, q)
		r -= big
		seats -= k
	}
	return partitions - stay
}

func sortedKeys(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// joinReasons joins distinct reasons in their order of arrival.
func joinReasons(rs []string) string {
	var out []string
	for _, r := range rs {
		for _, part := range strings.Split(r, ",") {
			if part != "" && !slices.Contains(out, part) {
				out = append(out, part)
			}
		}
	}
	return strings.Join(out, ",")
}
