package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what one run measured. Times are in seconds of virtual time.
// [Report.Metrics] lists every figure under a stable name, the names that
// scenario assertions and the tuner use.
type Report struct {
	Scenario   string  `json:"scenario"`
	Seed       uint64  `json:"seed"`
	Duration   float64 `json:"duration_s"`
	Members    int     `json:"members"`
	Partitions int     `json:"partitions"`
	Static     bool    `json:"static"`
	Timing     string  `json:"timing"`

	Availability Availability `json:"availability"`
	Safety       Safety       `json:"safety"`
	Churn        Churn        `json:"churn"`
	Cost         Cost         `json:"cost"`
	Engine       Engine       `json:"engine"`

	// FalseExpulsions lists the members the coordinator removed while
	// their process was alive.
	FalseExpulsions []Expulsion `json:"false_expulsions"`
	// Timeline is the ownership history of the partition chosen with
	// Options.TimelinePartition.
	TimelinePartition string          `json:"timeline_partition,omitempty"`
	Timeline          []TimelineEntry `json:"timeline,omitempty"`
}

// Availability measures how long partitions went without a working owner:
// a live process whose claim is in the Owned state. An incident is a
// maximal interval during which a partition that had been owned before has
// no working owner; the wait for the very first owner is measured by
// FirstFullAssignment instead.
type Availability struct {
	UnownedPartitionSeconds float64 `json:"unowned_partition_s"`
	// StalledPartitionSeconds is the time, summed over partitions, during
	// which every working owner of a partition was paused: owned, but
	// nobody worked on it.
	StalledPartitionSeconds float64 `json:"stalled_partition_s"`
	Incidents               int     `json:"incidents"`
	IncidentP50             float64 `json:"incident_p50_s"`
	IncidentP99             float64 `json:"incident_p99_s"`
	IncidentMax             float64 `json:"incident_max_s"`
	// OpenAtEnd counts incidents still open when the run ended.
	OpenAtEnd int `json:"open_at_end"`
	// FirstFullAssignment is when every partition first had a working
	// owner; -1 if that never happened.
	FirstFullAssignment float64 `json:"first_full_assignment_s"`
	// Crashes counts crashes; Reassign* is the time from a crash until
	// every partition it left without an owner had one again.
	Crashes       int     `json:"crashes"`
	ReassignP50   float64 `json:"reassign_p50_s"`
	ReassignMax   float64 `json:"reassign_max_s"`
	NotReassigned int     `json:"not_reassigned"`
	// Leaves counts graceful leaves; LeaveReassignMax is the longest
	// time from a process being asked to leave until every partition it
	// worked on alone had a working owner again (LeavesNotReassigned:
	// never, by the end). JSON only: make fidelity compares it with real
	// members.
	Leaves              int     `json:"leaves"`
	LeaveReassignMax    float64 `json:"leave_reassign_max_s"`
	LeavesNotReassigned int     `json:"leaves_not_reassigned"`
	// ScriptedPauses counts pauses of pause member= commands;
	// PauseReassignMax is the longest time from such a pause's start
	// until other members worked on every partition the paused one
	// worked on alone (PausesNotReassigned: never, by the end). JSON
	// only, as for leaves.
	ScriptedPauses      int     `json:"scripted_pauses"`
	PauseReassignMax    float64 `json:"pause_reassign_max_s"`
	PausesNotReassigned int     `json:"pauses_not_reassigned"`
}

// Safety counts double ownership and stale writes. See the resource model
// in the package documentation for what each count means.
type Safety struct {
	// DoubleOwnedPartitionSeconds is the time, summed over partitions,
	// during which two or more members believed they owned a partition
	// (both in the Owned state; a paused member still believes).
	DoubleOwnedPartitionSeconds float64 `json:"double_owned_partition_s"`
	Writes                      int64   `json:"writes"`
	// StaleAttempted counts writes whose writer was not the partition's
	// owner under that token in the coordinator's view, or whose token
	// was lower than one already written.
	StaleAttempted int64 `json:"stale_attempted"`
	// FencedRejected counts writes the fence rejected.
	FencedRejected int64 `json:"fenced_rejected"`
	// FencedAcceptedStale counts writes the fence admitted although a
	// higher token had been admitted before, or under a token the
	// coordinator never granted the writer. Must be zero.
	FencedAcceptedStale int64 `json:"fenced_accepted_stale"`
	// FencedGapWrites counts writes by a former owner, under its own
	// token, that the fence admitted because nobody had written under a
	// newer token yet. Harmless to ordering: the resource's tokens still
	// only grow.
	FencedGapWrites int64 `json:"fenced_gap_writes"`
	// UnfencedAcceptedStale counts the stale writes the unfenced copy
	// accepted: the damage fencing prevents (or, for gap writes, makes
	// harmless).
	UnfencedAcceptedStale int64 `json:"unfenced_accepted_stale"`
	// UnfencedSuperseded counts writes the unfenced copy accepted under a
	// token lower than one it had already accepted: an old owner
	// overwriting a newer owner's work.
	UnfencedSuperseded int64 `json:"unfenced_superseded"`
	// TokenMismatches counts writes by a partition's owner under another
	// token than the one the coordinator recorded for its ownership: the
	// member and the coordinator disagree on the fencing token.
	TokenMismatches int64 `json:"token_mismatches"`
}

// Churn counts rebalances, moves and expulsions.
type Churn struct {
	// EpochBumps counts group epoch bumps (rebalances started);
	// Rebalances counts rebalances completed (the group became Stable).
	EpochBumps int64 `json:"epoch_bumps"`
	Rebalances int64 `json:"rebalances"`
	Epoch      int32 `json:"epoch"`
	// Moves is the coordinator's count of partitions that changed owner;
	// OwnerChanges the simulator's count of owner changes in the
	// persisted records; MinMoves the fewest moves that would have
	// reached balanced assignments at each completed rebalance.
	Moves        int64 `json:"moves"`
	OwnerChanges int64 `json:"owner_changes"`
	MinMoves     int64 `json:"min_moves"`
	Joins        int64 `json:"joins"`
	Leaves       int64 `json:"leaves"`
	Expirations  int64 `json:"expirations"`
	Removals     int64 `json:"removals"`
	// ConnLossExpulsions counts the expirations after a closed connection
	// (the connection-loss grace), of Expirations; ConnCloses the closed
	// connections the coordinator acted on; ConnDrops the connections
	// dropped under live members (conn-drops).
	ConnLossExpulsions int64 `json:"conn_loss_expulsions"`
	ConnCloses         int64 `json:"conn_closes"`
	// ConnSettling counts the closes the coordinator passed over because
	// they came while the set's view settled after a fail-over
	// (Timing.ViewSettle): those members wait for their session timeout.
	ConnSettling int64 `json:"conn_closes_settling,omitempty"`
	ConnDrops    int64 `json:"conn_drops"`
	// FalseExpulsions counts expirations and removals of members whose
	// process was alive and had not been asked to leave.
	FalseExpulsions int64 `json:"false_expulsions"`
	// MemberDays is the time member processes ran, in days: the
	// denominator of false expulsions per member-day.
	MemberDays float64 `json:"member_days"`
	Pauses     int64   `json:"pauses"`
	PausedTime float64 `json:"paused_s"`
	// FatalErrors counts member machines that stopped on an error they
	// cannot recover from (and were restarted).
	FatalErrors int64 `json:"fatal_errors"`
}

// Cost measures the coordinator's load.
type Cost struct {
	Heartbeats          int64   `json:"heartbeats"`
	HeartbeatsPerSecond float64 `json:"heartbeats_per_s"`
	CoordSteps          int64   `json:"coord_steps"`
	CoordTicks          int64   `json:"coord_ticks"`
	// CoordWorkPerSecond is (steps + ticks) per simulated second.
	CoordWorkPerSecond float64 `json:"coord_work_per_s"`
	// CoordCPUPerSecond is the measured CPU time of core calls per
	// simulated second, in seconds (0 unless Options.MeasureCPU).
	CoordCPUPerSecond float64 `json:"coord_cpu_per_s"`
	Records           int64   `json:"records"`
}

// Engine describes the run itself.
type Engine struct {
	Events int64 `json:"events"`
	// TraceHash identifies the run's event trace: equal hashes, equal
	// runs.
	TraceHash    string `json:"trace_hash"`
	Messages     int64  `json:"messages"`
	Lost         int64  `json:"lost"`
	Duplicated   int64  `json:"duplicated"`
	CutDrops     int64  `json:"cut_drops"`
	HeartbeatsTx int64  `json:"heartbeats_sent"`
}

// Expulsion is a member removed while its process was alive.
type Expulsion struct {
	At     float64 `json:"at_s"`
	Member string  `json:"member"`
	Reason string  `json:"reason"`
}

// TimelineEntry is one change in the ownership of the timeline partition:
// a member's claim changing state, or the coordinator's persisted owner
// changing.
type TimelineEntry struct {
	At    time.Duration `json:"at_ns"`
	Who   string        `json:"who"`
	From  string        `json:"from,omitempty"`
	To    string        `json:"to"`
	Token int64         `json:"token,omitempty"`
	Cause string        `json:"cause,omitempty"`
}

func (w *world) report() *Report {
	m := &w.met
	dur := w.clock.now.Duration().Seconds()
	if dur <= 0 {
		dur = 1
	}
	var aliveNs int64
	for _, n := range w.nodes[1:] {
		aliveNs += n.aliveNs
		if n.alive {
			aliveNs += int64(w.clock.now - n.aliveSince)
		}
	}
	rep := &Report{
		Scenario:   w.sc.Name,
		Seed:       w.opts.Seed,
		Duration:   dur,
		Members:    w.sc.Members,
		Partitions: w.layout.n,
		Static:     w.sc.Static,
		Timing:     w.sc.Timing.String(),
	}
	inc := slices.Clone(m.incidents)
	slices.Sort(inc)
	re := slices.Clone(m.reassign)
	slices.Sort(re)
	first := -1.0
	if m.firstFull >= 0 {
		first = m.firstFull.Duration().Seconds()
	}
	rep.Availability = Availability{
		UnownedPartitionSeconds: float64(m.unownedNs) / 1e9,
		StalledPartitionSeconds: float64(m.stalledNs) / 1e9,
		Incidents:               len(inc),
		IncidentP50:             quantile(inc, 0.5),
		IncidentP99:             quantile(inc, 0.99),
		IncidentMax:             quantile(inc, 1),
		OpenAtEnd:               m.openAtEnd,
		FirstFullAssignment:     first,
		Crashes:                 len(re) + m.unassigned,
		ReassignP50:             quantile(re, 0.5),
		ReassignMax:             quantile(re, 1),
		NotReassigned:           m.unassigned,
		Leaves:                  len(m.leaveReassign) + m.leftUnassigned,
		LeaveReassignMax:        slices.Max(append([]time.Duration{0}, m.leaveReassign...)).Seconds(),
		LeavesNotReassigned:     m.leftUnassigned,
		ScriptedPauses:          len(m.pauseReassign) + m.pausedUnassigned,
		PauseReassignMax:        slices.Max(append([]time.Duration{0}, m.pauseReassign...)).Seconds(),
		PausesNotReassigned:     m.pausedUnassigned,
	}
	r := &w.res
	rep.Safety = Safety{
		DoubleOwnedPartitionSeconds: float64(m.doubleNs) / 1e9,
		Writes:                      r.writes,
		StaleAttempted:              r.staleAttempted,
		FencedRejected:              r.fencedRejected,
		FencedAcceptedStale:         r.fencedAcceptedBad,
		FencedGapWrites:             r.fencedGap,
		UnfencedAcceptedStale:       r.unfencedStale,
		UnfencedSuperseded:          r.unfencedSuperseded,
		TokenMismatches:             r.tokenMismatch,
	}
	rep.Churn = Churn{
		EpochBumps:         m.epochBumps,
		Rebalances:         m.rebalances,
		Epoch:              m.epoch,
		Moves:              m.moves,
		OwnerChanges:       m.viewMoves,
		MinMoves:           m.minMoves,
		Joins:              m.joins,
		Leaves:             m.leaves,
		Expirations:        m.expirations,
		Removals:           m.removals,
		ConnLossExpulsions: m.connLossExpulsions,
		ConnCloses:         w.coord.connCloses,
		ConnSettling:       w.coord.connSettling,
		ConnDrops:          m.connDrops,
		FalseExpulsions:    int64(len(m.falseExpulsions)),
		MemberDays:         float64(aliveNs) / float64(24*time.Hour),
		Pauses:             m.pauses,
		PausedTime:         float64(m.pausedNs) / 1e9,
		FatalErrors:        m.fatal,
	}
	c := w.coord
	rep.Cost = Cost{
		Heartbeats:          m.heartbeats,
		HeartbeatsPerSecond: float64(m.heartbeats) / dur,
		CoordSteps:          c.steps,
		CoordTicks:          c.ticks,
		CoordWorkPerSecond:  float64(c.steps+c.ticks) / dur,
		CoordCPUPerSecond:   c.cpu.Seconds() / dur,
		Records:             c.records,
	}
	rep.Engine = Engine{
		Events:       w.events,
		TraceHash:    fmt.Sprintf("%016x", w.tr.sum()),
		Messages:     w.net.sent,
		Lost:         w.net.lost,
		Duplicated:   w.net.dups,
		CutDrops:     w.net.cutDrops,
		HeartbeatsTx: m.heartbeatsSent,
	}
	for _, e := range m.falseExpulsions {
		rep.FalseExpulsions = append(rep.FalseExpulsions, Expulsion{At: e.at.Duration().Seconds(), Member: e.member, Reason: e.reason})
	}
	if m.timelinePart >= 0 {
		rep.TimelinePartition = w.layout.name(m.timelinePart)
		rep.Timeline = m.timeline
	}
	return rep
}

// quantile returns the nearest-rank q-quantile of sorted durations, in
// seconds; 0 for none.
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))].Seconds()
}

// Metric is one named figure of a report.
type Metric struct {
	Name  string
	Value float64
}

// Metrics lists the report's figures under stable names, as
// "section.name" (availability.unowned_partition_s, safety.fenced_rejected,
// churn.false_expulsions_per_member_day, ...), in a fixed order.
func (r *Report) Metrics() []Metric {
	a, s, c, k, e := &r.Availability, &r.Safety, &r.Churn, &r.Cost, &r.Engine
	perDay := 0.0
	if c.MemberDays > 0 {
		perDay = float64(c.FalseExpulsions) / c.MemberDays
	}
	unownedPerHour := a.UnownedPartitionSeconds / (r.Duration / 3600)
	return []Metric{
		{"run.duration_s", r.Duration},
		{"run.members", float64(r.Members)},
		{"run.partitions", float64(r.Partitions)},
		{"availability.unowned_partition_s", a.UnownedPartitionSeconds},
		{"availability.unowned_partition_s_per_hour", unownedPerHour},
		{"availability.stalled_partition_s", a.StalledPartitionSeconds},
		{"availability.incidents", float64(a.Incidents)},
		{"availability.incident_p50_s", a.IncidentP50},
		{"availability.incident_p99_s", a.IncidentP99},
		{"availability.incident_max_s", a.IncidentMax},
		{"availability.open_at_end", float64(a.OpenAtEnd)},
		{"availability.first_full_assignment_s", a.FirstFullAssignment},
		{"availability.crashes", float64(a.Crashes)},
		{"availability.reassign_p50_s", a.ReassignP50},
		{"availability.reassign_max_s", a.ReassignMax},
		{"availability.not_reassigned", float64(a.NotReassigned)},
		{"safety.double_owned_partition_s", s.DoubleOwnedPartitionSeconds},
		{"safety.writes", float64(s.Writes)},
		{"safety.stale_attempted", float64(s.StaleAttempted)},
		{"safety.fenced_rejected", float64(s.FencedRejected)},
		{"safety.fenced_accepted_stale", float64(s.FencedAcceptedStale)},
		{"safety.fenced_gap_writes", float64(s.FencedGapWrites)},
		{"safety.unfenced_accepted_stale", float64(s.UnfencedAcceptedStale)},
		{"safety.unfenced_superseded", float64(s.UnfencedSuperseded)},
		{"safety.token_mismatches", float64(s.TokenMismatches)},
		{"churn.epoch_bumps", float64(c.EpochBumps)},
		{"churn.rebalances", float64(c.Rebalances)},
		{"churn.epoch", float64(c.Epoch)},
		{"churn.moves", float64(c.Moves)},
		{"churn.owner_changes", float64(c.OwnerChanges)},
		{"churn.min_moves", float64(c.MinMoves)},
		{"churn.joins", float64(c.Joins)},
		{"churn.leaves", float64(c.Leaves)},
		{"churn.expirations", float64(c.Expirations)},
		{"churn.removals", float64(c.Removals)},
		{"churn.conn_loss_expulsions", float64(c.ConnLossExpulsions)},
		{"churn.conn_closes", float64(c.ConnCloses)},
		{"churn.conn_closes_settling", float64(c.ConnSettling)},
		{"churn.conn_drops", float64(c.ConnDrops)},
		{"churn.false_expulsions", float64(c.FalseExpulsions)},
		{"churn.false_expulsions_per_member_day", perDay},
		{"churn.member_days", c.MemberDays},
		{"churn.pauses", float64(c.Pauses)},
		{"churn.paused_s", c.PausedTime},
		{"churn.fatal_errors", float64(c.FatalErrors)},
		{"cost.heartbeats", float64(k.Heartbeats)},
		{"cost.heartbeats_per_s", k.HeartbeatsPerSecond},
		{"cost.coord_steps", float64(k.CoordSteps)},
		{"cost.coord_ticks", float64(k.CoordTicks)},
		{"cost.coord_work_per_s", k.CoordWorkPerSecond},
		{"cost.coord_cpu_per_s", k.CoordCPUPerSecond},
		{"cost.records", float64(k.Records)},
		{"engine.events", float64(e.Events)},
		{"engine.messages", float64(e.Messages)},
		{"engine.lost", float64(e.Lost)},
		{"engine.duplicated", float64(e.Duplicated)},
		{"engine.cut_drops", float64(e.CutDrops)},
	}
}

// Metric returns the figure with the given name (see [Report.Metrics]).
func (r *Report) Metric(name string) (float64, bool) {
	for _, m := range r.Metrics() {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// WriteText writes the report for people: a table of the figures, the
// false expulsions, and the ownership timeline of the chosen partition.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	a, s, c, k := &r.Availability, &r.Safety, &r.Churn, &r.Cost
	p("scenario %s\tseed %d\tduration %v\tmembers %d\tpartitions %d\tstatic %v",
		r.Scenario, r.Seed, secs(r.Duration), r.Members, r.Partitions, r.Static)
	p("timing\t%s", r.Timing)
	p("")
	p("AVAILABILITY\t")
	p("  unowned partition-seconds\t%.1f", a.UnownedPartitionSeconds)
	p("  stalled partition-seconds\t%.1f\t(every owner paused)", a.StalledPartitionSeconds)
	p("  incidents\t%d\t(p50 %v, p99 %v, max %v; %d open at end)", a.Incidents, secs(a.IncidentP50), secs(a.IncidentP99), secs(a.IncidentMax), a.OpenAtEnd)
	if a.FirstFullAssignment >= 0 {
		p("  first full assignment\t%v", secs(a.FirstFullAssignment))
	} else {
		p("  first full assignment\tnever")
	}
	p("  crash to full reassignment\t%d crashes\t(p50 %v, max %v; %d not reassigned)", a.Crashes, secs(a.ReassignP50), secs(a.ReassignMax), a.NotReassigned)
	p("SAFETY\t")
	p("  double-owned partition-seconds\t%.1f", s.DoubleOwnedPartitionSeconds)
	p("  writes\t%d", s.Writes)
	p("  stale writes attempted\t%d", s.StaleAttempted)
	p("  fenced: rejected\t%d", s.FencedRejected)
	p("  fenced: accepted stale\t%d\t(must be 0)", s.FencedAcceptedStale)
	p("  fenced: gap writes\t%d\t(former owner, before any newer token)", s.FencedGapWrites)
	p("  unfenced: accepted stale\t%d\t(%d overwrote a newer owner)", s.UnfencedAcceptedStale, s.UnfencedSuperseded)
	if s.TokenMismatches > 0 {
		p("  token mismatches\t%d\t(owner wrote under another token than the coordinator recorded)", s.TokenMismatches)
	}
	p("CHURN\t")
	p("  rebalances\t%d completed\t(%d epoch bumps, epoch %d)", c.Rebalances, c.EpochBumps, c.Epoch)
	p("  partition moves\t%d\t(owner changes %d, fewest possible %d)", c.Moves, c.OwnerChanges, c.MinMoves)
	p("  joins / leaves\t%d / %d", c.Joins, c.Leaves)
	p("  expirations / removals\t%d / %d\t(%d after a closed connection)", c.Expirations, c.Removals, c.ConnLossExpulsions)
	if c.ConnSettling > 0 {
		p("  connections closed / dropped\t%d / %d\t(%d more closed while the view settled: no grace)", c.ConnCloses, c.ConnDrops, c.ConnSettling)
	} else {
		p("  connections closed / dropped\t%d / %d", c.ConnCloses, c.ConnDrops)
	}
	perDay := 0.0
	if c.MemberDays > 0 {
		perDay = float64(c.FalseExpulsions) / c.MemberDays
	}
	p("  false expulsions\t%d\t(%.3g per member-day)", c.FalseExpulsions, perDay)
	p("  pauses\t%d\t(%v paused in total)", c.Pauses, secs(c.PausedTime))
	if c.FatalErrors > 0 {
		p("  fatal member errors\t%d", c.FatalErrors)
	}
	p("COST\t")
	p("  heartbeats\t%d\t(%.1f/s)", k.Heartbeats, k.HeartbeatsPerSecond)
	p("  coordinator work\t%d steps + %d ticks\t(%.1f/s)", k.CoordSteps, k.CoordTicks, k.CoordWorkPerSecond)
	if k.CoordCPUPerSecond > 0 {
		p("  coordinator CPU\t%.3g ms per simulated second", k.CoordCPUPerSecond*1e3)
	}
	p("  records persisted\t%d", k.Records)
	p("ENGINE\t")
	p("  events\t%d", r.Engine.Events)
	p("  messages\t%d\t(%d lost, %d duplicated, %d dropped by cuts)", r.Engine.Messages, r.Engine.Lost, r.Engine.Duplicated, r.Engine.CutDrops)
	p("  trace hash\t%s", r.Engine.TraceHash)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.FalseExpulsions) > 0 {
		fmt.Fprintf(w, "\nFALSE EXPULSIONS\n")
		for _, e := range r.FalseExpulsions {
			fmt.Fprintf(w, "  %-10s %s (%s)\n", fmtTime(vtime(e.At*1e9)), e.Member, e.Reason)
		}
	}
	if r.TimelinePartition != "" {
		fmt.Fprintf(w, "\nTIMELINE OF %s\n", r.TimelinePartition)
		for _, e := range r.Timeline {
			fmt.Fprintf(w, "  %-10s %-7s %s\n", fmtTime(vtime(e.At)), e.Who, e.describe())
		}
	}
	return nil
}

func (e TimelineEntry) describe() string {
	var b strings.Builder
	if e.From != "" {
		b.WriteString(e.From + " -> ")
	}
	b.WriteString(e.To)
	if e.Token != 0 {
		b.WriteString(" token " + strconv.FormatInt(e.Token, 10))
	}
	if e.Cause != "" && e.Cause != "persisted" {
		b.WriteString(" (" + e.Cause + ")")
	}
	return b.String()
}

// secs renders seconds as a duration rounded to milliseconds.
func secs(s float64) time.Duration {
	return time.Duration(s * 1e9).Round(time.Millisecond)
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes the figures as "metric,value" rows (see
// [Report.Metrics]), after scenario and seed rows.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	rows := [][]string{{"metric", "value"}, {"scenario", r.Scenario}, {"seed", strconv.FormatUint(r.Seed, 10)},
		{"timing", r.Timing}, {"trace_hash", r.Engine.TraceHash}}
	for _, m := range r.Metrics() {
		rows = append(rows, []string{m.Name, strconv.FormatFloat(m.Value, 'g', -1, 64)})
	}
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	return cw.Error()
}

// WriteTimelineCSV writes the ownership timeline as CSV.
func (r *Report) WriteTimelineCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"at_s", "partition", "who", "from", "to", "token", "cause"})
	for _, e := range r.Timeline {
		_ = cw.Write([]string{strconv.FormatFloat(e.At.Seconds(), 'f', 6, 64), r.TimelinePartition, e.Who, e.From, e.To,
			strconv.FormatInt(e.Token, 10), e.Cause})
	}
	cw.Flush()
	return cw.Error()
}
