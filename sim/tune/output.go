package tune

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the outcome for people: the Pareto front, the
// recommendation as flags and member options, and the comparison with
// Kafka's and tenure's defaults on the same scenarios and seeds.
func (o *Outcome) WriteText(w io.Writer) error {
	finalists, distinct := 0, 0
	for _, r := range o.Results {
		if r.SameAs == nil {
			distinct++
			if r.Finalist {
				finalists++
			}
		}
	}
	fmt.Fprintf(w, "Scenarios: %s. %d candidates searched (%d pruned by the timing rules of epoch and member.Join), %d with distinct figures;\n",
		strings.Join(o.Scenarios, ", "), len(o.Results), len(o.Pruned), distinct)
	fmt.Fprintf(w, "%d finalists ran %d seeds each; %d runs in all.\n", finalists, o.Seeds, o.Runs)
	fmt.Fprintf(w, "Figures are means over seeds of the mean over scenarios, ± the 95 %% confidence interval.\n")
	fmt.Fprintf(w, "Settings listed as a|b gave identical figures: they made no difference here.\n\n")

	fmt.Fprintf(w, "PARETO FRONT (unowned partition-seconds, false expulsions, heartbeats; all minimised)\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header(tw)
	for _, r := range o.Front {
		row(tw, r, mark(o, r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nRECOMMENDED (%s)\n", o.Objective)
	if o.Best == nil {
		fmt.Fprintf(w, "  no finalist meets the constraints; relax them or widen the space.\n")
	} else {
		fmt.Fprintf(w, "  %s\n\n", o.Best.Candidate)
		fmt.Fprintf(w, "  tenure serve %s\n\n", Flags(o.Best.Candidate))
		fmt.Fprintf(w, "%s\n", indent(MemberOptions(o.Best.Candidate), "  "))
		if o.Best.Candidate.Timing.InitialRebalanceDelay != 0 {
			fmt.Fprintf(w, "  (--initial-rebalance-delay shapes classic groups only; the simulated KIP-848 groups do not use it.)\n")
		}
	}

	fmt.Fprintf(w, "\nCOMPARISON ON THE SAME SCENARIOS AND SEEDS\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header(tw)
	if o.Best != nil {
		row(tw, o.Best, "recommended")
	}
	row(tw, o.Default, "tenure defaults")
	row(tw, o.Kafka, "kafka defaults")
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nPER SCENARIO (unowned partition-seconds per hour / false expulsions per member-day)\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cols := []*Result{}
	names := []string{}
	if o.Best != nil {
		cols, names = append(cols, o.Best), append(names, "recommended")
	}
	cols, names = append(cols, o.Default, o.Kafka), append(names, "tenure defaults", "kafka defaults")
	fmt.Fprintf(tw, "  scenario\t%s\n", strings.Join(names, "\t"))
	for k, sc := range o.Scenarios {
		fmt.Fprintf(tw, "  %s", sc)
		for _, r := range cols {
			p := r.PerScenario[k]
			fmt.Fprintf(tw, "\t%s / %s", p.Unowned.format("%.4g"), p.FalseExpulsions.format("%.3g"))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var failed []string
	for _, r := range o.Results {
		failed = append(failed, r.Errors...)
		if r.FencedAcceptedStale > 0 {
			failed = append(failed, fmt.Sprintf("%s: the fence accepted %d stale writes", r.Candidate, r.FencedAcceptedStale))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFAILED RUNS (a bug: rerun one with tenure sim --scenario NAME --seed N)\n")
		for _, f := range failed {
			fmt.Fprintf(w, "  %s\n", firstLine(f))
		}
	}
	return nil
}

func header(tw *tabwriter.Writer) {
	fmt.Fprintf(tw, "  \theartbeat\tsession\trebalance\tmargin\tgrace\tkeepalive\tmembership\tunowned p-s/h\tunowned+stalled p-s/h\tfalse exp./member-day\theartbeats/s\tcrash→reassigned s\tdouble-owned p-s/h\n")
}

func row(tw *tabwriter.Writer, r *Result, label string) {
	t := r.Candidate.Timing
	mode := "dynamic"
	if r.Candidate.Static {
		mode = "static"
	}
	// Settings that made no difference are listed together.
	all := append([]Candidate{r.Candidate}, r.Equivalent...)
	values := func(f func(Candidate) time.Duration) string {
		var ds []time.Duration
		for _, c := range all {
			ds = append(ds, f(c))
		}
		slices.Sort(ds)
		ds = slices.Compact(ds)
		s := make([]string, len(ds))
		for i, d := range ds {
			s[i] = d.String()
		}
		return strings.Join(s, "|")
	}
	for _, c := range r.Equivalent {
		if c.Static != r.Candidate.Static {
			mode = "either"
		}
	}
	fmt.Fprintf(tw, "  %s\t%v\t%v\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", label,
		t.HeartbeatInterval, t.SessionTimeout,
		values(func(c Candidate) time.Duration { return c.Timing.RebalanceTimeout }),
		values(func(c Candidate) time.Duration { return c.Timing.Margin }),
		values(func(c Candidate) time.Duration { return c.Timing.ConnLossGrace }),
		values(func(c Candidate) time.Duration { return c.Timing.KeepAlive }), mode,
		r.Unowned.format("%.4g"), r.Unavailable.format("%.4g"), r.FalseExpulsions.format("%.3g"), r.Heartbeats.format("%.3g"),
		r.Reassign.format("%.3g"), r.DoubleOwned.format("%.3g"))
}

// mark labels a front row that is also the recommendation or a baseline.
func mark(o *Outcome, r *Result) string {
	var m []string
	if r == o.Best {
		m = append(m, "*")
	}
	if r.Baseline != "" {
		m = append(m, r.Baseline)
	}
	return strings.Join(m, " ")
}

// Flags renders the coordinator's settings of c as `tenure serve` flags.
func Flags(c Candidate) string {
	t := c.Timing
	s := fmt.Sprintf("--consumer-session-timeout=%v --consumer-heartbeat-interval=%v --initial-rebalance-delay=%v --conn-loss-grace=%v",
		t.SessionTimeout, t.HeartbeatInterval, t.InitialRebalanceDelay, t.ConnLossGrace)
	if t.KeepAlive > 0 {
		s += fmt.Sprintf(" --conn-keepalive=%v", t.KeepAlive)
	}
	return s
}

// MemberOptions renders the members' settings of c as a member.Config
// literal to paste.
func MemberOptions(c Candidate) string {
	t := c.Timing
	var b strings.Builder
	b.WriteString("member.Config{\n")
	fmt.Fprintf(&b, "\tSessionTimeout:   %s, // the coordinator's --consumer-session-timeout\n", goDuration(t.SessionTimeout))
	fmt.Fprintf(&b, "\tRebalanceTimeout: %s,\n", goDuration(t.RebalanceTimeout))
	fmt.Fprintf(&b, "\tSuspectMargin:    %s,\n", goDuration(t.Margin))
	fmt.Fprintf(&b, "\tMaxDrift:         %g,\n", t.MaxDrift)
	fmt.Fprintf(&b, "\tRequestTimeout:   %s, // as simulated\n", goDuration(requestTimeout(t)))
	if c.Static {
		b.WriteString("\tInstanceID:       \"<a name that survives restarts, e.g. the pod name>\", // static membership\n")
	}
	b.WriteString("\t// Brokers, Group, Topics, ...\n}")
	return b.String()
}

// goDuration renders d as a Go expression, as in "1500 * time.Millisecond".
func goDuration(d time.Duration) string {
	switch {
	case d%time.Minute == 0 && d >= time.Minute:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " * time.Minute"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + " * time.Second"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + " * time.Millisecond"
	}
	return strconv.FormatInt(int64(d), 10) + " * time.Nanosecond"
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// WriteCSV writes every candidate's figures, one row each.
func (o *Outcome) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	_ = cw.Write([]string{"heartbeat", "session", "rebalance", "initial_delay", "margin", "conn_loss_grace", "keepalive", "static",
		"finalist", "on_front", "feasible", "recommended", "baseline", "runs",
		"unowned_per_h", "unowned_lo", "unowned_hi", "unavailable_per_h", "false_exp_per_member_day", "false_exp_lo", "false_exp_hi",
		"heartbeats_per_s", "reassign_s", "double_owned_per_h", "unfenced_stale_per_h", "fenced_accepted_stale", "errors"})
	for _, r := range o.Results {
		t := r.Candidate.Timing
		_ = cw.Write([]string{t.HeartbeatInterval.String(), t.SessionTimeout.String(), t.RebalanceTimeout.String(),
			t.InitialRebalanceDelay.String(), t.Margin.String(), t.ConnLossGrace.String(), t.KeepAlive.String(), strconv.FormatBool(r.Candidate.Static),
			strconv.FormatBool(r.Finalist), strconv.FormatBool(r.OnFront), strconv.FormatBool(r.Feasible),
			strconv.FormatBool(r == o.Best), r.Baseline, strconv.Itoa(r.Runs),
			f(r.Unowned.Mean), f(r.Unowned.Lo), f(r.Unowned.Hi), f(r.Unavailable.Mean),
			f(r.FalseExpulsions.Mean), f(r.FalseExpulsions.Lo), f(r.FalseExpulsions.Hi),
			f(r.Heartbeats.Mean), f(r.Reassign.Mean), f(r.DoubleOwned.Mean), f(r.UnfencedStale.Mean),
			strconv.FormatInt(r.FencedAcceptedStale, 10), strconv.Itoa(len(r.Errors))})
	}
	cw.Flush()
	return cw.Error()
}
