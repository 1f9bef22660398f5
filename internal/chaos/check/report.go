package check

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Kind is what a Violation violates. The zero Kind is invalid.
type Kind uint8

const (
	_ Kind = iota
	// TokenOrder (check 1): a resource accepted a record under a token
	// lower than one it had accepted before for the partition (in its
	// acceptance order), or acknowledged an append whose token was below
	// one it had acknowledged (admit or append) before the append began.
	TokenOrder
	// Unauthorised (check 2): a row, or an acknowledged admit, carries a
	// (partition, member, token) that no ownership in the coordinator's
	// history had.
	Unauthorised
	// TwoOwners (check 2, history): two members held one partition at the
	// end of a revision.
	TwoOwners
	// GrantOrder (check 2, history): a member was given a partition at a
	// token not above every token an earlier ownership of it had.
	GrantOrder
	// LostWrite (check 3): an append acknowledged as ok has no row.
	LostWrite
	// SeqGap (check 4): the sequence numbers one ownership wrote to a
	// resource have a hole.
	SeqGap
	// NotLinearizable (check 5): a partition's commits and fetches are not
	// linearizable as a register.
	NotLinearizable
	// EpochRegression (check 6): a group's epoch went down.
	EpochRegression
	// OffsetRegression (check 7): a partition's committed offset went down
	// by a commit of a member that did not own it at that token.
	OffsetRegression
	// NoOwner (check 8): a partition had no owner for longer than the
	// bound while no fault was active.
	NoOwner
	// ForgedAccepted (check 9): a resource accepted a record under a
	// forged token.
	ForgedAccepted
	// HonestRefused (check 9): a resource's verifier refused an honest
	// owner's token.
	HonestRefused
	// Noticed (check 10): a stock consumer's OnPartitionsRevoked or
	// OnPartitionsLost fired, in a run whose faults are all ones stock
	// consumers must not notice (Run.Unnoticed).
	Noticed
	// ClientTwoOwners (check 10): two stock consumers of one group held a
	// partition at once, as their own callbacks tell it (Run.Unnoticed).
	ClientTwoOwners
	// Expelled (check 10): the coordinator deleted a stock consumer's
	// member record while the run was observed (Run.Unnoticed).
	Expelled
)

var kindNames = [...]string{
	TokenOrder:       "token-order",
	Unauthorised:     "unauthorised",
	TwoOwners:        "two-owners",
	GrantOrder:       "grant-order",
	LostWrite:        "lost-write",
	SeqGap:           "seq-gap",
	NotLinearizable:  "not-linearizable",
	EpochRegression:  "epoch-regression",
	OffsetRegression: "offset-regression",
	NoOwner:          "no-owner",
	ForgedAccepted:   "forged-accepted",
	HonestRefused:    "honest-refused",
	Noticed:          "noticed",
	ClientTwoOwners:  "client-two-owners",
	Expelled:         "expelled",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// NoPartition is Violation.Partition for a violation about no one
// partition (a group's epoch).
const NoPartition int32 = -1

// Violation is one broken property, with its evidence.
type Violation struct {
	Kind Kind
	// Resource is the resource the violation is about ("postgres",
	// "etcd"), or empty.
	Resource string
	// Group is the group the violation is about, if not Run.Group.
	Group string `json:",omitempty"`
	// Partition is the partition, or NoPartition.
	Partition int32
	// Evidence says what was seen, with times, revisions and orders.
	Evidence string
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(v.Kind.String())
	if v.Resource != "" {
		b.WriteString(" " + v.Resource)
	}
	if v.Group != "" {
		b.WriteString(" group " + v.Group)
	}
	if v.Partition != NoPartition {
		fmt.Fprintf(&b, " p%d", v.Partition)
	}
	b.WriteString(": " + v.Evidence)
	return b.String()
}

// Report is the outcome of Check.
type Report struct {
	Run Run
	// Violations are sorted by kind, resource, group and partition, each
	// partition's in the order they were found (acceptance order,
	// revision, time).
	Violations []Violation
	Stats      Stats
	// Notes are what limited the checks (a torn log line, a partition
	// whose linearizability search timed out).
	Notes []string
}

// OK reports whether the run broke nothing.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Stats describes the run.
type Stats struct {
	// Faults counts the faults by kind, sorted by kind.
	Faults []FaultCount
	// Resources are the append and admit counts of each resource, sorted
	// by resource.
	Resources []ResourceStats
	// Commits are the commit and fetch counts of the workers (from their
	// attempt logs) and of the consumers (Offsets).
	Commits []CommitStats
	// Revisions counts History's distinct revisions.
	Revisions int
	// ObservedFrom and ObservedTo are the first and last RevTimes sample.
	ObservedFrom, ObservedTo time.Time
	// FormedAt is when every partition first had an owner (zero if never).
	FormedAt time.Time
	// StartupUnowned is the partition-time without an owner before
	// FormedAt (or in the whole run if the group never formed); Unowned
	// is the partition-time without an owner after FormedAt.
	StartupUnowned, Unowned time.Duration
	// Bound is the liveness bound: session timeout + rebalance timeout +
	// slack.
	Bound time.Duration
	// Recoveries are the recovery times after each fault, in the order of
	// the schedule.
	Recoveries []Recovery
	// Linearizability is porcupine's result for each partition with
	// offset operations, sorted by group and partition.
	Linearizability []Linearizability
	// Forgeries count the forging client's attempts by kind, sorted.
	Forgeries []ForgeryStats
}

// ForgeryStats counts the forge attempts of one kind: how many were
// tried, and how each ended, per resource tried (a fan-out tries the
// next resource only after one accepted).
type ForgeryStats struct {
	Kind                                       string
	Tried, Accepted, Unverified, Stale, Errors int
}

// FaultCount is how many faults of one kind the schedule had.
type FaultCount struct {
	Kind  string
	Count int
}

// ResourceStats counts the attempts at one resource and what it holds.
type ResourceStats struct {
	Resource string
	// Appends counts append attempts: Accepted ok, Stale rejected for a
	// stale token, Errors of unknown outcome. Held counts appends a pause
	// held (zombie writes), whatever their outcome, and HeldAccepted
	// those of them the resource accepted.
	Appends, Accepted, Stale, Errors int
	// Unverified counts honest appends refused as unverified.
	Unverified         int
	Held, HeldAccepted int
	// Admits and AdmitsStale count admit attempts and those rejected.
	Admits, AdmitsStale int
	// Rows counts the records the resource holds.
	Rows int
}

// CommitStats counts the commits and fetches of one source: "workers"
// (attempt logs) or "consumers" (Offsets).
type CommitStats struct {
	Source string
	// Commits: OK accepted, Refused (an error code, or a stale token for
	// the workers), Unknown (no answer).
	Commits, OK, Refused, Unknown int
	// Fetches and FetchesOK count offset fetches.
	Fetches, FetchesOK int
}

// Recovery is how long ownership took to settle after one fault.
type Recovery struct {
	Fault Fault
	// Recovered is when the last partition that lost its owner between
	// the fault's start and its deadline (before the next fault began)
	// had one again; the fault's End if none lost its owner.
	Recovered time.Time
	// Took is Recovered - End (0 if ownership was whole at End).
	Took time.Duration
	// Deadline is the first moment after End with no fault active, plus
	// the bound.
	Deadline time.Time
	// Healed is false for a fault without an End: no recovery is
	// measured.
	Healed bool
	// Unrecovered is true if a partition that lost its owner in the
	// window still had none when the observation ended (Recovered is
	// then that end).
	Unrecovered bool
}

// Linearizability is porcupine's verdict on one partition's offsets.
type Linearizability struct {
	Group     string
	Partition int32
	// Ops counts the operations checked; Unknown counts the commits of
	// unknown outcome among them (open-ended: they may take effect at
	// any time after their call, or never).
	Ops, Unknown int
	// Result is "Ok", "Illegal" or "Unknown" (the search timed out).
	Result string
	// Visualization is the HTML file porcupine wrote for an illegal
	// history, if Options.OutDir was set.
	Visualization string `json:",omitempty"`
}

// textViolationsPerKind is how many violations of one kind WriteText
// lists before it only counts them.
const textViolationsPerKind = 20

// WriteText writes a readable summary of r to w.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	verdict := "OK"
	if !r.OK() {
		verdict = fmt.Sprintf("FAILED: %d violations", len(r.Violations))
	}
	fmt.Fprintf(&b, "chaos check, seed %d, group %q, topic %q (%d partitions): %s\n",
		r.Run.Seed, r.Run.Group, r.Run.Topic, r.Run.Partitions, verdict)
	if len(r.Violations) > 0 {
		b.WriteString("\nviolations:\n")
		for i := 0; i < len(r.Violations); {
			k := r.Violations[i].Kind
			j := i
			for j < len(r.Violations) && r.Violations[j].Kind == k {
				j++
			}
			fmt.Fprintf(&b, "  %s: %d\n", k, j-i)
			for _, v := range r.Violations[i:min(j, i+textViolationsPerKind)] {
				fmt.Fprintf(&b, "    %s\n", v)
			}
			if j-i > textViolationsPerKind {
				fmt.Fprintf(&b, "    ... %d more\n", j-i-textViolationsPerKind)
			}
			i = j
		}
	}
	s := &r.Stats
	b.WriteString("\nfaults:")
	if len(s.Faults) == 0 {
		b.WriteString(" none")
	}
	for _, f := range s.Faults {
		fmt.Fprintf(&b, " %s=%d", f.Kind, f.Count)
	}
	b.WriteString("\n\nresources:\n")
	for _, rs := range s.Resources {
		fmt.Fprintf(&b, "  %-9s appends %d: accepted %d, stale %d, unverified %d, unknown %d; held by a pause %d (accepted %d); admits %d (stale %d); rows %d\n",
			rs.Resource, rs.Appends, rs.Accepted, rs.Stale, rs.Unverified, rs.Errors, rs.Held, rs.HeldAccepted, rs.Admits, rs.AdmitsStale, rs.Rows)
	}
	b.WriteString("\ncommits:\n")
	for _, c := range s.Commits {
		fmt.Fprintf(&b, "  %-9s commits %d: ok %d, refused %d, unknown %d; fetches %d (ok %d)\n",
			c.Source, c.Commits, c.OK, c.Refused, c.Unknown, c.Fetches, c.FetchesOK)
	}
	fmt.Fprintf(&b, "\nownership: %d revisions, observed %s to %s\n", s.Revisions, stamp(s.ObservedFrom), stamp(s.ObservedTo))
	if s.FormedAt.IsZero() {
		b.WriteString("  the partitions never all had an owner at once\n")
	} else {
		fmt.Fprintf(&b, "  every partition owned from %s (+%v)\n", stamp(s.FormedAt), s.FormedAt.Sub(s.ObservedFrom).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "  unowned partition-seconds: %.1f after that, %.1f before\n", s.Unowned.Seconds(), s.StartupUnowned.Seconds())
	fmt.Fprintf(&b, "  liveness bound %v\n", s.Bound)
	if len(s.Recoveries) > 0 {
		b.WriteString("\nrecovery after each fault:\n")
	}
	for _, rc := range s.Recoveries {
		f := rc.Fault
		if !rc.Healed {
			fmt.Fprintf(&b, "  %-12s %-16s %s  never healed\n", f.Kind, f.Target, stamp(f.Start))
			continue
		}
		outcome := fmt.Sprintf("owned again after %v", rc.Took.Round(time.Millisecond))
		if rc.Unrecovered {
			outcome = fmt.Sprintf("a partition still unowned at the end, %v after", rc.Took.Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "  %-12s %-16s %s for %v: %s (deadline %s)\n",
			f.Kind, f.Target, stamp(f.Start), f.End.Sub(f.Start).Round(time.Millisecond), outcome, stamp(rc.Deadline))
	}
	if len(s.Linearizability) > 0 {
		b.WriteString("\nlinearizability of the offsets (porcupine):\n")
		counts := make(map[string]int)
		for _, l := range s.Linearizability {
			counts[l.Result]++
			if l.Result != "Ok" {
				fmt.Fprintf(&b, "  group %q p%d: %s, %d ops (%d unknown) %s\n", l.Group, l.Partition, l.Result, l.Ops, l.Unknown, l.Visualization)
			}
		}
		fmt.Fprintf(&b, "  partitions: Ok %d, Illegal %d, Unknown %d\n", counts["Ok"], counts["Illegal"], counts["Unknown"])
	}
	if len(s.Forgeries) > 0 {
		b.WriteString("\nforgeries (per resource tried):\n")
		for _, f := range s.Forgeries {
			fmt.Fprintf(&b, "  %-16s tried %d: accepted %d, refused unverified %d, stale %d, unknown %d\n",
				f.Kind, f.Tried, f.Accepted, f.Unverified, f.Stale, f.Errors)
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

// sortViolations sorts vs by kind, resource, group and partition, keeping
// the order of each partition's violations.
func sortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Resource, b.Resource),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Partition, b.Partition))
	})
}
