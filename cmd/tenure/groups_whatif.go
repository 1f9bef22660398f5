package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/sim"
	"github.com/tenure-dev/tenure/sim/tune"
)

func groupsWhatIf() groupsSubcommand {
	return groupsSubcommand{
		name: "what-if",
		args: []string{"GROUP"},
		help: "what one change would do, from the group's live state:\n" +
			"the moves its assignor makes (and the fewest possible),\n" +
			"the balance, and the unowned partition-seconds the\n" +
			"simulator expects. The change is one of\n" +
			"  --remove MEMBER   members leave (and, apart, crash)\n" +
			"  --add N           N members join\n" +
			"  --heartbeat D and/or --session D\n" +
			"                    a timing change: a member's crash\n" +
			"                    and tune's risk figures, now and\n" +
			"                    proposed\n" +
			"The protocol does not show the group's timing: give it\n" +
			"with --current-heartbeat and --current-session.",
		reads: groupsKafkaFlags("remove"),
		setup: setupWhatIf,
	}
}

// whatIfFlags are the flags of `groups what-if`.
type whatIfFlags struct {
	remove       *listFlag // shared with drain (groupsCLI)
	add          *int
	heartbeat    *time.Duration
	session      *time.Duration
	curHeartbeat *time.Duration
	curSession   *time.Duration
	assignor     *string
	seeds        *int
	seed         *uint64
	riskDuration *time.Duration
}

// listFlag collects a repeatable flag whose values may also be
// comma-separated lists.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	items := splitList(v)
	if len(items) == 0 {
		return fmt.Errorf("empty list")
	}
	*l = append(*l, items...)
	return nil
}

func setupWhatIf(fs *flag.FlagSet) groupsRun {
	f := &whatIfFlags{
		add:          fs.Int("add", 0, "what-if: `N` new members join"),
		heartbeat:    fs.Duration("heartbeat", 0, "what-if: the proposed heartbeat `interval` (the coordinator's --consumer-heartbeat-interval)"),
		session:      fs.Duration("session", 0, "what-if: the proposed session `timeout` (the coordinator's --consumer-session-timeout)"),
		curHeartbeat: fs.Duration("current-heartbeat", 0, "what-if: the group's heartbeat `interval` now (default: tenure serve's 1s for a KIP-848 group, 3s for a classic one)"),
		curSession:   fs.Duration("current-session", 0, "what-if: the group's session `timeout` now (default: tenure serve's 20s for a KIP-848 group, 45s for a classic one)"),
		assignor:     fs.String("assignor", "", "what-if: run this tenure `assignor` ("+strings.Join(assignor.Names(), ", ")+") instead of the group's own or its closest counterpart"),
		seeds:        fs.Int("seeds", 3, "what-if: run each simulation on `N` seeds"),
		seed:         fs.Uint64("seed", 1, "what-if: the first `seed`; the same seeds give the same figures"),
		riskDuration: fs.Duration("risk-duration", 0, "what-if: simulated time of each run of tune's scenario mix, for a timing change (default: each scenario's own, 10m)"),
	}
	f.remove = fs.Lookup("remove").Value.(*listFlag)
	return f.run
}

// whatIfKind is the one change a what-if run considers.
type whatIfKind string

const (
	changeRemove whatIfKind = "remove"
	changeAdd    whatIfKind = "add"
	changeTiming whatIfKind = "timing"
)

// kind checks the flags and returns the change they ask for.
func (f *whatIfFlags) kind() (whatIfKind, error) {
	var kinds []whatIfKind
	if len(*f.remove) > 0 {
		kinds = append(kinds, changeRemove)
	}
	if *f.add != 0 {
		kinds = append(kinds, changeAdd)
	}
	if *f.heartbeat != 0 || *f.session != 0 {
		kinds = append(kinds, changeTiming)
	}
	switch {
	case *f.add < 0:
		return "", usagef("--add %d: want a positive number of members", *f.add)
	case *f.heartbeat < 0 || *f.session < 0 || *f.curHeartbeat < 0 || *f.curSession < 0 || *f.riskDuration < 0:
		return "", usagef("--heartbeat, --session, their --current- forms and --risk-duration must be positive")
	case *f.seeds < 1 || *f.seeds > 100:
		return "", usagef("--seeds %d: want 1 to 100", *f.seeds)
	case *f.seed < 1:
		return "", usagef("--seed must be at least 1")
	case *f.riskDuration != 0 && (len(kinds) != 1 || kinds[0] != changeTiming):
		return "", usagef("--risk-duration applies to a timing change (--heartbeat, --session) only")
	case len(kinds) == 0:
		return "", usagef("what-if needs a change: --remove MEMBER, --add N, or --heartbeat D and/or --session D")
	case len(kinds) > 1:
		return "", usagef("what-if takes one kind of change at a time, got %s and %s", kinds[0], kinds[1])
	}
	return kinds[0], nil
}

// whatIf is the result of `groups what-if`.
type whatIf struct {
	Group string `json:"group"`
	// Type is "consumer" (KIP-848) or "classic".
	Type  string `json:"type"`
	State string `json:"state"`
	// Epoch is a KIP-848 group's epoch; null for a classic group.
	Epoch  *int32       `json:"epoch"`
	Change whatIfChange `json:"change"`
	// Assignor is the assignor that computed the moves and ran in the
	// simulation.
	Assignor      whatIfAssignor `json:"assignor"`
	MembersBefore int            `json:"members_before"`
	MembersAfter  int            `json:"members_after"`
	Partitions    int            `json:"partitions"`
	// Moves are the partitions whose owner the change moves, by topic and
	// partition; MoveCount is their number (assignor.Moves).
	Moves     []partitionMove `json:"moves"`
	MoveCount int             `json:"move_count"`
	// FewestMoves is the fewest moves any assignment balanced within one
	// could make; null if the members do not all subscribe alike.
	FewestMoves *int `json:"fewest_moves"`
	// MovesWithoutChange is what the assignor moves with the membership
	// as it is: not zero if the live assignment is not what the assignor
	// would keep (a reconciliation under way, another assignor).
	MovesWithoutChange int              `json:"moves_without_change"`
	BalanceBefore      balanceOf        `json:"balance_before"`
	BalanceAfter       balanceOf        `json:"balance_after"`
	Members            []memberChange   `json:"members"`
	Timing             whatIfTiming     `json:"timing"`
	Simulation         whatIfSimulation `json:"simulation"`
	// Risk is tune's figures for the current and the proposed timing; for
	// timing changes only.
	Risk *riskReport `json:"risk"`
	// Assumptions says what the figures take for granted.
	Assumptions []string `json:"assumptions"`

	prev assignor.Assignment // who holds what now
}

type whatIfChange struct {
	Kind whatIfKind `json:"kind"`
	// Remove lists the member IDs that leave or crash.
	Remove []string `json:"remove"`
	// Add is how many members join.
	Add int `json:"add"`
}

type whatIfAssignor struct {
	// Name is the tenure assignor that ran.
	Name string `json:"name"`
	// GroupAssignor is the assignor the group names: the server-side
	// assignor (KIP-848) or the protocol the leader chose (classic).
	GroupAssignor string `json:"group_assignor"`
	// Same says whether Name is the group's own assignor rather than its
	// closest counterpart.
	Same bool `json:"same"`
	// Note says how Name stands for the group's assignor; null if it is
	// the group's server-side assignor.
	Note *string `json:"note"`
}

type partitionMove struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// balanceOf is the spread of partitions over members; Imbalance is
// assignor.Imbalance.
type balanceOf struct {
	Members   int `json:"members"`
	Min       int `json:"min"`
	Max       int `json:"max"`
	Imbalance int `json:"imbalance"`
}

// memberChange is one member before and after the change.
type memberChange struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	// Status is "stays", "removed" or "added".
	Status     string            `json:"status"`
	Before     int               `json:"before"`
	After      int               `json:"after"`
	Partitions []topicPartitions `json:"partitions"`
}

type whatIfTiming struct {
	Current timingOf `json:"current"`
	// CurrentFrom is "flags" if --current-heartbeat or --current-session
	// gave the current timing, else "defaults".
	CurrentFrom string    `json:"current_from"`
	Proposed    *timingOf `json:"proposed"`
}

type timingOf struct {
	HeartbeatS float64 `json:"heartbeat_s"`
	SessionS   float64 `json:"session_s"`
	RebalanceS float64 `json:"rebalance_s"`
	MarginS    float64 `json:"margin_s"`
	MaxDrift   float64 `json:"max_drift"`
}

func timingJSON(t sim.Timing) timingOf {
	return timingOf{t.HeartbeatInterval.Seconds(), t.SessionTimeout.Seconds(), t.RebalanceTimeout.Seconds(), t.Margin.Seconds(), t.MaxDrift}
}

type whatIfSimulation struct {
	// Seeds are the seeds of the runs (see Assumptions for how they were
	// chosen).
	Seeds []uint64 `json:"seeds"`
	// ChangeAtS is when the change happens in each run.
	ChangeAtS float64 `json:"change_at_s"`
	// Scenario is the group without the change, with the current timing,
	// in the scenario language (`tenure sim --scenario FILE` runs it).
	Scenario string       `json:"scenario"`
	Outcomes []simOutcome `json:"outcomes"`
}

func (f *whatIfFlags) run(ctx context.Context, cl groupsClient, args []string) (result, error) {
	kind, err := f.kind()
	if err != nil {
		return nil, err
	}
	rctx, cancel := cl.bound(ctx)
	st, err := readGroupState(rctx, cl.adm, args[0])
	cancel()
	if err != nil {
		return nil, err
	}
	d := st.Described
	if len(st.Members) == 0 {
		return nil, fmt.Errorf("group %q has no members: there is nothing to change", d.Group)
	}
	if len(st.Topics) == 0 {
		return nil, fmt.Errorf("group %q: its members subscribe to no existing topic", d.Group)
	}
	a, asg, err := groupAssignor(st, *f.assignor)
	if err != nil {
		return nil, err
	}
	w := &whatIf{
		Group: d.Group, Type: d.Type, State: d.State, Epoch: d.Epoch,
		Change: whatIfChange{Kind: kind, Remove: []string{}}, Assignor: asg,
		Partitions: st.partitions(), Assumptions: []string{},
	}
	if asg.Note != nil {
		w.assume("assignor: %s", *asg.Note)
	}
	if len(st.Missing) > 0 {
		w.assume("subscribed topics that do not exist are left out: %s", strings.Join(st.Missing, ", "))
	}
	if d.reconciling {
		w.assume("the group is reconciling: moves count from each member's target assignment, which is what the coordinator's assignor takes members to hold")
	}
	after, err := w.change(st, f)
	if err != nil {
		return nil, err
	}
	if err := w.assign(a, st, after); err != nil {
		return nil, err
	}
	if err := w.simulate(ctx, st, a.Name(), f); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *whatIf) assume(format string, args ...any) {
	w.Assumptions = append(w.Assumptions, fmt.Sprintf(format, args...))
}

// change returns the members after the change, as the assignor takes
// them.
func (w *whatIf) change(st *groupState, f *whatIfFlags) ([]assignor.Member, error) {
	after := st.input().Members
	switch w.Change.Kind {
	case changeRemove:
		gone, err := resolveMembers(st, *f.remove)
		if err != nil {
			return nil, err
		}
		if len(gone) == len(st.Members) {
			return nil, fmt.Errorf("--remove takes every member of %q: nobody would own its partitions", w.Group)
		}
		w.Change.Remove = gone
		after = slices.DeleteFunc(after, func(m assignor.Member) bool { return slices.Contains(gone, m.ID) })
	case changeAdd:
		w.Change.Add = *f.add
		topics, alike := commonSubscription(st)
		if !alike {
			w.assume("the members subscribe differently; the new members subscribe to every topic any member does: %s", strings.Join(topics, ", "))
		}
		for i := range *f.add {
			after = append(after, assignor.Member{ID: whatIfMemberID(st, i+1), Topics: topics})
		}
		w.assume("new members are named new-1, new-2, ...; a real member's ID decides which partitions it gets (uniform deals free partitions in member ID order), not how many")
	}
	return after, nil
}

// assign runs the assignor on the members after the change, with what
// each holds now, and on the members as they are, and fills in the moves
// and the balance.
func (w *whatIf) assign(a assignor.Assignor, st *groupState, after []assignor.Member) error {
	in := st.input()
	steady, err := a.Assign(in)
	if err != nil {
		return fmt.Errorf("assignor %s on the live state: %w", a.Name(), err)
	}
	next, err := a.Assign(assignor.Input{Members: after, Topics: in.Topics})
	if err != nil {
		return fmt.Errorf("assignor %s on the changed group: %w", a.Name(), err)
	}
	w.prev = st.held()
	w.MembersBefore, w.MembersAfter = len(in.Members), len(after)
	w.Moves = movesBetween(w.prev, next)
	w.MoveCount = assignor.Moves(w.prev, next)
	w.MovesWithoutChange = assignor.Moves(w.prev, steady)
	if alike(after) {
		n := fewestMoves(w.prev, next, w.Partitions)
		w.FewestMoves = &n
	}
	w.BalanceBefore, w.BalanceAfter = balance(w.prev), balance(next)
	w.Members = memberChanges(st, w.prev, next)
	if w.MovesWithoutChange > 0 {
		w.assume("even without the change the assignor moves %d partitions of the live assignment; the moves shown include them", w.MovesWithoutChange)
	}
	return nil
}

// simulate runs the change in the simulator on a scenario of the group:
// for a removal a graceful leave and a crash, for an addition a join, for
// a timing change a member's crash with either timing and tune's scenario
// mix.
func (w *whatIf) simulate(ctx context.Context, st *groupState, assignorName string, f *whatIfFlags) error {
	static := true
	for _, m := range st.Members {
		static = static && m.InstanceID != ""
	}
	cur, fromFlags := currentTiming(w.Type, *f.curHeartbeat, *f.curSession)
	w.Timing = whatIfTiming{Current: timingJSON(cur), CurrentFrom: "defaults"}
	if fromFlags {
		w.Timing.CurrentFrom = "flags"
	}
	if err := checkTiming(cur, static); err != nil {
		return usagef("the current timing (heartbeat %v, session %v) is unsafe: %v", cur.HeartbeatInterval, cur.SessionTimeout, err)
	}
	if *f.curHeartbeat == 0 || *f.curSession == 0 {
		w.assume("timing: heartbeat %v, session %v: the protocol does not show a group's timing, so what --current-heartbeat and --current-session do not give is %s",
			cur.HeartbeatInterval, cur.SessionTimeout, defaultTimingSource(w.Type))
	}
	w.assume("timing: rebalance timeout %v, suspect margin %v, clock drift %g, a heartbeat's request timeout one interval (the simulator's defaults; the margin barely matters to these figures)",
		cur.RebalanceTimeout, cur.Margin, cur.MaxDrift)
	if w.Type == "classic" {
		w.assume("the simulator runs KIP-848 members: a classic group's rebalance (join and sync, and eager revocation for eager protocols) takes longer than simulated")
	}
	g := simGroup{members: len(st.Members), static: static, assignor: assignorName, topics: st.Topics}
	w.assume("simulated: the group's %d member(s) (m1 to m%d, static membership %v) subscribing to %s and starting at random instants of the first heartbeat interval; the change %v later; "+
		"handlers release and start partitions at once; network delay lognormal (median 1ms, p99 5ms), no loss, no pauses",
		g.members, g.members, static, topicList(st.Topics), whatIfAt)

	seeds := make([]uint64, *f.seeds)
	for i := range seeds {
		seeds[i] = *f.seed + uint64(i)
	}
	w.Simulation = whatIfSimulation{ChangeAtS: whatIfAt.Seconds(), Scenario: g.source(cur, nil, whatIfEnd(cur)), Outcomes: []simOutcome{}}
	runner := newSimRunner(g)
	measure := func(event, timing string, t sim.Timing, actions ...string) error {
		o, err := runner.measure(event, timing, t, actions, seeds)
		if err != nil {
			return err
		}
		w.Simulation.Outcomes = append(w.Simulation.Outcomes, o)
		return nil
	}
	at := whatIfAt.String()
	switch w.Change.Kind {
	case changeRemove:
		k, live := len(w.Change.Remove), 0
		for _, id := range w.Change.Remove {
			live += len(w.prev[id])
		}
		newest := g.newest(k)
		matched, tried, err := runner.matchSeeds(cur, *f.seed, *f.seeds, k, live, 20*(*f.seeds))
		if err != nil {
			return err
		}
		if len(matched) > 0 {
			seeds = matched
			w.assume("seeds: %s, those of the %d tried from %d on in which the simulated members that leave (the newest: %s) hold %d partitions, as the live ones do",
				joinSeeds(seeds), tried, *f.seed, strings.Join(newest, ", "), live)
		} else {
			w.assume("seeds: in none of the %d tried from %d on do the simulated members that leave (the newest: %s) hold %d partitions, as the live ones do; the figures are for what they hold (affected partitions)",
				tried, *f.seed, strings.Join(newest, ", "), live)
		}
		if static {
			w.assume("a graceful leave is a permanent one (LeaveGroup, or member epoch -1); a static member that closes leaves temporarily, and its partitions wait for the session timeout as after a crash")
		}
		if err := measure("leave", "current", cur, fmt.Sprintf("scale-in at=%s n=%d", at, k)); err != nil {
			return err
		}
		var crashes []string
		for _, m := range newest {
			crashes = append(crashes, fmt.Sprintf("crash member=%s at=%s host=true", m, at))
		}
		w.assume("a crash is a crash of the member's host, which closes no connection: noticed at the session timeout (a crashed process's connections close, and the coordinator's connection-loss grace expels it sooner)")
		if err := measure("crash", "current", cur, crashes...); err != nil {
			return err
		}
	case changeAdd:
		if err := measure("join", "current", cur, fmt.Sprintf("scale-out at=%s n=%d", at, w.Change.Add)); err != nil {
			return err
		}
	case changeTiming:
		prop := cur
		if *f.heartbeat > 0 {
			prop.HeartbeatInterval = *f.heartbeat
		}
		if *f.session > 0 {
			prop.SessionTimeout = *f.session
		}
		if prop == cur {
			return usagef("the proposed timing (heartbeat %v, session %v) is the current one", prop.HeartbeatInterval, prop.SessionTimeout)
		}
		if err := checkTiming(prop, static); err != nil {
			return usagef("the proposed timing (heartbeat %v, session %v) is unsafe: %v", prop.HeartbeatInterval, prop.SessionTimeout, err)
		}
		pj := timingJSON(prop)
		w.Timing.Proposed = &pj
		crash := fmt.Sprintf("crash member=m%d at=%s host=true", g.members, at)
		if err := measure("crash", "current", cur, crash); err != nil {
			return err
		}
		if err := measure("crash", "proposed", prop, crash); err != nil {
			return err
		}
		var err error
		if w.Risk, err = g.risk(ctx, cur, prop, seeds, *f.riskDuration); err != nil {
			return err
		}
		dur := "each scenario's own duration"
		if *f.riskDuration > 0 {
			dur = f.riskDuration.String() + " each"
		}
		w.assume("risk: tune's scenario mix, each resized to %d member(s) and one topic of %d partitions, with the group's assignor and static membership %v, %s; actions on members a small group lacks do nothing",
			g.members, w.Partitions, static, dur)
	}
	w.Simulation.Seeds = seeds
	return nil
}

// groupAssignor returns the tenure assignor that stands for the group's:
// the one it names, its closest counterpart, or the one --assignor names.
func groupAssignor(st *groupState, override string) (assignor.Assignor, whatIfAssignor, error) {
	own := st.Assignor
	if override != "" {
		a, ok := assignor.ByName(override)
		if !ok {
			return nil, whatIfAssignor{}, usagef("--assignor %q: want one of %s", override, strings.Join(assignor.Names(), ", "))
		}
		return a, whatIfAssignor{Name: a.Name(), GroupAssignor: own, Same: own == override, Note: ptr("tenure's " + override + ", as --assignor asks")}, nil
	}
	if a, ok := assignor.ByName(own); ok {
		var note *string
		if st.Described.Type == "classic" {
			note = ptr("tenure's " + own + ", the protocol the group's leader chose")
		}
		return a, whatIfAssignor{Name: own, GroupAssignor: own, Same: true, Note: note}, nil
	}
	switch own {
	case "cooperative-sticky", "sticky":
		return assignor.Uniform(), whatIfAssignor{Name: assignor.UniformName, GroupAssignor: own, Note: ptr("tenure's uniform, the closest to the client's " + own +
			": both are sticky and balanced within one and move the fewest partitions balance allows when members subscribe alike; which partitions move may differ")}, nil
	case "roundrobin":
		return assignor.Uniform(), whatIfAssignor{Name: assignor.UniformName, GroupAssignor: own, Note: ptr("tenure's uniform, balanced within one as roundrobin is; " +
			"roundrobin is not sticky and deals every partition afresh, so the client moves more partitions than shown")}, nil
	case "":
		return nil, whatIfAssignor{}, fmt.Errorf("group %q names no assignor yet (state %s): pass --assignor", st.Described.Group, st.Described.State)
	}
	return nil, whatIfAssignor{}, fmt.Errorf("group %q uses the assignor %q, which has no tenure counterpart: pass --assignor (%s)",
		st.Described.Group, own, strings.Join(assignor.Names(), ", "))
}

// currentTiming is the group's timing: the flags' values, and tenure
// serve's defaults (KIP-848) or the Kafka clients' defaults (classic: the
// member asks for its session in JoinGroup) for what they leave out.
func currentTiming(groupType string, heartbeat, session time.Duration) (sim.Timing, bool) {
	t := sim.DefaultTiming()
	if groupType == "classic" {
		t.HeartbeatInterval, t.SessionTimeout = 3*time.Second, 45*time.Second
	}
	if heartbeat > 0 {
		t.HeartbeatInterval = heartbeat
	}
	if session > 0 {
		t.SessionTimeout = session
	}
	return t, heartbeat > 0 || session > 0
}

func defaultTimingSource(groupType string) string {
	if groupType == "classic" {
		return "the Kafka clients' default (heartbeat 3s, session 45s)"
	}
	return "tenure serve's default (heartbeat 1s, session 20s)"
}

// resolveMembers maps member or instance IDs to member IDs, sorted and
// without duplicates; an unknown one is an error that lists the members.
func resolveMembers(st *groupState, names []string) ([]string, error) {
	var ids []string
	for _, name := range names {
		i := slices.IndexFunc(st.Members, func(m stateMember) bool { return m.ID == name || m.InstanceID != "" && m.InstanceID == name })
		if i < 0 {
			var known []string
			for _, m := range st.Members {
				known = append(known, m.ID)
			}
			const most = 10
			list := strings.Join(known[:min(len(known), most)], ", ")
			if len(known) > most {
				list += fmt.Sprintf(", ... (%d in all)", len(known))
			}
			return nil, fmt.Errorf("--remove %s: no member or instance of group %q has that ID (members: %s)", name, st.Described.Group, list)
		}
		ids = append(ids, st.Members[i].ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// commonSubscription returns the topics every member subscribes to if
// they all subscribe alike, else the union and false.
func commonSubscription(st *groupState) ([]string, bool) {
	same := true
	union := map[string]bool{}
	for _, m := range st.Members {
		same = same && slices.Equal(m.Topics, st.Members[0].Topics)
		for _, t := range m.Topics {
			union[t] = true
		}
	}
	return slices.Sorted(maps.Keys(union)), same
}

func whatIfMemberID(st *groupState, i int) string {
	for suffix := ""; ; suffix += "'" {
		id := "new-" + strconv.Itoa(i) + suffix
		if !slices.ContainsFunc(st.Members, func(m stateMember) bool { return m.ID == id }) {
			return id
		}
	}
}

// alike reports whether every member subscribes to the same topics.
func alike(ms []assignor.Member) bool {
	for _, m := range ms {
		if !slices.Equal(m.Topics, ms[0].Topics) {
			return false
		}
	}
	return true
}

// movesBetween lists the partitions whose owner differs between prev and
// next (each listing a partition once), by topic and partition: the moves
// assignor.Moves counts.
func movesBetween(prev, next assignor.Assignment) []partitionMove {
	before := map[assignor.TopicPartition]string{}
	for id, tps := range prev {
		for _, tp := range tps {
			before[tp] = id
		}
	}
	moves := []partitionMove{}
	for id, tps := range next {
		for _, tp := range tps {
			if from, ok := before[tp]; ok && from != id {
				moves = append(moves, partitionMove{tp.Topic, tp.Partition, from, id})
			}
		}
	}
	slices.SortFunc(moves, func(a, b partitionMove) int {
		return compareTP(assignor.TopicPartition{Topic: a.Topic, Partition: a.Partition}, assignor.TopicPartition{Topic: b.Topic, Partition: b.Partition})
	})
	return moves
}

// fewestMoves returns the fewest moves that take prev (each partition
// listed once) to an assignment of next's members in which each holds
// ⌊P/n⌋ or ⌈P/n⌉ of the P partitions: what the members that leave hold
// must move, and a member that stays keeps at most its share, the larger
// share going to members that hold more than the smaller one.
func fewestMoves(prev, next assignor.Assignment, partitions int) int {
	n := len(next)
	floor, extra := partitions/n, partitions%n
	held, kept, bigger := 0, 0, 0
	for _, tps := range prev {
		held += len(tps)
	}
	for id := range next {
		k := len(prev[id])
		kept += min(k, floor)
		if k > floor {
			bigger++
		}
	}
	return held - kept - min(extra, bigger)
}

func balance(a assignor.Assignment) balanceOf {
	b := balanceOf{Members: len(a), Imbalance: assignor.Imbalance(a)}
	first := true
	for _, tps := range a {
		if first {
			b.Min, b.Max, first = len(tps), len(tps), false
		}
		b.Min, b.Max = min(b.Min, len(tps)), max(b.Max, len(tps))
	}
	return b
}

// memberChanges lists every member before and after, by member ID.
func memberChanges(st *groupState, prev, next assignor.Assignment) []memberChange {
	ids := slices.Sorted(maps.Keys(prev))
	for id := range next {
		if _, ok := prev[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := []memberChange{}
	for _, id := range ids {
		c := memberChange{MemberID: id, Status: "stays", Before: len(prev[id]), After: len(next[id]), Partitions: []topicPartitions{}}
		if i := slices.IndexFunc(st.Members, func(m stateMember) bool { return m.ID == id }); i >= 0 {
			if id := st.Members[i].InstanceID; id != "" {
				c.InstanceID = &id
			}
		}
		_, was := prev[id]
		_, is := next[id]
		switch {
		case !was:
			c.Status = "added"
		case !is:
			c.Status = "removed"
		}
		set := kadm.TopicsSet{}
		for _, tp := range next[id] {
			set.Add(tp.Topic, tp.Partition)
		}
		c.Partitions = topicsOf(set)
		out = append(out, c)
	}
	return out
}

func topicList(ts []assignor.Topic) string {
	var s []string
	for _, t := range ts {
		s = append(s, fmt.Sprintf("%s (%d partitions)", t.Name, t.Partitions))
	}
	return strings.Join(s, ", ")
}

func ptr[T any](v T) *T { return &v }

func joinSeeds(seeds []uint64) string {
	s := make([]string, len(seeds))
	for i, seed := range seeds {
		s[i] = strconv.FormatUint(seed, 10)
	}
	return strings.Join(s, ", ")
}

func fmtSpread(s spread, verb string) string {
	v := fmt.Sprintf(verb, s.Mean)
	if lo, hi := fmt.Sprintf(verb, s.Min), fmt.Sprintf(verb, s.Max); lo != hi {
		v += " [" + lo + ", " + hi + "]"
	}
	return v
}

func (w *whatIf) writeTable(out io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	kind := "consumer, KIP-848"
	if w.Type == "classic" {
		kind = "classic"
	}
	if w.Epoch != nil {
		p("GROUP\t%s (%s; %s, epoch %d)", w.Group, kind, w.State, *w.Epoch)
	} else {
		p("GROUP\t%s (%s; %s)", w.Group, kind, w.State)
	}
	switch w.Change.Kind {
	case changeRemove:
		p("CHANGE\t%d member(s) leave or crash: %s", len(w.Change.Remove), strings.Join(w.Change.Remove, ", "))
	case changeAdd:
		p("CHANGE\t%d member(s) join", w.Change.Add)
	case changeTiming:
		c, n := w.Timing.Current, w.Timing.Proposed
		p("CHANGE\ttiming: heartbeat %v -> %v, session %v -> %v", secs(c.HeartbeatS), secs(n.HeartbeatS), secs(c.SessionS), secs(n.SessionS))
	}
	if w.Assignor.Same {
		p("ASSIGNOR\t%s", w.Assignor.Name)
	} else {
		p("ASSIGNOR\t%s (the group's: %s)", w.Assignor.Name, dash(w.Assignor.GroupAssignor))
	}
	p("MEMBERS\t%d -> %d", w.MembersBefore, w.MembersAfter)
	p("PARTITIONS\t%d", w.Partitions)
	fewest := "-"
	if w.FewestMoves != nil {
		fewest = strconv.Itoa(*w.FewestMoves)
	}
	p("MOVES\t%d (fewest possible %s)", w.MoveCount, fewest)
	b, a := w.BalanceBefore, w.BalanceAfter
	p("BALANCE\t%d-%d partitions a member (imbalance %d) -> %d-%d (imbalance %d)", b.Min, b.Max, b.Imbalance, a.Min, a.Max, a.Imbalance)
	if len(w.Moves) > 0 {
		p("")
		p("TOPIC\tPARTITION\tFROM\tTO")
		for _, m := range w.Moves {
			p("%s\t%d\t%s\t%s", m.Topic, m.Partition, m.From, m.To)
		}
	}
	if w.Change.Kind != changeTiming {
		p("")
		p("MEMBER\tINSTANCE\tSTATUS\tBEFORE\tAFTER\tPARTITIONS AFTER")
		for _, m := range w.Members {
			p("%s\t%s\t%s\t%d\t%d\t%s", m.MemberID, dash(deref(m.InstanceID)), m.Status, m.Before, m.After, formatPartitions(m.Partitions))
		}
	}

	s := w.Simulation
	p("")
	p("SIMULATED\tseeds %s; mean [min, max] over them of the run with the change less the same run without it", joinSeeds(s.Seeds))
	p("EVENT\tTIMING\tUNOWNED PARTITION-SECONDS\tPARTITIONS AFFECTED\tMOVES\tCRASH TO REASSIGNED")
	for _, o := range s.Outcomes {
		reassign := "-"
		if o.ReassignSeconds != nil {
			reassign = fmtSpread(*o.ReassignSeconds, "%.2fs")
		}
		event := map[string]string{"leave": "graceful leave", "crash": "crash", "join": "join"}[o.Event]
		p("%s\t%s\t%s\t%s\t%s\t%s", event, o.Timing, fmtSpread(o.UnownedPartitionSeconds, "%.2f"),
			fmtSpread(o.AffectedPartitions, "%.0f"), fmtSpread(o.Moves, "%.0f"), reassign)
	}

	if r := w.Risk; r != nil {
		p("")
		p("RISK\ttune's figures over its scenario mix (%s), %d seed(s) each; mean ±95%% CI", strings.Join(r.Scenarios, ", "), len(r.Seeds))
		p("TIMING\tUNOWNED P-S/H\tUNOWNED+STALLED P-S/H\tFALSE EXP./MEMBER-DAY\tHEARTBEATS/S\tCRASH TO REASSIGNED S\tDOUBLE-OWNED P-S/H\tMEETS TUNE'S OBJECTIVE")
		for _, row := range []struct {
			name string
			f    riskFigures
		}{{"current", r.Current}, {"proposed", r.Proposed}} {
			f := row.f
			reassign := "-"
			if f.ReassignSeconds != nil {
				reassign = fmtEstimate(*f.ReassignSeconds)
			}
			p("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v", row.name, fmtEstimate(f.UnownedPerHour), fmtEstimate(f.UnavailablePerHour),
				fmtEstimate(f.FalseExpulsions), fmtEstimate(f.HeartbeatsPerSec), reassign, fmtEstimate(f.DoubleOwnedPerHour), f.MeetsObjective)
		}
	}

	p("")
	p("ASSUMED")
	for _, a := range w.Assumptions {
		p("  - %s", a)
	}
}

func fmtEstimate(e estimate) string {
	return tune.Estimate{Mean: e.Mean, Lo: e.Lo, Hi: e.Hi, N: e.N}.String()
}

func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
