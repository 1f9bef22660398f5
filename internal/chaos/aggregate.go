//go:build unix

package chaos

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tenure-dev/tenure/internal/chaos/check"
)

// WriteTable writes one line per run and the totals over the runs: the
// aggregate table of `tenure chaos`.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "seed\trun\tverdict\tfaults\tappends\taccepted\tstale\tunknown\tcommits ok\trefused\tunowned s\trecovery max s\tviolations\t")
	var (
		tot            totals
		recoveries     []time.Duration
		faultsByKind   = map[string]int{}
		violationsKind = map[string]int{}
		lin            = map[string]int{} // porcupine's results over the fenced runs
		controlKind    = map[string]int{}
		forged         = map[string]int{} // forge attempts of the fenced runs, by outcome
	)
	for _, r := range results {
		kind := "fenced"
		if r.Control {
			kind = "control"
		}
		if r.Report == nil {
			fmt.Fprintf(tw, "%d\t%s\tERROR\t\t\t\t\t\t\t\t\t\t\t\t\t\n", r.Seed, kind)
			tot.errors++
			continue
		}
		st := r.Report.Stats
		var c totals
		for _, rs := range st.Resources {
			c.appends += rs.Appends
			c.accepted += rs.Accepted
			c.stale += rs.Stale
			c.unknown += rs.Errors
		}
		for _, cs := range st.Commits {
			c.commitsOK += cs.OK
			c.refused += cs.Refused
		}
		var maxRec time.Duration
		for _, rec := range st.Recoveries {
			if rec.Healed {
				maxRec = max(maxRec, rec.Took)
				if !r.Control {
					recoveries = append(recoveries, rec.Took)
				}
			}
		}
		nf := 0
		for _, fc := range st.Faults {
			nf += fc.Count
			if !r.Control {
				faultsByKind[fc.Kind] += fc.Count
			}
		}
		verdict := "ok"
		switch {
		case r.Control && !r.Report.OK():
			verdict = "caught"
		case r.Control:
			verdict = "NOT CAUGHT"
		case !r.Report.OK():
			verdict = "FAILED"
		}
		for _, v := range r.Report.Violations {
			if r.Control {
				controlKind[v.Kind.String()]++
			} else {
				violationsKind[v.Kind.String()]++
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%d\t\n", r.Seed, kind, verdict, nf,
			c.appends, c.accepted, c.stale, c.unknown, c.commitsOK, c.refused,
			st.Unowned.Seconds(), maxRec.Seconds(), len(r.Report.Violations))
		if r.Control {
			tot.controls++
			if !r.Report.OK() {
				tot.caught++
			}
			continue
		}
		tot.runs++
		for _, l := range st.Linearizability {
			lin[l.Result]++
		}
		if r.Report.OK() {
			tot.passed++
		}
		tot.add(c)
		for _, f := range st.Forgeries {
			forged["tried"] += f.Tried
			forged["accepted"] += f.Accepted
			forged["refused unverified"] += f.Unverified
			forged["stale"] += f.Stale
			forged["unknown"] += f.Errors
		}
		tot.unowned += st.Unowned
		tot.faults += nf
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nfenced runs: %d, passed %d; control runs: %d, caught %d; runs that could not be carried out: %d\n",
		tot.runs, tot.passed, tot.controls, tot.caught, tot.errors)
	fmt.Fprintf(w, "over the fenced runs: %d faults (%s)\n", tot.faults, countList(faultsByKind))
	fmt.Fprintf(w, "  appends %d: accepted %d, rejected as stale %d, unknown outcome %d\n",
		tot.appends, tot.accepted, tot.stale, tot.unknown)
	fmt.Fprintf(w, "  commits accepted %d, refused %d; partition-seconds without an owner %.1f\n", tot.commitsOK, tot.refused, tot.unowned.Seconds())
	fmt.Fprintf(w, "  offsets histories checked linearizable %d, undecided within the search bound %d, not linearizable %d\n", lin["Ok"], lin["Unknown"], lin["Illegal"])
	if len(recoveries) > 0 {
		slices.Sort(recoveries)
		q := func(f float64) time.Duration { return recoveries[int(f*float64(len(recoveries)-1))] }
		fmt.Fprintf(w, "  recovery after a heal (%d faults): median %.2f s, p90 %.2f s, max %.2f s\n",
			len(recoveries), q(0.5).Seconds(), q(0.9).Seconds(), recoveries[len(recoveries)-1].Seconds())
	}
	if forged["tried"] > 0 {
		fmt.Fprintf(w, "  forgeries (per resource tried) %d: accepted %d, refused unverified %d, stale %d, unknown %d\n",
			forged["tried"], forged["accepted"], forged["refused unverified"], forged["stale"], forged["unknown"])
	}
	if len(violationsKind) > 0 {
		fmt.Fprintf(w, "  violations: %s\n", countList(violationsKind))
	}
	if len(controlKind) > 0 {
		fmt.Fprintf(w, "over the control runs: violations caught: %s\n", countList(controlKind))
	}
	return nil
}

type totals struct {
	runs, passed, controls, caught, errors, faults        int
	appends, accepted, stale, unknown, commitsOK, refused int
	unowned                                               time.Duration
}

func (t *totals) add(c totals) {
	t.appends += c.appends
	t.accepted += c.accepted
	t.stale += c.stale
	t.unknown += c.unknown
	t.commitsOK += c.commitsOK
	t.refused += c.refused
}

// countList renders counts as "a 3, b 1", most first.
// ViolationKinds lists vs's kinds with their counts, the most frequent
// first.
func ViolationKinds(vs []check.Violation) string {
	m := map[string]int{}
	for _, v := range vs {
		m[v.Kind.String()]++
	}
	return countList(m)
}

func countList(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), strings.Compare(a.k, b.k)) })
	var parts []string
	for _, e := range kvs {
		parts = append(parts, fmt.Sprintf("%s %d", e.k, e.v))
	}
	return strings.Join(parts, ", ")
}
