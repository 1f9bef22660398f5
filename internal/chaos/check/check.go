package check

import (
	"errors"
	"fmt"
	"time"
)

// DefaultSlack is Options.Slack's default: the HA set's default election
// TTL (5 s; a fail-over restarts every session at the new leader's
// restore) plus 1 s for the heartbeat interval and the ~100 ms RevTimes
// sampling.
const DefaultSlack = 6 * time.Second

// DefaultLinearizabilityTimeout is Options.LinearizabilityTimeout's
// default.
const DefaultLinearizabilityTimeout = 30 * time.Second

// Options adjusts Check. The zero value is the defaults.
type Options struct {
	// OutDir, if not empty, receives porcupine's HTML visualisation of
	// each partition whose offsets are not linearizable. It is created if
	// missing.
	OutDir string
	// Slack is added to the session and rebalance timeouts to bound how
	// long a partition may stay without an owner while no fault is
	// active, overriding DefaultSlack.
	Slack time.Duration
	// LinearizabilityTimeout bounds porcupine's search on one partition,
	// overriding DefaultLinearizabilityTimeout. A search that times out
	// is reported as "Unknown" with a note, not as a violation.
	LinearizabilityTimeout time.Duration
}

// Check checks a run. It returns an error only for input it cannot read:
// an invalid Run, a History key or value that does not decode, no
// RevTimes.
func Check(in *Input, opts Options) (*Report, error) {
	if err := in.Run.validate(); err != nil {
		return nil, err
	}
	if len(in.RevTimes) == 0 {
		return nil, errors.New("check: no RevTimes: the history cannot be placed in time")
	}
	if opts.Slack < 0 || opts.LinearizabilityTimeout < 0 {
		return nil, fmt.Errorf("check: negative slack %v or linearizability timeout %v", opts.Slack, opts.LinearizabilityTimeout)
	}
	if opts.Slack == 0 {
		opts.Slack = DefaultSlack
	}
	if opts.LinearizabilityTimeout == 0 {
		opts.LinearizabilityTimeout = DefaultLinearizabilityTimeout
	}
	run := &in.Run
	h, err := replay(run, in.History)
	if err != nil {
		return nil, err
	}
	rep := &Report{Run: in.Run, Notes: append([]string(nil), in.Notes...)}
	st := &rep.Stats
	countStats(in, st)
	st.Revisions = h.revisions
	c := newClock(in.RevTimes)
	st.ObservedFrom, st.ObservedTo = c.from(), c.to()
	st.Bound = run.SessionTimeout + run.RebalanceTimeout + opts.Slack

	vs := checkTokenOrder(in.Rows, in.Attempts)               // 1
	vs = append(vs, checkGranted(h, in.Rows, in.Attempts)...) // 2
	vs = append(vs, h.violations...)                          // 2 (two owners, grant order), 6
	vs = append(vs, checkLost(in.Rows, in.Attempts)...)       // 3
	vs = append(vs, checkSeqs(in.Rows)...)                    // 4
	lin, lvs, notes := checkLinearizable(run, in.Attempts, in.Offsets, opts.LinearizabilityTimeout, opts.OutDir)
	st.Linearizability = lin
	vs = append(vs, lvs...) // 5
	rep.Notes = append(rep.Notes, notes...)
	vs = append(vs, h.checkOffsets()...)                       // 7
	vs = append(vs, checkLiveness(run, h, c, st.Bound, st)...) // 8
	vs = append(vs, checkForgeries(in.Rows, in.Attempts)...)   // 9
	cvs, err := checkConsumerGroups(run, in.History)           // 2, for the stock consumers' groups
	if err != nil {
		return nil, err
	}
	vs = append(vs, cvs...)
	cvs, err = checkClients(run, in.History, in.Callbacks, c.to(), c.revs[len(c.revs)-1]) // 10
	if err != nil {
		return nil, err
	}
	vs = append(vs, cvs...)
	countForgeries(in.Attempts, st)
	sortViolations(vs)
	rep.Violations = vs
	if n := rowsWithoutMember(in.Rows); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d rows name no member: checks 2 to 4 went by their worker", n))
	}
	return rep, nil
}

func rowsWithoutMember(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.Member == "" {
			n++
		}
	}
	return n
}
